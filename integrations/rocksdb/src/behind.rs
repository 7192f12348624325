//! Appends that run behind their writer ([`Behind`]): a file's hand-overs of gathered bytes
//! run as tasks on a ZIOB core, in the order they were started, while the RocksDB thread that
//! wrote them goes on. Waking a core and its answer each cost a scheduling round (a quarter
//! of a millisecond and more on a busy two-core machine), which a writer that waited for
//! every hand-over paid in full.

use std::collections::VecDeque;
use std::future::Future;

use futures::channel::oneshot;
use ziob::runtime::Handle;

use crate::error::PluginError;

/// Most hand-overs of one file running at once; starting one more first waits for the
/// oldest. Bounds the memory a writer holds: this many hand-overs of up to what one `Append`
/// brings, or the gathering buffer (plus, for a table, the hand-overs its read-cache carry
/// still views: `read_cache::PageCarry`).
pub const BEHIND_MAX: usize = 4;

/// The ZIOB core the hand-overs run on (the file system's calls from there reach the zone's
/// owner core as any call does).
pub const BEHIND_CORE: usize = 0;

/// One file's hand-overs still running on a ZIOB core, oldest first.
///
/// Each runs only after the one started before it ended having appended all its bytes: one
/// that failed (or never ran: the runtime stopped) makes every later one fail unappended, so
/// the file never has bytes after a gap. Every result comes back to the writer, in order,
/// from [`wait_all`](Behind::wait_all) or from a later [`start`](Behind::start).
#[derive(Debug, Default)]
pub struct Behind {
    /// The results of the hand-overs started and not yet collected, oldest first.
    running: VecDeque<oneshot::Receiver<Result<(), PluginError>>>,
    /// Fires when the last hand-over started ends: `true` if it appended all its bytes.
    last_done: Option<oneshot::Receiver<bool>>,
}

impl Behind {
    /// Whether no hand-over is uncollected.
    #[cfg(test)]
    fn is_idle(&self) -> bool {
        self.running.is_empty()
    }

    /// Starts the hand-over `append` of file `path` (the future that appends its bytes) on
    /// core [`BEHIND_CORE`] of `handle`, to run after every hand-over started before. Returns
    /// the error of an earlier hand-over that ended (not this one's, which comes later);
    /// while [`BEHIND_MAX`] are running it first waits for the oldest.
    pub fn start<F, Fut>(
        &mut self,
        handle: &Handle,
        path: &str,
        append: F,
    ) -> Result<(), PluginError>
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = Result<(), PluginError>> + 'static,
    {
        self.collect_ended(path)?;
        while self.running.len() >= BEHIND_MAX {
            self.wait_oldest(path)?;
        }
        let after = self.last_done.take();
        let (done_tx, done_rx) = oneshot::channel();
        let (result_tx, result_rx) = oneshot::channel();
        // Set before the spawn: if it fails, the closure (and `done_tx`) is dropped, so a
        // later hand-over finds this one never ran and does not run either.
        self.last_done = Some(done_rx);
        let owned = path.to_string();
        handle
            .spawn_on(BEHIND_CORE, move || async move {
                let earlier_ok = match after {
                    None => true,
                    Some(after) => after.await.unwrap_or(false),
                };
                let result = if earlier_ok {
                    append().await
                } else {
                    Err(PluginError::Io(format!(
                        "not appended to /{owned}: an earlier append to it failed"
                    )))
                };
                let _ = done_tx.send(result.is_ok());
                let _ = result_tx.send(result);
            })
            .map_err(|e| PluginError::Io(format!("appending to /{path}: {e}")))?;
        self.running.push_back(result_rx);
        Ok(())
    }

    /// Waits until every hand-over started has ended; the first error among them, if any
    /// (every result is collected either way).
    pub fn wait_all(&mut self, path: &str) -> Result<(), PluginError> {
        let mut first = Ok(());
        while !self.running.is_empty() {
            if let Err(e) = self.wait_oldest(path) {
                if first.is_ok() {
                    first = Err(e);
                }
            }
        }
        first
    }

    /// Collects the results of the oldest hand-overs that have ended, without waiting: the
    /// first error among them, if any.
    pub fn collect_ended(&mut self, path: &str) -> Result<(), PluginError> {
        while let Some(oldest) = self.running.front_mut() {
            match oldest.try_recv() {
                Ok(None) => return Ok(()),
                Ok(Some(result)) => {
                    self.running.pop_front();
                    result?;
                }
                Err(oneshot::Canceled) => {
                    self.running.pop_front();
                    return Err(runtime_stopped(path));
                }
            }
        }
        Ok(())
    }

    /// Waits for the oldest hand-over and returns its result.
    fn wait_oldest(&mut self, path: &str) -> Result<(), PluginError> {
        let Some(oldest) = self.running.pop_front() else {
            return Ok(());
        };
        if ziob::runtime::on_core() {
            // Not reached (the plugin's callers are RocksDB's threads): blocking here could
            // wait for the very core this thread is.
            return Err(PluginError::Io(format!(
                "appends to /{path} waited for on a ZIOB core"
            )));
        }
        match futures::executor::block_on(oldest) {
            Ok(result) => result,
            Err(oneshot::Canceled) => Err(runtime_stopped(path)),
        }
    }
}

fn runtime_stopped(path: &str) -> PluginError {
    PluginError::Io(format!(
        "appends to /{path} were dropped: the ZIOB runtime stopped or the task panicked"
    ))
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use ziob::runtime::Runtime;

    use super::*;

    fn runtime() -> Runtime {
        Runtime::builder().cores(1).build().unwrap()
    }

    /// A small xorshift generator (seeded; the seed is in every failure message).
    fn next(x: &mut u64) -> u64 {
        *x ^= *x << 13;
        *x ^= *x >> 7;
        *x ^= *x << 17;
        *x
    }

    #[test]
    fn hand_overs_land_in_the_order_they_were_started() {
        let rt = runtime();
        for seed in 1..=4u64 {
            let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
            let landed = Arc::new(Mutex::new(Vec::new()));
            let mut behind = Behind::default();
            for i in 0..40u32 {
                // Earlier ones often take longer than later ones: without the chain they
                // would land out of order.
                let pause = Duration::from_micros(next(&mut x) % 3000);
                let landed = landed.clone();
                behind
                    .start(&rt.handle(), "f", move || async move {
                        ziob::runtime::sleep(pause).await.unwrap();
                        landed.lock().unwrap().push(i);
                        Ok(())
                    })
                    .unwrap();
                assert!(behind.running.len() <= BEHIND_MAX);
            }
            behind.wait_all("f").unwrap();
            assert!(behind.is_idle());
            let got = landed.lock().unwrap().clone();
            assert_eq!(got, (0..40).collect::<Vec<_>>(), "seed {seed}");
        }
    }

    #[test]
    fn after_a_failed_hand_over_no_later_one_runs_and_the_error_comes_back() {
        let rt = runtime();
        for fail_at in 0..6u32 {
            let ran = Arc::new(Mutex::new(Vec::new()));
            let mut behind = Behind::default();
            let mut first_err = None;
            for i in 0..6u32 {
                let ran = ran.clone();
                let r = behind.start(&rt.handle(), "f", move || async move {
                    ziob::runtime::sleep(Duration::from_millis(1))
                        .await
                        .unwrap();
                    ran.lock().unwrap().push(i);
                    if i == fail_at {
                        Err(PluginError::NoSpace(format!("hand-over {i}")))
                    } else {
                        Ok(())
                    }
                });
                if let Err(e) = r {
                    first_err = Some(e);
                    break;
                }
            }
            let waited = behind.wait_all("f");
            let e = first_err.or(waited.err()).expect("an error comes back");
            assert!(
                matches!(&e, PluginError::NoSpace(m) if m == &format!("hand-over {fail_at}")),
                "fail_at {fail_at}: {e:?}"
            );
            assert_eq!(
                *ran.lock().unwrap(),
                (0..=fail_at).collect::<Vec<_>>(),
                "fail_at {fail_at}: nothing may land after a gap"
            );
        }
    }

    #[test]
    fn hand_overs_dropped_by_a_stopped_runtime_are_errors() {
        let rt = runtime();
        let handle = rt.handle();
        let mut behind = Behind::default();
        behind
            .start(&handle, "f", || async {
                let _ = ziob::runtime::sleep(Duration::from_secs(3600)).await;
                Ok(())
            })
            .unwrap();
        drop(rt);
        let e = behind.wait_all("f").unwrap_err();
        assert!(e.to_string().contains("were dropped"), "{e}");
        // Starting another fails at once (or, if the spawn got through, when waited for).
        let r = behind
            .start(&handle, "f", || async { Ok(()) })
            .and_then(|()| behind.wait_all("f"));
        assert!(r.is_err());
    }
}
