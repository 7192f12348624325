//! The reference model: per zone, which bytes were acknowledged (a completed append or
//! write), which must be durable (covered by a completed flush, sync, finish or close), and
//! which operations could explain any other byte on the device.

use std::collections::{BTreeMap, VecDeque};

/// An acknowledged write: `len` bytes of operation `op_id` at `offset`.
#[derive(Debug, Clone, Copy)]
pub struct Extent {
    /// Zone offset the API returned.
    pub offset: u64,
    /// The operation (its bytes are `data::op_bytes(op_id, len)`).
    pub op_id: u64,
    /// Length in bytes.
    pub len: u64,
    /// Model clock when the acknowledgement was recorded.
    pub acked_at: u64,
}

impl Extent {
    /// One past the last byte.
    pub fn end(&self) -> u64 {
        self.offset + self.len
    }
}

/// What one zone must hold.
#[derive(Debug, Clone, Default)]
pub struct ZoneModel {
    /// Bytes known to be at `[0, baseline.len())`: what the last recovery found on the device.
    pub baseline: Vec<u8>,
    /// Writes acknowledged since the last reset (or recovery).
    pub acked: Vec<Extent>,
    /// Every write issued to the zone this epoch, `(op_id, len)`, whatever became of it: the
    /// only things that may explain bytes outside `baseline` and `acked`.
    pub issued: Vec<(u64, u64)>,
    /// Bytes from the zone start a completed flush/sync/finish/close made durable.
    pub durable_bytes: u64,
    /// What set `durable_bytes` (for the failure report).
    pub durable_why: String,
    /// A reset of this zone was called and has not returned: a power cut may find the zone
    /// reset (the device completed it) or not.
    pub reset_in_flight: bool,
    /// Why nothing can be asserted about this zone until the next recovery (a reset or finish
    /// whose future was dropped may take effect at any later moment), if so.
    pub wild: Option<String>,
}

impl ZoneModel {
    /// A zone whose device content, as found by a recovery, is `content` (all durable).
    pub fn recovered(content: Vec<u8>) -> ZoneModel {
        ZoneModel {
            durable_bytes: content.len() as u64,
            durable_why: "recovered earlier".into(),
            baseline: content,
            ..ZoneModel::default()
        }
    }

    /// The end of the known data acknowledged before model time `before`.
    pub fn acked_end_before(&self, before: u64) -> u64 {
        self.acked
            .iter()
            .filter(|e| e.acked_at < before)
            .map(Extent::end)
            .max()
            .unwrap_or(0)
            .max(self.baseline.len() as u64)
    }
}

/// The model of one epoch, shared by the workers (behind a mutex).
#[derive(Debug)]
pub struct Model {
    /// Logical clock: every begin and acknowledgement takes a tick.
    pub clock: u64,
    /// Zones.
    pub zones: Vec<ZoneModel>,
    /// Zone capacity in bytes.
    pub capacity_bytes: u64,
    /// Operations started and not finished: token → description.
    pub in_flight: BTreeMap<u64, String>,
    /// Operations finished (completed, failed or dropped).
    pub completed: u64,
    /// Operation futures the harness dropped.
    pub dropped: u64,
    /// Bytes acknowledged.
    pub acked_bytes: u64,
    /// `Ziob::close` was called.
    pub closing: bool,
    /// `Ziob::close` returned Ok (called at, returned at): every acknowledged write must be
    /// durable.
    pub close_ok: Option<(u64, u64)>,
    /// The epoch is being cut: tasks dying now are not failures.
    pub cutting: bool,
    /// The last events, for the failure report.
    pub log: VecDeque<String>,
    next_op_id: u64,
}

const LOG_EVENTS: usize = 60;

impl Model {
    /// A model over `zones`; operation ids start at `next_op_id`.
    pub fn new(zones: Vec<ZoneModel>, capacity_bytes: u64, next_op_id: u64) -> Model {
        Model {
            clock: 0,
            zones,
            capacity_bytes,
            in_flight: BTreeMap::new(),
            completed: 0,
            dropped: 0,
            acked_bytes: 0,
            closing: false,
            close_ok: None,
            cutting: false,
            log: VecDeque::new(),
            next_op_id,
        }
    }

    /// The next operation id to hand out (carried over to the next epoch).
    pub fn next_op_id(&self) -> u64 {
        self.next_op_id
    }

    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    /// Records an event in the bounded log.
    pub fn note(&mut self, event: String) {
        if self.log.len() == LOG_EVENTS {
            self.log.pop_front();
        }
        self.log.push_back(event);
    }

    /// An operation starts: returns its token and the model time it started at.
    pub fn begin(&mut self, what: String) -> (u64, u64) {
        let t = self.tick();
        self.note(format!("t{t} begin {what}"));
        self.in_flight.insert(t, what);
        (t, t)
    }

    /// A point in model time (taken right before a call whose start matters).
    pub fn begin_marker(&mut self) -> u64 {
        self.tick()
    }

    /// An operation ended with `outcome`.
    pub fn end(&mut self, token: u64, outcome: &str) {
        let what = self.in_flight.remove(&token).unwrap_or_default();
        let t = self.tick();
        self.note(format!("t{t} end   t{token} {what}: {outcome}"));
        self.completed += 1;
    }

    /// A write of `len` bytes to `zone` is about to be issued: its operation id.
    pub fn issue(&mut self, zone: u32, len: u64) -> u64 {
        let id = self.next_op_id;
        self.next_op_id += 1;
        self.zones[zone as usize].issued.push((id, len));
        id
    }

    /// A write was acknowledged at `offset`. Checks it against the other acknowledged ones.
    pub fn ack(&mut self, zone: u32, op_id: u64, offset: u64, len: u64) -> Result<(), String> {
        let t = self.tick();
        let cap = self.capacity_bytes;
        let z = &mut self.zones[zone as usize];
        if offset + len > cap {
            return Err(format!(
                "zone {zone}: write of {len} bytes acknowledged at {offset}, past the capacity {cap}"
            ));
        }
        if z.wild.is_none() {
            if offset < z.baseline.len() as u64 {
                return Err(format!(
                    "zone {zone}: write of {len} bytes acknowledged at {offset}, over the {} bytes recovered earlier",
                    z.baseline.len()
                ));
            }
            if let Some(o) = z
                .acked
                .iter()
                .find(|e| e.offset < offset + len && offset < e.end())
            {
                return Err(format!(
                    "zone {zone}: write of {len} bytes acknowledged at {offset} overlaps the acknowledged write [{}, {})",
                    o.offset,
                    o.end()
                ));
            }
        }
        z.acked.push(Extent {
            offset,
            op_id,
            len,
            acked_at: t,
        });
        self.acked_bytes += len;
        Ok(())
    }

    /// `what` (a flush, or the zone's part of a sync or finish) that started at `started`
    /// completed.
    pub fn flush_ok(&mut self, zone: u32, started: u64, what: &str) {
        let now = self.clock;
        let z = &mut self.zones[zone as usize];
        let end = z.acked_end_before(started);
        if end > z.durable_bytes {
            z.durable_bytes = end;
            z.durable_why = format!("{what} called at t{started}, returned Ok by t{now}");
        }
    }

    /// The zone was reset.
    pub fn reset_ok(&mut self, zone: u32) {
        let z = &mut self.zones[zone as usize];
        z.baseline.clear();
        z.acked.clear();
        z.durable_bytes = 0;
        z.durable_why = "reset".into();
    }

    /// The zone was finished (its data written back, then Full).
    pub fn finish_ok(&mut self, zone: u32, started: u64) {
        self.flush_ok(zone, started, "finish");
    }

    /// Nothing can be asserted about `zone` until the next recovery.
    pub fn make_wild(&mut self, zone: u32, why: String) {
        let z = &mut self.zones[zone as usize];
        if z.wild.is_none() {
            z.wild = Some(why);
        }
    }

    /// The epoch is over: the zones as the recovery must find them.
    pub fn into_zones(mut self) -> Vec<ZoneModel> {
        if let Some((from, to)) = self.close_ok {
            for z in &mut self.zones {
                let end = z.acked_end_before(u64::MAX);
                if end > z.durable_bytes {
                    let last = z.acked.iter().map(|e| e.acked_at).max().unwrap_or(0);
                    z.durable_bytes = end;
                    z.durable_why = format!(
                        "close called at t{from} returned Ok at t{to}; every acknowledged write must be durable (last acknowledged at t{last})"
                    );
                }
            }
        }
        self.zones
    }

    /// The operations in flight and the last events, for a failure report.
    pub fn diagnosis(&self) -> String {
        let mut s = String::from("  operations in flight:\n");
        for (t, what) in &self.in_flight {
            s += &format!("    t{t} {what}\n");
        }
        s += "  last events:\n";
        for e in &self.log {
            s += &format!("    {e}\n");
        }
        s
    }
}
