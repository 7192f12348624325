//! What a shard tells about itself: Report Zones as applications see them, statistics, and
//! a bookkeeping dump for diagnosing a stuck program.

use ziob_backends::{ZoneInfo, ZonedDevice};

use super::Shard;
use crate::error::Result;
use crate::metrics::CoreMetrics;
use crate::metrics::ShardStats;

impl<D: ZonedDevice> Shard<D> {
    /// The zones this shard owns within `[first, first + count)`, as applications see them.
    pub(crate) async fn report(&self, first: u32, count: u32) -> Result<Vec<ZoneInfo>> {
        if !self.buffered {
            let all = self.device.report_zones(first, count).await?;
            return Ok(all
                .into_iter()
                .filter(|z| z.index as usize % self.cores == self.core)
                .collect());
        }
        let last = first.saturating_add(count);
        Ok(self
            .zones
            .borrow()
            .iter()
            .filter(|z| z.index >= first && z.index < last)
            .map(|z| ZoneInfo {
                index: z.index,
                start_bytes: u64::from(z.index) * self.geometry.zone_size_bytes,
                capacity_bytes: self.geometry.zone_capacity_bytes,
                write_pointer_bytes: z.wp,
                state: z.state,
            })
            .collect())
    }

    /// A snapshot of the counters.
    pub(crate) fn stats(&self) -> ShardStats {
        let mut s = self.stats.borrow().snapshot();
        let zones = self.zones.borrow();
        s.dirty_bytes = zones.iter().map(|z| z.dirty_bytes()).sum();
        s.clean_bytes = zones.iter().map(|z| z.clean_bytes()).sum();
        s.memory_used_bytes = self.memory_used.get();
        let direct = self.on_device.counts(self.core);
        s.direct_reads = direct.reads;
        s.direct_read_bytes = direct.bytes;
        s.direct_read_fallbacks = direct.fallbacks;
        s.zones_buffered = zones.iter().filter(|z| z.memory_bytes() > 0).count() as u64;
        s.zones_waiting_for_resource = self.token_queue.borrow().len() as u64;
        // Called through `Ziob::stats` / `Ziob::metrics`, which are admitted calls themselves.
        s.calls_in_flight = self.calls.get().saturating_sub(1);
        debug_assert!(s.memory_used_bytes >= zones.iter().map(|z| z.memory_bytes()).sum::<u64>());
        s
    }

    /// A one-line-per-zone dump of the shard's bookkeeping, for diagnosing a stuck test.
    pub(crate) fn debug_state(&self) -> String {
        let mut out = format!(
            "core {}: open {}/{:?} active {}/{:?} memory {}/{} queue {:?} calls {} closing {}\n",
            self.core,
            self.open_used.get(),
            self.open_max,
            self.active_used.get(),
            self.active_max,
            self.memory_used.get(),
            self.budget_bytes,
            self.token_queue.borrow(),
            self.calls.get(),
            self.closing.get()
        );
        for z in self.zones.borrow().iter() {
            out += &format!(
                "  zone {} {:?} wp {} device {:?} device_wp {} issued {} target {} write-back {:?} op {:?} readers {} error {}\n",
                z.index, z.state, z.wp, z.device, z.device_wp, z.issued_wp, z.target,
                z.writeback, z.op, z.readers, z.error.is_some()
            );
        }
        out
    }

    /// The counters, gauges and latency histograms.
    pub(crate) fn metrics(&self) -> CoreMetrics {
        CoreMetrics {
            stats: self.stats(),
            latency: self.stats.borrow().latency.clone(),
        }
    }

    /// Memory charged against the budget right now.
    pub(crate) fn memory_used_bytes(&self) -> u64 {
        self.memory_used.get()
    }
}
