//! Model-based property test: random appends, writes, reads, flushes, syncs, resets,
//! finishes and crashes on several zones owned by two cores, through the buffer over a `mem`
//! device with tight open/active limits and a small memory budget, checked against a plain
//! reference model. After a simulated crash (the process loses the buffer, the device loses
//! unflushed writes) every flushed byte must be there and nothing else may be corrupted.
//! Two ops add concurrency: appends racing a flush of the same zone (the padding must fall
//! only at the block boundary after data, never inside or after a record), and appends
//! dropped part-way (they must happen whole or not at all).
//! The budget is small, so pressure write-back (also of padded partial blocks) is common.
//! proptest prints the failing case and its seed.

mod shard_support;

use proptest::prelude::*;
use std::path::PathBuf;

use shard_support::SlowMem;
use ziob::backends::{EmuDevice, LatencyModel, MemDevice};
use ziob::AnyDevice;
use ziob::{
    DmaBuf, ErrorKind, Geometry, Runtime, Ziob, ZiobConfig, ZiobError, ZoneAction, ZoneState,
    ZoneTarget, ZonedDevice,
};

const ZONES: u32 = 6;
const BS: u64 = 4096;
const CAP: u64 = 48 * 1024;
const ZONE_SIZE: u64 = 64 * 1024;

#[derive(Debug, Clone)]
enum Op {
    Append {
        zone: u32,
        len: usize,
        seed: u8,
    },
    WriteAt {
        zone: u32,
        len: usize,
        seed: u8,
        skew: bool,
    },
    Read {
        zone: u32,
        offset: u64,
        len: usize,
    },
    Flush {
        zone: u32,
    },
    Sync,
    Reset {
        zone: u32,
    },
    Finish {
        zone: u32,
    },
    Crash,
    /// After a pause (idle write-back may start meanwhile), two appends and a flush of the
    /// same zone, concurrently (from this core and the zone's owner).
    AppendsRacingFlush {
        zone: u32,
        lens: (usize, usize),
        seed: u8,
        pause_us: u64,
    },
    /// An append to a zone of this core dropped after `polls` pending polls (if it has not
    /// completed by then).
    DroppedAppend {
        zone: u32,
        len: usize,
        seed: u8,
        polls: u32,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let zone = 0..ZONES;
    prop_oneof![
        6 => (zone.clone(), 1usize..12_000, any::<u8>()).prop_map(|(zone, len, seed)| Op::Append { zone, len, seed }),
        2 => (zone.clone(), 1usize..9_000, any::<u8>(), prop::bool::weighted(0.2))
            .prop_map(|(zone, len, seed, skew)| Op::WriteAt { zone, len, seed, skew }),
        4 => (zone.clone(), 0..ZONE_SIZE - 1, 1usize..20_000).prop_map(|(zone, offset, len)| Op::Read { zone, offset, len }),
        2 => zone.clone().prop_map(|zone| Op::Flush { zone }),
        1 => Just(Op::Sync),
        1 => zone.clone().prop_map(|zone| Op::Reset { zone }),
        1 => zone.clone().prop_map(|zone| Op::Finish { zone }),
        1 => Just(Op::Crash),
        3 => (zone.clone(), (1usize..5_000, 1usize..5_000), any::<u8>(), 0u64..3_000)
            .prop_map(|(zone, lens, seed, pause_us)| Op::AppendsRacingFlush { zone, lens, seed, pause_us }),
        2 => (zone.clone(), 1usize..12_000, any::<u8>(), 0u32..3)
            .prop_map(|(zone, len, seed, polls)| Op::DroppedAppend { zone: zone & !1, len, seed, polls }),
    ]
}

thread_local! {
    /// The operation running now, for the report of a hung case.
    static LAST_OP: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
    /// The instance under test, for the report of a hung case.
    static CURRENT: std::cell::RefCell<Option<Ziob<ModelDev>>> = const { std::cell::RefCell::new(None) };
}

/// What a zone must hold.
#[derive(Debug, Clone, Default)]
struct ModelZone {
    content: Vec<u8>,
    full: bool,
    /// Bytes a completed flush/sync/finish/reset guarantees are on the device.
    durable: usize,
}

fn data(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) | 1)
        .collect()
}

fn pad(z: &mut ModelZone) {
    if !z.full {
        let padded = z.content.len().div_ceil(BS as usize) * BS as usize;
        z.content.resize(padded, 0);
        if z.content.len() as u64 == CAP {
            z.full = true;
        }
    }
}

fn geometry() -> Geometry {
    Geometry {
        block_size_bytes: BS,
        zone_size_bytes: ZONE_SIZE,
        zone_capacity_bytes: CAP,
        zone_count: ZONES,
        max_open_zones: Some(2),
        max_active_zones: Some(4),
        max_append_bytes: 64 * 1024,
        volatile_write_cache: true,
    }
}

fn config() -> ZiobConfig {
    ZiobConfig {
        writeback_unit_bytes: Some(8 * 1024),
        // Four write-back units (the smallest budget whose largest piece, half of it, still
        // takes every write of the ops whole): memory pressure is common, including
        // pressure write-back of padded partial blocks.
        shard_budget_bytes: 32 * 1024,
        idle_writeback: Some(std::time::Duration::from_millis(1)),
        ..ZiobConfig::default()
    }
}

/// The device under the buffer, and how it loses power.
enum Target {
    /// RAM; a crash drops what was not flushed.
    Mem(MemDevice),
    /// RAM whose calls take a while (they yield and sometimes sleep before and after the
    /// work), so write-backs are in flight while other operations run; a crash as `Mem`.
    SlowMem(SlowMem),
    /// File-backed with per-op latency (write-back really runs concurrently); a crash is
    /// dropping the device and opening the file again (the zone table of the last flush).
    Emu(PathBuf),
}

impl Target {
    async fn device(&self) -> ModelDev {
        match self {
            Target::Mem(m) => ModelDev::Any(AnyDevice::Mem(m.clone())),
            Target::SlowMem(m) => ModelDev::Slow(m.clone()),
            Target::Emu(p) => {
                let lat = LatencyModel {
                    latency: Some(std::time::Duration::from_micros(30)),
                    bandwidth_bytes_per_sec: None,
                };
                ModelDev::Any(AnyDevice::Emu(EmuDevice::open(p, lat).await.unwrap()))
            }
        }
    }
    fn crash(&self) {
        match self {
            Target::Mem(m) => m.crash(),
            Target::SlowMem(m) => m.mem.crash(),
            Target::Emu(p) => {
                // The abandoned instance's device may live on in a task the crash left behind
                // (one read-write device per file per process): it keeps the old file, the
                // reopen gets a crash image of it.
                let image = p.with_extension("image");
                std::fs::copy(p, &image).unwrap();
                std::fs::rename(&image, p).unwrap();
            }
        }
    }
}

/// The devices the model runs over, as one type.
#[derive(Clone)]
enum ModelDev {
    Any(AnyDevice),
    Slow(SlowMem),
}

macro_rules! dispatch {
    ($self:ident, $d:ident => $e:expr) => {
        match $self {
            ModelDev::Any($d) => $e,
            ModelDev::Slow($d) => $e,
        }
    };
}

type DevResult<T> = std::result::Result<T, ziob::backends::DeviceError>;

impl ZonedDevice for ModelDev {
    fn geometry(&self) -> &Geometry {
        dispatch!(self, d => d.geometry())
    }
    fn name(&self) -> &str {
        dispatch!(self, d => d.name())
    }
    fn ordered_writes_in_flight(&self) -> u32 {
        dispatch!(self, d => d.ordered_writes_in_flight())
    }
    async fn report_zones(&self, first: u32, count: u32) -> DevResult<Vec<ziob::ZoneInfo>> {
        dispatch!(self, d => d.report_zones(first, count).await)
    }
    async fn read(
        &self,
        zone: u32,
        offset_bytes: u64,
        len: usize,
        buf: DmaBuf,
    ) -> (DevResult<()>, DmaBuf) {
        dispatch!(self, d => d.read(zone, offset_bytes, len, buf).await)
    }
    async fn write(&self, zone: u32, offset_bytes: u64, buf: DmaBuf) -> (DevResult<()>, DmaBuf) {
        dispatch!(self, d => d.write(zone, offset_bytes, buf).await)
    }
    async fn append(&self, zone: u32, buf: DmaBuf) -> (DevResult<u64>, DmaBuf) {
        dispatch!(self, d => d.append(zone, buf).await)
    }
    async fn zone_action(&self, action: ZoneAction, target: ZoneTarget) -> DevResult<()> {
        dispatch!(self, d => d.zone_action(action, target).await)
    }
    async fn flush(&self) -> DevResult<()> {
        dispatch!(self, d => d.flush().await)
    }
    async fn write_durable(
        &self,
        zone: u32,
        offset_bytes: u64,
        buf: DmaBuf,
    ) -> (DevResult<()>, DmaBuf) {
        dispatch!(self, d => d.write_durable(zone, offset_bytes, buf).await)
    }
    fn has_durable_writes(&self) -> bool {
        dispatch!(self, d => d.has_durable_writes())
    }
}

async fn run_case(target: Target, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let mut z = Ziob::with_device(target.device().await, config())
        .await
        .unwrap();
    let mut mem = z.device().clone();
    let mut model: Vec<ModelZone> = vec![ModelZone::default(); ZONES as usize];
    for (index, op) in ops.into_iter().enumerate() {
        LAST_OP.with(|l| *l.borrow_mut() = format!("op #{index}: {op:?}"));
        CURRENT.with(|c| *c.borrow_mut() = Some(z.clone()));
        // Memory pressure may have padded a zone's partial last block and written it back
        // (its next append starts at the next block): take that into the model.
        for zone in 0..ZONES {
            reconcile_padding(&z, &mut model, zone).await;
        }
        match op {
            Op::Append { zone, len, seed }
            | Op::WriteAt {
                zone,
                len,
                seed,
                skew: false,
            } => {
                let m = &mut model[zone as usize];
                let d = data(len, seed);
                let res = if matches!(op, Op::Append { .. }) {
                    z.append(zone, DmaBuf::from_slice(&d)).await
                } else {
                    z.write_at(zone, m.content.len() as u64, DmaBuf::from_slice(&d))
                        .await
                        .map(|_| m.content.len() as u64)
                };
                match res {
                    Ok(off) => {
                        prop_assert!(!m.full, "write to a full zone accepted");
                        prop_assert_eq!(off, m.content.len() as u64);
                        m.content.extend_from_slice(&d);
                        prop_assert!(m.content.len() as u64 <= CAP);
                        if m.content.len() as u64 == CAP {
                            m.full = true;
                        }
                    }
                    Err(e) => match e.kind() {
                        Some(ErrorKind::ZoneFull) => prop_assert!(m.full),
                        Some(ErrorKind::BoundaryError) => {
                            prop_assert!(m.content.len() + len > CAP as usize)
                        }
                        _ if matches!(e, ZiobError::BufferFull { .. }) => {}
                        _ => prop_assert!(false, "unexpected error {e}"),
                    },
                }
            }
            Op::WriteAt {
                zone,
                len,
                seed,
                skew: true,
            } => {
                let m = &model[zone as usize];
                let at = m.content.len() as u64 + 4096;
                let res = z
                    .write_at(zone, at, DmaBuf::from_slice(&data(len, seed)))
                    .await;
                let kind = res.unwrap_err().kind();
                prop_assert!(
                    matches!(
                        kind,
                        Some(ErrorKind::InvalidWrite) | Some(ErrorKind::ZoneFull)
                    ),
                    "{kind:?}"
                );
            }
            Op::Read { zone, offset, len } => {
                let len = len.min((ZONE_SIZE - offset) as usize);
                let got = z.read(zone, offset, len).await.unwrap();
                let m = &model[zone as usize];
                let mut want = vec![0u8; len];
                let o = offset as usize;
                if o < m.content.len() {
                    let n = (m.content.len() - o).min(len);
                    want[..n].copy_from_slice(&m.content[o..o + n]);
                }
                prop_assert!(
                    got[..] == want[..],
                    "read zone {zone} at {offset} len {len} differs"
                );
            }
            Op::Flush { zone } => match z.flush(zone).await {
                Ok(()) => {
                    let m = &mut model[zone as usize];
                    pad(m);
                    m.durable = m.content.len();
                }
                Err(e) => {
                    // The zone cannot become active on the device (all of this core's active
                    // resources are held by partly written zones): the device's answer.
                    prop_assert_eq!(e.kind(), Some(ErrorKind::TooManyActive), "{}", e);
                    reconcile_padding(&z, &mut model, zone).await;
                }
            },
            Op::Sync => {
                let res = z.sync().await;
                if let Err(e) = &res {
                    prop_assert_eq!(e.kind(), Some(ErrorKind::TooManyActive), "{}", e);
                }
                // Sync flushes the device even when a zone failed: whatever the device has
                // is durable now.
                for zone in 0..ZONES {
                    if res.is_ok() {
                        pad(&mut model[zone as usize]);
                    } else {
                        reconcile_padding(&z, &mut model, zone).await;
                    }
                    let dev = mem_report(&mem, zone).await;
                    let m = &mut model[zone as usize];
                    if !m.full {
                        m.durable = m.durable.max(dev.write_pointer_bytes as usize);
                    }
                    if res.is_ok() {
                        m.durable = m.content.len();
                    }
                }
            }
            Op::Reset { zone } => {
                z.zone_action(ZoneAction::Reset, ZoneTarget::One(zone))
                    .await
                    .unwrap();
                model[zone as usize] = ModelZone::default();
            }
            Op::Finish { zone } => match z
                .zone_action(ZoneAction::Finish, ZoneTarget::One(zone))
                .await
            {
                Ok(()) => {
                    let m = &mut model[zone as usize];
                    m.content.resize(CAP as usize, 0);
                    m.full = true;
                    m.durable = CAP as usize;
                }
                Err(e) => {
                    prop_assert_eq!(e.kind(), Some(ErrorKind::TooManyActive), "{}", e);
                    reconcile_padding(&z, &mut model, zone).await;
                }
            },
            Op::AppendsRacingFlush {
                zone,
                lens,
                seed,
                pause_us,
            } => {
                let m = &mut model[zone as usize];
                if m.full || m.content.len() + lens.0 + lens.1 + 2 * BS as usize > CAP as usize {
                    continue;
                }
                ziob::runtime::sleep(std::time::Duration::from_micros(pause_us))
                    .await
                    .unwrap();
                let (d1, d2) = (data(lens.0, seed), data(lens.1, seed ^ 0x55));
                let (r1, rf, r2) = futures::join!(
                    z.append(zone, DmaBuf::from_slice(&d1)),
                    z.flush(zone),
                    z.append(zone, DmaBuf::from_slice(&d2)),
                );
                let wp = z.report(zone, 1).await.unwrap()[0].write_pointer_bytes as usize;
                let old_padded = m.content.len().div_ceil(BS as usize) * BS as usize;
                let mut placed: Vec<(usize, &[u8])> = Vec::new();
                for (r, d) in [(r1, &d1), (r2, &d2)] {
                    match r {
                        Ok(off) => placed.push((off as usize, &d[..])),
                        Err(e) => prop_assert!(
                            matches!(e, ZiobError::BufferFull { .. }),
                            "unexpected error {e}"
                        ),
                    }
                }
                placed.sort_by_key(|p| p.0);
                for (off, d) in placed {
                    let at = m.content.len();
                    prop_assert!(
                        off == at || off == at.div_ceil(BS as usize) * BS as usize,
                        "zone {zone}: a record at {off} after data ending at {at}: padding landed elsewhere than the block boundary"
                    );
                    m.content.resize(off, 0);
                    m.content.extend_from_slice(d);
                }
                let end = m.content.len();
                prop_assert!(
                    wp == end || wp == end.div_ceil(BS as usize) * BS as usize,
                    "zone {zone}: write pointer {wp} after data ending at {end}"
                );
                m.content.resize(wp, 0);
                if m.content.len() as u64 == CAP {
                    m.full = true;
                }
                match rf {
                    // The flush covered at least what the zone held before it started.
                    Ok(()) => m.durable = m.durable.max(old_padded.min(m.content.len())),
                    Err(e) => prop_assert_eq!(e.kind(), Some(ErrorKind::TooManyActive), "{}", e),
                }
            }
            Op::DroppedAppend {
                zone,
                len,
                seed,
                polls,
            } => {
                let m = &mut model[zone as usize];
                let d = data(len, seed);
                let before = m.content.len();
                let res =
                    shard_support::PollBudget::new(z.append(zone, DmaBuf::from_slice(&d)), polls)
                        .await;
                let wp = z.report(zone, 1).await.unwrap()[0].write_pointer_bytes as usize;
                match res {
                    Some(Ok(off)) => prop_assert_eq!(off as usize, before),
                    Some(Err(_)) => prop_assert_eq!(wp, before, "a failed append moved the write pointer"),
                    None => prop_assert!(
                        wp == before || wp == before + len,
                        "zone {zone}: a dropped append of {len} bytes moved the write pointer from {before} to {wp}"
                    ),
                }
                if wp == before + len {
                    m.content.extend_from_slice(&d);
                    if m.content.len() as u64 == CAP {
                        m.full = true;
                    }
                }
            }
            Op::Crash => {
                z.abandon().await.unwrap();
                drop(mem);
                target.crash();
                z = Ziob::with_device(target.device().await, config())
                    .await
                    .unwrap();
                mem = z.device().clone();
                let report = z.report(0, ZONES).await.unwrap();
                for (m, info) in model.iter_mut().zip(report) {
                    let wp = info.write_pointer_bytes as usize;
                    if info.state == ZoneState::Full {
                        m.content.resize(CAP as usize, 0);
                        m.full = true;
                    } else {
                        prop_assert!(
                            wp >= m.durable,
                            "zone {}: flushed {} bytes, device kept {wp}",
                            info.index,
                            m.durable
                        );
                        prop_assert!(
                            wp <= m.content.len(),
                            "zone {}: device has {wp} bytes, more than written",
                            info.index
                        );
                        m.content.truncate(wp);
                        m.full = false;
                    }
                    // Whatever survived must be what was written: check it through a read.
                    let got = z.read(info.index, 0, m.content.len()).await.unwrap();
                    prop_assert!(
                        got[..] == m.content[..],
                        "zone {} corrupted after crash",
                        info.index
                    );
                    m.durable = m.content.len();
                }
            }
        }
    }
    let closed = z.close().await;
    if let Err(e) = &closed {
        prop_assert_eq!(e.kind(), Some(ErrorKind::TooManyActive), "{}", e);
    }
    // Closing synced everything it could: the device holds the model (padded), or — for
    // zones that could not become active — a prefix of it.
    for (i, m) in model.iter_mut().enumerate() {
        pad(m);
        let info = mem_report(&mem, i as u32).await;
        if m.full {
            continue;
        }
        let wp = info.write_pointer_bytes as usize;
        if closed.is_ok() {
            prop_assert_eq!(wp, m.content.len());
        } else {
            prop_assert!(wp <= m.content.len());
        }
        if wp == 0 {
            continue;
        }
        let (res, got) = mem.read(i as u32, 0, wp, DmaBuf::with_capacity(wp)).await;
        res.unwrap();
        prop_assert!(
            got[..] == m.content[..wp],
            "zone {} differs on the device",
            i
        );
    }
    Ok(())
}

/// A failed flush or finish may have padded the zone before it found the device's active
/// limit in the way, and memory pressure may pad a partial block to write it back: take the
/// padding into the model if the write pointer moved.
async fn reconcile_padding(z: &Ziob<ModelDev>, model: &mut [ModelZone], zone: u32) {
    let wp = z.report(zone, 1).await.unwrap()[0].write_pointer_bytes as usize;
    let m = &mut model[zone as usize];
    if wp > m.content.len() {
        assert_eq!(
            wp,
            m.content.len().div_ceil(BS as usize) * BS as usize,
            "only padding may move it"
        );
        pad(m);
    }
}

async fn mem_report(mem: &ModelDev, zone: u32) -> ziob::ZoneInfo {
    mem.report_zones(zone, 1).await.unwrap()[0]
}

fn run(
    target: impl FnOnce() -> Target + Send + 'static,
    ops: Vec<Op>,
) -> Result<(), TestCaseError> {
    let rt = Runtime::builder().cores(2).build().unwrap();
    rt.block_on(move || async move {
        use futures::FutureExt;
        futures::select! {
            r = Box::pin(run_case(target(), ops)).fuse() => r,
            _ = ziob::runtime::sleep(std::time::Duration::from_secs(30)).fuse() => {
                let op = LAST_OP.with(|l| l.borrow().clone());
                let z = CURRENT.with(|c| c.borrow().clone());
                let state = match z {
                    Some(z) => z.debug_state().await.unwrap_or_default(),
                    None => String::new(),
                };
                Err(TestCaseError::fail(format!("the case hung for 30 s in {op}\n{state}")))
            }
        }
    })
    .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, max_shrink_iters: 200, ..ProptestConfig::default() })]
    #[test]
    fn buffer_over_mem_matches_the_reference_model(ops in prop::collection::vec(op(), 1..40)) {
        run(|| Target::Mem(MemDevice::new("mem:model", &geometry()).unwrap()), ops)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, max_shrink_iters: 200, ..ProptestConfig::default() })]
    #[test]
    fn buffer_over_slow_mem_matches_the_reference_model(ops in prop::collection::vec(op(), 1..40), seed in any::<u64>()) {
        run(move || Target::SlowMem(SlowMem::new("mem:model-slow", &geometry(), seed)), ops)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, max_shrink_iters: 100, ..ProptestConfig::default() })]
    #[test]
    fn buffer_over_slow_emu_matches_the_reference_model(ops in prop::collection::vec(op(), 1..30)) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("model.zns");
        let p = path.clone();
        let rt = Runtime::builder().cores(1).build().unwrap();
        rt.block_on(move || async move { EmuDevice::create(&p, &geometry()).await.unwrap(); }).unwrap();
        drop(rt);
        run(move || Target::Emu(path), ops)?;
        drop(dir);
    }
}
