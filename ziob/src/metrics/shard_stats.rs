//! Per-shard statistics: the counters and gauges of one core's shard ([`ShardStats`]) and
//! the live cell the shard records them in, with its latency histograms ([`StatsCell`],
//! [`OpTimer`]). Recording is plain arithmetic on core-local cells: no atomics, no locks.

use std::cell::RefCell;

use hdrhistogram::Histogram;

use super::clock::Stamp;
use super::{OpKind, OpLatencies};

/// Counters of one core's buffer shard. Sizes in bytes, times in nanoseconds.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ShardStats {
    /// The core.
    pub core: usize,
    /// Bytes written by applications and not yet on the device.
    pub dirty_bytes: u64,
    /// Bytes already on the device and kept in memory for reads.
    pub clean_bytes: u64,
    /// Memory charged against the budget (whole write-back units).
    pub memory_used_bytes: u64,
    /// Most memory ever charged at once (never above the budget).
    pub memory_peak_bytes: u64,
    /// The shard's memory budget.
    pub memory_budget_bytes: u64,
    /// Bytes accepted from applications (appends and writes; with the buffer off, those the
    /// device confirmed to a call still waiting for the answer).
    pub bytes_written: u64,
    /// Writes issued to the device by write-back.
    pub writebacks: u64,
    /// Bytes written to the device by write-back.
    pub writeback_bytes: u64,
    /// Write-back sizes: median, in bytes (to 3 significant digits).
    pub writeback_size_p50_bytes: u64,
    /// Write-back sizes: largest, in bytes.
    pub writeback_size_max_bytes: u64,
    /// Write-backs that failed.
    pub writeback_errors: u64,
    /// Failed write-backs retried (transient errors: see the crate docs, "Write-back
    /// errors").
    pub writeback_retries: u64,
    /// Reads served entirely from memory.
    pub read_hits: u64,
    /// Reads that needed the device (at least partly).
    pub read_misses: u64,
    /// Reads of ranges only the device holds (on threads that are no core: any range written
    /// back) served straight from the device on this core, without the zone's owner (core
    /// 0's also count those on threads that are no core of the instance): neither hits nor
    /// misses, not in `read_bytes` nor the `read` latency.
    pub direct_reads: u64,
    /// Bytes returned by direct reads.
    pub direct_read_bytes: u64,
    /// Direct reads that went to the owner after all: the zone was reset during the device
    /// read, or the device read failed.
    pub direct_read_fallbacks: u64,
    /// Device zones opened (implicitly, by the first write-back into a non-open zone).
    pub device_zone_opens: u64,
    /// Device zones closed after write-back, releasing their open resource.
    pub device_zone_closes: u64,
    /// Device zones finished.
    pub device_zone_finishes: u64,
    /// Device zones reset.
    pub device_zone_resets: u64,
    /// Times a writer waited for memory.
    pub backpressure_waits: u64,
    /// Total time writers waited for memory.
    pub backpressure_wait_ns: u64,
    /// Device flushes issued.
    pub device_flushes: u64,
    /// Write-backs completed as durable writes (Force Unit Access) that extended a zone's
    /// durable prefix (a zone flush that ends at that prefix needs no device flush).
    pub device_durable_writes: u64,
    /// Partial blocks padded and written back because memory was short.
    pub pressure_pads: u64,
    /// Bytes accepted by appends (part of `bytes_written`; the rest came by `write_at`).
    pub append_bytes: u64,
    /// Bytes returned by reads (from memory and from the device).
    pub read_bytes: u64,
    /// Gauge: calls admitted on this core and not finished (the shard's queue depth), not
    /// counting the statistics call itself.
    pub calls_in_flight: u64,
    /// Most calls in flight at once.
    pub calls_in_flight_peak: u64,
    /// Gauge: device writes of write-back in flight.
    pub device_writes_in_flight: u64,
    /// Gauge: zones holding buffer memory (dirty or clean data).
    pub zones_buffered: u64,
    /// Gauge: zones whose write-back waits for a device open/active resource.
    pub zones_waiting_for_resource: u64,
}

/// The live counters of a shard, with the write-back size and latency histograms.
pub(crate) struct StatsCell {
    pub(crate) s: ShardStats,
    writeback_sizes: Histogram<u64>,
    pub(crate) latency: OpLatencies,
}

impl StatsCell {
    pub(crate) fn new(core: usize, budget: u64) -> StatsCell {
        super::clock::init();
        StatsCell {
            s: ShardStats {
                core,
                memory_budget_bytes: budget,
                ..ShardStats::default()
            },
            writeback_sizes: Histogram::new(3).expect("3 significant digits is valid"),
            latency: OpLatencies::new(),
        }
    }

    pub(crate) fn record_writeback(&mut self, bytes: u64) {
        self.s.writebacks += 1;
        self.s.writeback_bytes += bytes;
        self.s.writeback_size_max_bytes = self.s.writeback_size_max_bytes.max(bytes);
        let _ = self.writeback_sizes.record(bytes);
    }

    pub(crate) fn snapshot(&self) -> ShardStats {
        let mut s = self.s.clone();
        if !self.writeback_sizes.is_empty() {
            let p50 = self.writeback_sizes.value_at_quantile(0.5);
            s.writeback_size_p50_bytes = self.writeback_sizes.lowest_equivalent(p50);
        }
        s
    }
}

/// Times one operation from its creation and records it in the shard's latency histogram
/// of `op` when dropped: when the operation completes, fails or is dropped itself.
pub(crate) struct OpTimer<'a> {
    cell: &'a RefCell<StatsCell>,
    op: OpKind,
    start: Stamp,
}

impl<'a> OpTimer<'a> {
    /// Starts timing `op`, to be recorded in `cell`.
    #[inline]
    pub(crate) fn start(cell: &'a RefCell<StatsCell>, op: OpKind) -> OpTimer<'a> {
        OpTimer {
            cell,
            op,
            start: Stamp::now(),
        }
    }

    /// Drops the timer without recording anything (an attempt that hands the operation on
    /// to a path that times it itself).
    #[inline]
    pub(crate) fn discard(self) {
        std::mem::forget(self);
    }
}

impl Drop for OpTimer<'_> {
    #[inline]
    fn drop(&mut self) {
        let ns = self.start.elapsed_ns();
        // Never borrowed across an await; `try_` only so that a drop while unwinding from a
        // panic inside a borrow does not panic again.
        if let Ok(mut c) = self.cell.try_borrow_mut() {
            c.latency.record(self.op, ns);
        }
    }
}

impl ShardStats {
    /// Sums the counters and gauges of several shards (core is the count of shards summed;
    /// peaks are the sum of the shards' peaks; the write-back size p50 and max are the
    /// largest of the shards').
    pub fn total(shards: &[ShardStats]) -> ShardStats {
        let mut t = ShardStats {
            core: shards.len(),
            ..ShardStats::default()
        };
        for s in shards {
            t.dirty_bytes += s.dirty_bytes;
            t.clean_bytes += s.clean_bytes;
            t.memory_used_bytes += s.memory_used_bytes;
            t.memory_budget_bytes += s.memory_budget_bytes;
            t.memory_peak_bytes += s.memory_peak_bytes;
            t.bytes_written += s.bytes_written;
            t.writebacks += s.writebacks;
            t.writeback_bytes += s.writeback_bytes;
            t.writeback_size_p50_bytes = t.writeback_size_p50_bytes.max(s.writeback_size_p50_bytes);
            t.writeback_size_max_bytes = t.writeback_size_max_bytes.max(s.writeback_size_max_bytes);
            t.writeback_errors += s.writeback_errors;
            t.writeback_retries += s.writeback_retries;
            t.read_hits += s.read_hits;
            t.read_misses += s.read_misses;
            t.direct_reads += s.direct_reads;
            t.direct_read_bytes += s.direct_read_bytes;
            t.direct_read_fallbacks += s.direct_read_fallbacks;
            t.device_zone_opens += s.device_zone_opens;
            t.device_zone_closes += s.device_zone_closes;
            t.device_zone_finishes += s.device_zone_finishes;
            t.device_zone_resets += s.device_zone_resets;
            t.backpressure_waits += s.backpressure_waits;
            t.backpressure_wait_ns += s.backpressure_wait_ns;
            t.device_flushes += s.device_flushes;
            t.device_durable_writes += s.device_durable_writes;
            t.pressure_pads += s.pressure_pads;
            t.append_bytes += s.append_bytes;
            t.read_bytes += s.read_bytes;
            t.calls_in_flight += s.calls_in_flight;
            t.calls_in_flight_peak += s.calls_in_flight_peak;
            t.device_writes_in_flight += s.device_writes_in_flight;
            t.zones_buffered += s.zones_buffered;
            t.zones_waiting_for_resource += s.zones_waiting_for_resource;
        }
        t
    }
}
