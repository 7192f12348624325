//! Streams of a log's records: to the current end, or following new appends.

use std::collections::VecDeque;

use bytes::Bytes;
use futures::Stream;

use super::log::ZoneLog;
use super::position::Position;
use crate::error::Result;

/// Records read at once by a stream.
const STREAM_BATCH_RECORDS: usize = 256;

/// A stream's state between items.
struct Cursor {
    log: ZoneLog,
    at: Position,
    ready: VecDeque<(Position, Bytes)>,
    follow: bool,
}

impl ZoneLog {
    /// The records from `from` on (as [`read_from`](ZoneLog::read_from)), in log order, up
    /// to the end of the log when each batch is read; then the stream ends. An error is the
    /// stream's last item. Reads in batches of 256 records.
    pub fn stream(
        &self,
        from: Position,
    ) -> impl Stream<Item = Result<(Position, Bytes)>> + Send + 'static {
        self.cursor_stream(from, false)
    }

    /// The records from `from` on, then every record appended later, as it is appended:
    /// the stream never ends (except after an error, its last item, e.g. the log removed).
    /// Dropping it at any point is fine.
    pub fn tail(
        &self,
        from: Position,
    ) -> impl Stream<Item = Result<(Position, Bytes)>> + Send + 'static {
        self.cursor_stream(from, true)
    }

    /// Resolves once the log has a record at or beyond `after` (its [`end`](ZoneLog::end)
    /// moved past `after`). Pass the position after the last record you read
    /// ([`Position::after`]) or [`end`](ZoneLog::end).
    ///
    /// # Errors
    /// [`ZiobError::NoSuchLog`](crate::ZiobError::NoSuchLog) once the log is removed.
    pub async fn wait_for(&self, after: Position) -> Result<()> {
        loop {
            let listener = self.log.changed.listen();
            {
                let c = self.log.chain();
                if c.removed {
                    return Err(self.log.no_such_log());
                }
                if c.end > after {
                    return Ok(());
                }
            }
            listener.await;
        }
    }

    fn cursor_stream(
        &self,
        from: Position,
        follow: bool,
    ) -> impl Stream<Item = Result<(Position, Bytes)>> + Send + 'static {
        let state = Cursor {
            log: self.clone(),
            at: from,
            ready: VecDeque::new(),
            follow,
        };
        futures::stream::unfold(Some(state), |state| async move {
            let mut s = state?;
            loop {
                if let Some(item) = s.ready.pop_front() {
                    return Some((Ok(item), Some(s)));
                }
                let window = s.log.space.layout.read_window_bytes;
                match s.log.read_batch(s.at, STREAM_BATCH_RECORDS, window).await {
                    Ok((records, next)) => {
                        s.at = next;
                        if records.is_empty() {
                            if !s.follow {
                                return None;
                            }
                            if let Err(e) = s.log.wait_for(s.at).await {
                                return Some((Err(e), None));
                            }
                        }
                        s.ready.extend(records);
                    }
                    Err(e) => return Some((Err(e), None)),
                }
            }
        })
    }
}
