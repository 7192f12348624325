//! Moving a log to a fresh zone: finish the zone being appended to, find where its records
//! end, take a zone from the space's allocator and write the zone header.

use super::chain::ZoneEnd;
use super::log::ZoneLog;
use super::scan::{scan_to_stop, ScanRange};
use crate::error::{Result, ZiobError};

impl ZoneLog {
    /// Moves the log to a fresh zone, unless another caller already did since the chain had
    /// `generation`.
    ///
    /// Steps: finish the last zone (its appended data becomes durable and it stops taking
    /// appends; callers whose append then fails come here too and find the work done),
    /// scan it from the furthest known append to where its records end and seal it there,
    /// burn the next sequence number, take a zone and write its header, and only then make
    /// it the zone taking appends. A step that fails or is dropped leaves the chain as it
    /// was (the zone taken is given back to be reset before reuse).
    pub(crate) async fn roll(&self, generation: u64) -> Result<()> {
        let _roll = self.log.roll.lock().await;
        let (open, seq) = {
            let mut c = self.log.chain();
            if c.removed {
                return Err(self.log.no_such_log());
            }
            if c.generation != generation {
                return Ok(());
            }
            if c.next_seq == u32::MAX {
                return Err(ZiobError::NoSpace {
                    log: self.log.name.clone(),
                    detail: "the log has used all 2^32 zone sequence numbers".into(),
                });
            }
            let seq = c.next_seq;
            c.next_seq += 1;
            (c.open_zone(), seq)
        };
        let space = &self.space;
        if let Some((open_seq, zone, written)) = open {
            space.client.finish(zone).await?;
            space.allocator().mark_full(zone);
            let range = ScanRange {
                from: written,
                data_end: space.layout.capacity_bytes,
                block_bytes: space.layout.block_bytes,
                capacity_bytes: space.layout.capacity_bytes,
                window_bytes: space.layout.block_bytes * 4,
            };
            let mut read = |off, len| space.client.read(zone, off, len);
            let (_, end, _) = scan_to_stop(&mut read, range).await?;
            let mut c = self.log.chain();
            if c.open_zone().map(|(s, _, _)| s) == Some(open_seq) {
                c.seal_last(Some(end));
                c.end = c
                    .end
                    .max(super::position::Position::new(open_seq, end as u32));
            }
        }
        let prev = {
            let c = self.log.chain();
            c.zones.iter().next_back().and_then(|(&s, z)| match z.end {
                ZoneEnd::Sealed(Some(e)) => Some((s, e as u32)),
                _ => None,
            })
        };
        let zone = space
            .take_zone(&self.log.name, seq, prev, self.log.preferred_core())
            .await?;
        self.log.chain().push_open(seq, zone);
        self.log.changed.notify(usize::MAX);
        tracing::debug!(log = %self.log.name, seq, zone, "zone log moved to a fresh zone");
        Ok(())
    }
}
