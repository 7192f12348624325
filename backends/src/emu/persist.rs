//! Persisting the zone table: a flush, and every zone action before it completes (rule in
//! `docs/format.md`, "Write ordering and crash semantics", 3).

use std::path::Path;
use std::sync::atomic::Ordering;

use ziob_runtime::DmaBuf;

use crate::emu::checks::{DataChecks, Tiling};
use crate::emu::format::{self, TableEntry, CHECKED_TABLE_BYTES_MAX};
use crate::emu::{rt_err, EmuDevice};
use crate::model::error::{DeviceError, Result};
use crate::model::state::{PersistedZone, ZoneTable};

/// What the zone-table writes have made durable (behind `EmuInner::persist`, which
/// serialises them).
pub(super) struct Persisted {
    /// Sequence number of the next table write.
    pub(super) next_sequence: u64,
    /// The zones as the last table this device wrote and made durable stored them. `None`
    /// until it wrote one (the table an open read may not have been made durable by the
    /// process that wrote it) and while a table write is under way or after one failed or
    /// was cancelled (its slot may hold a table that is not this one, and may yet become
    /// durable): the next table write then syncs the data first and stores no checks.
    pub(super) zones: Option<Vec<PersistedZone>>,
    /// Whether that table carries data checks. A flush that finds nothing changed writes the
    /// table again without them (its data is durable): after that, damage to the data is
    /// reported by whoever reads it, not taken for a torn flush. (A close flushes once, so
    /// it leaves a checked table if that flush wrote data.)
    pub(super) checked: bool,
}

/// A host error injected by a test (`what` names the step that fails).
fn injected(path: &Path, what: &str, errno: i32) -> DeviceError {
    DeviceError::io(
        format!("emu:{}: {what} (injected host error)", path.display()),
        std::io::Error::from_raw_os_error(errno),
    )
}

impl EmuDevice {
    /// Persists the zone table (see [`EmuDevice::persist_with`]).
    pub(super) async fn persist(&self) -> Result<()> {
        self.persist_with(|table| Ok(table.snapshot()), |_| Ok(()))
            .await
    }

    /// Persists the zones `snapshot` makes of the zone table (called under the controller
    /// lock, once table writes are serialised), then, on success and before the next table
    /// write can start, runs `then` on the table (so no later table write can miss what
    /// `snapshot` stored). Nothing is written if `snapshot` fails.
    ///
    /// - Nothing changed since the last table this device made durable: nothing to write
    ///   (every write the snapshot covers is durable already), unless that table carries
    ///   data checks: then it is written again without them, with one `fdatasync`.
    /// - Every zone's data that grew since then was written by writes short enough to carry
    ///   checksums ([`DataChecks`]), in all at most [`CHECKED_TABLE_BYTES_MAX`]: write the
    ///   next slot with a check per grown zone, then one `fdatasync` (an open that finds a
    ///   check not matching falls back to the previous table).
    /// - Otherwise: `fdatasync` the data, write the next slot, `fdatasync`.
    pub(super) async fn persist_with<T>(
        &self,
        snapshot: impl FnOnce(&ZoneTable) -> Result<Vec<PersistedZone>>,
        then: impl FnOnce(&mut ZoneTable) -> Result<T>,
    ) -> Result<T> {
        let path = &self.inner.path;
        let mut persisted = self.inner.persist.lock().await;
        let (zones, tilings) = {
            let c = self.controller();
            let zones = snapshot(&c.table)?;
            let tilings = persisted
                .zones
                .as_deref()
                .and_then(|last| self.tilings(&c.checks, last, &zones));
            (zones, tilings)
        };
        if !persisted.checked && persisted.zones.as_ref() == Some(&zones) {
            return then(&mut self.controller().table);
        }
        // Until this table is durable, no later one may assume the slot's content.
        let last = persisted.zones.take();
        let one_sync = tilings.is_some();
        let entries: Vec<TableEntry> = match tilings {
            Some(tilings) => zones
                .iter()
                .zip(&tilings)
                .map(|(&zone, tiling)| TableEntry {
                    zone,
                    check: tiling.as_ref().map(Tiling::fold),
                })
                .collect(),
            None => {
                self.sync_file().await?;
                zones.iter().copied().map(TableEntry::unchecked).collect()
            }
        };
        let seq = persisted.next_sequence;
        let slot = format::encode_table(&self.inner.layout, seq, &entries);
        let faults = &self.inner.faults;
        match faults.table.swap(0, Ordering::Relaxed) {
            0 => {}
            errno => return Err(injected(path, "zone table write", errno)),
        }
        let (res, _) = self
            .write_at(
                DmaBuf::from_slice(&slot),
                self.inner.layout.slot_offset(seq % 2),
            )
            .await;
        res?;
        match faults.table_sync.swap(0, Ordering::Relaxed) {
            0 => {}
            errno => {
                return Err(injected(
                    path,
                    "fdatasync after the zone table write",
                    errno,
                ))
            }
        }
        self.sync_file().await?;
        tracing::trace!(sequence = seq, one_sync, "zone table written");
        persisted.next_sequence = seq + 1;
        let out = {
            let mut c = self.controller();
            for (zone, z) in zones.iter().enumerate() {
                let reset = last
                    .as_deref()
                    .is_some_and(|last| z.written_bytes < last[zone].written_bytes);
                c.checks.persisted(zone as u32, z.written_bytes, reset);
            }
            then(&mut c.table)
        };
        persisted.zones = Some(zones);
        persisted.checked = entries.iter().any(|e| e.check.is_some());
        drop(persisted);
        out
    }

    /// `fdatasync`s the device file, counted in [`EmuDevice::fdatasyncs`].
    async fn sync_file(&self) -> Result<()> {
        self.inner.fdatasyncs.fetch_add(1, Ordering::Relaxed);
        let res = self.inner.file.sync_data().await;
        res.map_err(|e| rt_err(&self.inner.path, e))
    }

    /// Per zone of a table that stores `zones` after the table `last`, the writes that make
    /// up what the zone grew by (`None` for a zone that did not grow): `None` if one of those
    /// ranges has no checks or they add up to more than [`CHECKED_TABLE_BYTES_MAX`] (the
    /// table then needs the data synced before it is written).
    fn tilings(
        &self,
        checks: &DataChecks,
        last: &[PersistedZone],
        zones: &[PersistedZone],
    ) -> Option<Vec<Option<Tiling>>> {
        let bs = self.inner.geometry.block_size_bytes;
        let mut checked_bytes = 0u64;
        let mut tilings = Vec::with_capacity(zones.len());
        for (zone, (z, before)) in zones.iter().zip(last).enumerate() {
            let tiling = if z.written_bytes > before.written_bytes {
                checked_bytes += z.written_bytes - before.written_bytes;
                if checked_bytes > CHECKED_TABLE_BYTES_MAX {
                    return None;
                }
                Some(checks.tiling(zone as u32, before.written_bytes, z.written_bytes, bs)?)
            } else {
                None
            };
            tilings.push(tiling);
        }
        Some(tilings)
    }
}
