//! A watchdog thread that turns a step that never finishes (a hung run, a stuck shutdown)
//! into exit status [`EXIT_TIMEOUT`] with a message, instead of a process that waits forever.

use std::sync::mpsc::{channel, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

/// The exit status when a step takes longer than its limit.
pub const EXIT_TIMEOUT: i32 = 3;

enum Msg {
    Arm { what: String, limit: Duration },
    Disarm,
}

/// The watchdog; [`Watchdog::guard`] arms it for one step at a time.
pub struct Watchdog {
    tx: Sender<Msg>,
}

/// One armed step: disarms the watchdog when dropped.
pub struct Armed<'a> {
    dog: &'a Watchdog,
}

impl Watchdog {
    /// Starts the watchdog thread (disarmed). `program` prefixes its message.
    pub fn start(program: &'static str) -> std::io::Result<Watchdog> {
        let (tx, rx) = channel::<Msg>();
        std::thread::Builder::new()
            .name("watchdog".into())
            .spawn(move || {
                let mut armed: Option<(String, Duration, Instant)> = None;
                loop {
                    let msg = match &armed {
                        None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
                        Some((_, _, deadline)) => {
                            rx.recv_timeout(deadline.saturating_duration_since(Instant::now()))
                        }
                    };
                    match msg {
                        // A limit too far away to represent never fires.
                        Ok(Msg::Arm { what, limit }) => {
                            armed = Instant::now()
                                .checked_add(limit)
                                .map(|deadline| (what, limit, deadline));
                        }
                        Ok(Msg::Disarm) => armed = None,
                        Err(RecvTimeoutError::Timeout) => {
                            let (what, limit, _) = armed.take().expect("armed");
                            eprintln!(
                                "{program}: {what} did not finish within {:.1} s: giving up (a hang? raise --timeout if it is just slow)",
                                limit.as_secs_f64()
                            );
                            std::process::exit(EXIT_TIMEOUT);
                        }
                        Err(RecvTimeoutError::Disconnected) => return,
                    }
                }
            })?;
        Ok(Watchdog { tx })
    }

    /// Arms the watchdog: the process exits if `what` is still going after `limit`, unless
    /// the returned guard is dropped first.
    pub fn guard(&self, what: impl Into<String>, limit: Duration) -> Armed<'_> {
        let _ = self.tx.send(Msg::Arm {
            what: what.into(),
            limit,
        });
        Armed { dog: self }
    }
}

impl Drop for Armed<'_> {
    fn drop(&mut self) {
        let _ = self.dog.tx.send(Msg::Disarm);
    }
}
