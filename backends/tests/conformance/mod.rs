//! The conformance suite: every scenario is written once, generic over [`Backend`], and
//! expanded into one `#[test]` per scenario for each backend by [`conformance_suite!`].
//!
//! A backend joins with one line in `tests/conformance.rs`:
//! `conformance_suite!(mem, MemBackend);` (add `, persistent` for backends whose data survives
//! a reopen, which adds the persistence scenarios).

#![allow(dead_code)]

use std::collections::HashMap;
use std::future::Future;
use std::io::Write as _;
use std::sync::{Mutex, MutexGuard, OnceLock};

use ziob_backends::{
    DeviceError, ErrorKind, Geometry, ZoneAction, ZoneInfo, ZoneState, ZoneTarget, ZonedDevice,
};
use ziob_runtime::DmaBuf;

/// What a backend can do, so scenarios skip only what it cannot.
#[derive(Debug, Clone, Copy)]
pub struct Caps {
    /// Reads return what was written (false for nil).
    pub stores_data: bool,
    /// The device follows ZBC where ZBC and ZNS differ (Linux zoned null_blk, SMR disks):
    /// closing an open zone with nothing written makes it Empty (ZNS: Closed, still active),
    /// and (null_blk) reopening a Closed zone needs a free active resource when the device must
    /// close an implicitly opened zone for it. Scenarios assert the ZBC outcome then.
    pub zbc: bool,
}

/// How the suite makes (and remakes) devices of one backend. Made fresh inside each test.
#[allow(async_fn_in_trait)]
pub trait Backend: 'static {
    /// The device type.
    type Dev: ZonedDevice;
    /// Capabilities.
    const CAPS: Caps;
    /// The runtime needs 128-byte SQEs (NVMe passthrough).
    const SQE128: bool = false;
    /// Zone states set by Open/Close on a zone without data on the device live only in memory
    /// (the ZIOB buffer, which opens device zones only to write them): after a reopen such a
    /// zone is Empty instead of Closed — its write pointer is 0 either way.
    const DATALESS_STATES_VOLATILE: bool = false;
    /// The shared device this backend uses, as a key of [`exclusive`] (`None`: each test gets
    /// a device of its own). [`run`] holds the device from before the scenario's runtime
    /// starts until after it has stopped, so nothing a scenario left running (e.g. the
    /// background close of a dropped ZIOB instance, which syncs) touches the device once the
    /// next test has it.
    const EXCLUSIVE: Option<&'static str> = None;
    /// A new device with `geometry`, every zone Empty. Real devices reset every zone and keep
    /// their own geometry: scenarios take sizes and limits from `dev.geometry()`.
    async fn create(&mut self, geometry: &Geometry) -> Self::Dev;
    /// Why the backend cannot run here (e.g. no zoned device outside the test guest): the
    /// tests then print `skipped: <reason> (run with cargo xtask vm-test)` and pass.
    fn skip_reason() -> Option<String> {
        None
    }
    /// Checks the geometry of a device made by [`Backend::create`] from `requested`.
    fn check_geometry(&self, requested: &Geometry, got: &Geometry) {
        assert_eq!(got, requested);
    }
    /// Closes `dev` and opens the same device again (persistent backends only).
    async fn reopen(&mut self, dev: Self::Dev) -> Self::Dev {
        drop(dev);
        unreachable!("reopen called on a backend that is not persistent")
    }
}

pub const KIB: u64 = 1024;
pub const BS: u64 = 4 * KIB;
pub const ZONE: u64 = 1024 * KIB;
pub const CAP: u64 = 768 * KIB;

/// The suite's device: 8 zones of 1 MiB, capacity 768 KiB (192 blocks), 4 KiB blocks,
/// max open 2, max active 3, max append 64 KiB.
pub fn geometry() -> Geometry {
    Geometry {
        block_size_bytes: BS,
        zone_size_bytes: ZONE,
        zone_capacity_bytes: CAP,
        zone_count: 8,
        max_open_zones: Some(2),
        max_active_zones: Some(3),
        max_append_bytes: 64 * KIB,
        volatile_write_cache: true,
    }
}

/// Runs `scenario` on a fresh backend inside a 1-core runtime.
pub fn run<B, M, S, Fut>(make: M, scenario: S)
where
    B: Backend,
    M: FnOnce() -> B + Send + 'static,
    S: FnOnce(B) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + 'static,
{
    if let Some(reason) = B::skip_reason() {
        note(&format!(
            "skipped: {reason} (run with cargo xtask vm-test -p ziob-backends)"
        ));
        return;
    }
    let device = B::EXCLUSIVE.map(exclusive);
    let rt = ziob_runtime::Runtime::builder()
        .sqe128(B::SQE128)
        .cores(1)
        .build()
        .expect("runtime");
    let outcome = rt.block_on(move || scenario(make()));
    // Stopping the runtime drops the tasks the scenario left (they issue nothing more) and
    // waits for the ops the kernel still has: only then may the next test use the device.
    drop(rt);
    drop(device);
    outcome.expect("the scenario panicked on the core (see the panic message above)");
}

/// Prints a line past the test harness's output capture (it shows also for passing tests).
pub fn note(line: &str) {
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// Serialises the tests that use one real device (tests run on parallel threads). `key` names
/// the device: use the guest's environment variable (`ZIOB_ZNS_BLOCK` for the ZNS namespace,
/// whichever node — block or generic char — a backend opens it by; `ZIOB_NULLBLK_ZONED`).
/// [`run`] takes it for backends that name their device in [`Backend::EXCLUSIVE`]; other
/// tests hold the guard as long as the device is in use.
pub fn exclusive(key: &str) -> MutexGuard<'static, ()> {
    static LOCKS: OnceLock<Mutex<HashMap<String, &'static Mutex<()>>>> = OnceLock::new();
    let mut map = LOCKS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    let lock = *map
        .entry(key.to_string())
        .or_insert_with(|| Box::leak(Box::new(Mutex::new(()))));
    drop(map);
    // A failed test poisons the lock; the next test starts with a reset device anyway.
    lock.lock().unwrap_or_else(|p| p.into_inner())
}

/// Sizes of the device under test, from its geometry (real devices have their own).
#[derive(Debug, Clone, Copy)]
pub struct Dims {
    /// Block size in bytes.
    pub bs: u64,
    /// Zone size in bytes.
    pub zs: u64,
    /// Zone capacity in bytes.
    pub cap: u64,
    /// Zone capacity in blocks.
    pub cap_blocks: u64,
    /// Number of zones.
    pub zones: u32,
}

pub fn dims<D: ZonedDevice>(d: &D) -> Dims {
    let g = d.geometry();
    Dims {
        bs: g.block_size_bytes,
        zs: g.zone_size_bytes,
        cap: g.zone_capacity_bytes,
        cap_blocks: g.zone_capacity_blocks(),
        zones: g.zone_count,
    }
}

/// Deterministic content of byte `offset` of `zone`.
pub fn pattern(zone: u32, offset_bytes: u64, len: u64) -> Vec<u8> {
    (offset_bytes..offset_bytes + len)
        .map(|o| ((u64::from(zone) * 131 + (o / BS) * 7 + o) % 251) as u8)
        .collect()
}

pub async fn write<D: ZonedDevice>(
    d: &D,
    zone: u32,
    offset: u64,
    len: u64,
) -> Result<(), DeviceError> {
    d.write(
        zone,
        offset,
        DmaBuf::from_slice(&pattern(zone, offset, len)),
    )
    .await
    .0
}

pub async fn append<D: ZonedDevice>(
    d: &D,
    zone: u32,
    len: u64,
    tag: u64,
) -> Result<u64, DeviceError> {
    d.append(zone, DmaBuf::from_slice(&pattern(zone, tag, len)))
        .await
        .0
}

pub async fn read<D: ZonedDevice>(
    d: &D,
    zone: u32,
    offset: u64,
    len: u64,
) -> Result<DmaBuf, DeviceError> {
    let (r, buf) = d
        .read(
            zone,
            offset,
            len as usize,
            DmaBuf::with_capacity(len as usize),
        )
        .await;
    r.map(|()| {
        assert_eq!(
            buf.len() as u64,
            len,
            "read returned a buffer of the wrong length"
        );
        buf
    })
}

pub async fn zone<D: ZonedDevice>(d: &D, z: u32) -> ZoneInfo {
    d.report_zones(z, 1).await.expect("report")[0]
}

pub async fn state<D: ZonedDevice>(d: &D, z: u32) -> ZoneState {
    zone(d, z).await.state
}

pub async fn wp<D: ZonedDevice>(d: &D, z: u32) -> u64 {
    zone(d, z).await.write_pointer_bytes
}

pub async fn act<D: ZonedDevice>(d: &D, a: ZoneAction, z: u32) -> Result<(), DeviceError> {
    d.zone_action(a, ZoneTarget::One(z)).await
}

/// Checks `buf` holds data `[zone, offset, len)` of the pattern followed by zeros up to
/// `len_total` (skipped for backends that store no data).
pub fn check_data<B: Backend>(buf: &[u8], zone: u32, offset: u64, data_len: u64) {
    if !B::CAPS.stores_data {
        return;
    }
    let data_len = data_len as usize;
    assert!(
        buf[..data_len] == pattern(zone, offset, data_len as u64)[..],
        "data mismatch in zone {zone} at {offset}"
    );
    assert!(
        buf[data_len..].iter().all(|&b| b == 0),
        "unwritten bytes are not zero in zone {zone}"
    );
}

fn err(r: Result<impl std::fmt::Debug, DeviceError>) -> DeviceError {
    r.expect_err("the operation should have been refused")
}

// ---- scenarios ----------------------------------------------------------------------------
// Sizes and limits come from `dev.geometry()` (the suite's own geometry for simulated
// backends, the device's for real ones); the expected messages are computed from them.

pub async fn geometry_and_initial_report<B: Backend>(mut b: B) {
    let d = b.create(&geometry()).await;
    b.check_geometry(&geometry(), d.geometry());
    let Dims {
        zs, cap, zones: n, ..
    } = dims(&d);
    let zones = d.report_all().await.unwrap();
    assert_eq!(zones.len(), n as usize);
    for (i, z) in zones.iter().enumerate() {
        assert_eq!(z.index, i as u32);
        assert_eq!(z.start_bytes, i as u64 * zs);
        assert_eq!(z.capacity_bytes, cap);
        assert_eq!(z.write_pointer_bytes, 0);
        assert_eq!(z.state, ZoneState::Empty);
    }
    let tail = d.report_zones(n - 2, 10).await.unwrap();
    assert_eq!(
        tail.iter().map(|z| z.index).collect::<Vec<_>>(),
        vec![n - 2, n - 1]
    );
    let e = err(d.report_zones(n, 1).await);
    assert_eq!(
        e.to_string(),
        format!("LBA Out of Range: zone {n} does not exist, the device has {n} zones")
    );
    assert_eq!(e.nvme_status(), Some((0, 0x80)));
}

pub async fn write_at_write_pointer_opens_implicitly<B: Backend>(mut b: B) {
    let d = b.create(&geometry()).await;
    let bs = dims(&d).bs;
    write(&d, 0, 0, bs).await.unwrap();
    assert_eq!(state(&d, 0).await, ZoneState::ImplicitlyOpened);
    assert_eq!(wp(&d, 0).await, bs);
    write(&d, 0, bs, 2 * bs).await.unwrap();
    assert_eq!(wp(&d, 0).await, 3 * bs);
    let buf = read(&d, 0, 0, 3 * bs).await.unwrap();
    check_data::<B>(&buf, 0, 0, 3 * bs);
}

pub async fn write_off_the_write_pointer_is_invalid_write<B: Backend>(mut b: B) {
    let d = b.create(&geometry()).await;
    let bs = dims(&d).bs;
    let e = err(write(&d, 3, bs, bs).await);
    assert_eq!(
        e.to_string(),
        "Zone Invalid Write: write at block 1 of zone 3, write pointer is at block 0"
    );
    assert_eq!(
        state(&d, 3).await,
        ZoneState::Empty,
        "a refused write must not open the zone"
    );
    write(&d, 3, 0, 3 * bs).await.unwrap();
    let e = err(write(&d, 3, 40 * bs, bs).await);
    assert_eq!(
        e.to_string(),
        "Zone Invalid Write: write at block 40 of zone 3, write pointer is at block 3"
    );
    assert_eq!(e.kind(), ErrorKind::InvalidWrite);
    assert_eq!(e.nvme_status(), Some((1, 0xBC)));
    let e = err(write(&d, 3, 0, bs).await);
    assert_eq!(
        e.kind(),
        ErrorKind::InvalidWrite,
        "rewriting below the write pointer"
    );
    assert_eq!(wp(&d, 3).await, 3 * bs);
}

pub async fn write_crossing_capacity_is_refused_whole<B: Backend>(mut b: B) {
    let d = b.create(&geometry()).await;
    let Dims {
        bs,
        cap,
        cap_blocks,
        ..
    } = dims(&d);
    write(&d, 1, 0, cap - 2 * bs).await.unwrap();
    let e = err(write(&d, 1, cap - 2 * bs, 4 * bs).await);
    assert_eq!(
        e.to_string(),
        format!(
            "Zone Boundary Error: write of 4 blocks at block {} of zone 1 crosses the zone capacity (block {cap_blocks})",
            cap_blocks - 2
        )
    );
    assert_eq!(e.nvme_status(), Some((1, 0xB8)));
    assert_eq!(
        wp(&d, 1).await,
        cap - 2 * bs,
        "nothing of a refused write may land"
    );
    let buf = read(&d, 1, cap - 4 * bs, 4 * bs).await.unwrap();
    check_data::<B>(&buf, 1, cap - 4 * bs, 2 * bs);
}

pub async fn zone_becomes_full_at_capacity<B: Backend>(mut b: B) {
    let d = b.create(&geometry()).await;
    let Dims {
        bs,
        cap,
        cap_blocks,
        ..
    } = dims(&d);
    write(&d, 2, 0, cap / 2).await.unwrap();
    write(&d, 2, cap / 2, cap - cap / 2).await.unwrap();
    let z = zone(&d, 2).await;
    assert_eq!(z.state, ZoneState::Full);
    assert_eq!(
        z.write_pointer_bytes, cap,
        "a Full zone reports its capacity, not the next zone"
    );
    let e = err(write(&d, 2, cap, bs).await);
    assert_eq!(
        e.to_string(),
        format!("Zone Is Full: write at block {cap_blocks} of zone 2, the zone is Full (capacity {cap_blocks} blocks)")
    );
    assert_eq!(e.nvme_status(), Some((1, 0xB9)));
    let e = err(append(&d, 2, bs, 0).await);
    assert_eq!(
        e.to_string(),
        format!("Zone Is Full: append at block 0 of zone 2, the zone is Full (capacity {cap_blocks} blocks)")
    );
    // A Full zone holds no resource: up to three more zones can become active.
    let more = d.geometry().max_active_zones.unwrap_or(3).min(3);
    for z in 3..3 + more {
        write(&d, z, 0, bs).await.unwrap();
    }
}

pub async fn capacity_below_zone_size<B: Backend>(mut b: B) {
    let d = b.create(&geometry()).await;
    let Dims { bs, zs, cap, .. } = dims(&d);
    write(&d, 0, 0, cap).await.unwrap();
    write(&d, 1, 0, bs).await.unwrap();
    let buf = read(&d, 0, cap - bs, zs - cap + bs).await.unwrap();
    check_data::<B>(&buf, 0, cap - bs, bs);
    let e = err(read(&d, 0, zs - bs, 2 * bs).await);
    assert_eq!(
        e.to_string(),
        format!(
            "Zone Boundary Error: read of 2 blocks at block {} of zone 0 crosses the zone end (block {})",
            zs / bs - 1,
            zs / bs
        )
    );
    let buf = read(&d, 1, 0, bs).await.unwrap();
    check_data::<B>(&buf, 1, 0, bs);
    assert_eq!(zone(&d, 1).await.start_bytes, zs);
}

pub async fn append_returns_where_data_landed<B: Backend>(mut b: B) {
    let d = b.create(&geometry()).await;
    let Dims { bs, cap, .. } = dims(&d);
    let max_append = d.geometry().max_append_bytes;
    assert_eq!(append(&d, 4, bs, 1000).await.unwrap(), 0);
    assert_eq!(state(&d, 4).await, ZoneState::ImplicitlyOpened);
    assert_eq!(append(&d, 4, 2 * bs, 2000).await.unwrap(), bs);
    assert_eq!(append(&d, 4, bs, 3000).await.unwrap(), 3 * bs);
    assert_eq!(wp(&d, 4).await, 4 * bs);
    let buf = read(&d, 4, bs, 2 * bs).await.unwrap();
    if B::CAPS.stores_data {
        assert!(buf[..] == pattern(4, 2000, 2 * bs)[..]);
    }
    if max_append < cap {
        let e = err(append(&d, 4, max_append + bs, 0).await);
        assert_eq!(
            e.to_string(),
            format!(
                "append of {} bytes to zone 4 exceeds the zone append size limit of {max_append} bytes",
                max_append + bs
            )
        );
        assert_eq!(e.nvme_status(), Some((0, 0x02)));
    }
    let chunk = (64 * KIB).min(max_append);
    while wp(&d, 4).await + chunk <= cap {
        append(&d, 4, chunk, 0).await.unwrap();
    }
    let at = wp(&d, 4).await;
    let left = cap - at;
    if left > 0 {
        let e = err(append(&d, 4, chunk, 0).await);
        assert_eq!(
            e.to_string(),
            format!(
                "Zone Boundary Error: append of {} blocks at block {} of zone 4 crosses the zone capacity (block {})",
                chunk / bs,
                at / bs,
                cap / bs
            )
        );
        assert_eq!(append(&d, 4, left, 0).await.unwrap(), at);
    }
    assert_eq!(state(&d, 4).await, ZoneState::Full);
}

pub async fn concurrent_appends_land_apart<B: Backend>(mut b: B) {
    let d = b.create(&geometry()).await;
    let bs = dims(&d).bs;
    let tasks: Vec<_> = (0..8u64)
        .map(|i| {
            let d = d.clone();
            ziob_runtime::spawn(async move { (i, append(&d, 5, bs, i * 10_000).await.unwrap()) })
        })
        .collect();
    let mut offsets = Vec::new();
    for t in tasks {
        let (i, off) = t.await;
        let buf = read(&d, 5, off, bs).await.unwrap();
        if B::CAPS.stores_data {
            assert!(
                buf[..] == pattern(5, i * 10_000, bs)[..],
                "append {i} landed elsewhere"
            );
        }
        offsets.push(off);
    }
    offsets.sort_unstable();
    assert_eq!(offsets, (0..8).map(|i| i * bs).collect::<Vec<_>>());
}

pub async fn reads_of_written_and_unwritten_ranges<B: Backend>(mut b: B) {
    let d = b.create(&geometry()).await;
    let bs = dims(&d).bs;
    let buf = read(&d, 6, 0, 4 * bs).await.unwrap();
    check_data::<B>(&buf, 6, 0, 0);
    write(&d, 6, 0, 3 * bs).await.unwrap();
    let buf = read(&d, 6, bs, 4 * bs).await.unwrap();
    check_data::<B>(&buf, 6, bs, 2 * bs);
    let buf = read(&d, 6, 10 * bs, bs).await.unwrap();
    check_data::<B>(&buf, 6, 10 * bs, 0);
    let (r, _) = d
        .read(
            6,
            0,
            2 * BS.max(bs) as usize,
            DmaBuf::with_capacity(BS.max(bs) as usize),
        )
        .await;
    assert_eq!(err(r).kind(), ErrorKind::InvalidArgument);
    if d.read_granularity_bytes() == 1 {
        // Through the page cache: any byte range (zone 6 holds data in [bs, 3·bs)).
        let buf = read(&d, 6, bs + 100, bs).await.unwrap();
        let whole = read(&d, 6, bs, 2 * bs).await.unwrap();
        assert!(buf[..] == whole[100..100 + bs as usize]);
    } else {
        assert_eq!(d.read_granularity_bytes(), bs);
        let e = err(read(&d, 6, 100, bs).await);
        assert_eq!(
            e.to_string(),
            format!("read of {bs} bytes at byte 100 of zone 6 is not a positive multiple of the {bs}-byte block size")
        );
    }
}

pub async fn misaligned_and_out_of_range_ops<B: Backend>(mut b: B) {
    let d = b.create(&geometry()).await;
    let Dims { bs, zones: n, .. } = dims(&d);
    let e = err(d.write(0, 0, DmaBuf::from_slice(&[1; 100])).await.0);
    assert_eq!(e.kind(), ErrorKind::Misaligned);
    assert_eq!(e.nvme_status(), None);
    let e = err(d.write(0, 0, DmaBuf::with_capacity(bs as usize)).await.0);
    assert_eq!(
        e.to_string(),
        format!("write of 0 bytes at byte 0 of zone 0 is not a positive multiple of the {bs}-byte block size")
    );
    assert_eq!(state(&d, 0).await, ZoneState::Empty);
    let e = err(write(&d, n, 0, bs).await);
    assert_eq!(e.kind(), ErrorKind::OutOfRange);
    assert_eq!(
        err(read(&d, n + 1, 0, bs).await).kind(),
        ErrorKind::OutOfRange
    );
    assert_eq!(
        err(append(&d, n, bs, 0).await).kind(),
        ErrorKind::OutOfRange
    );
    assert_eq!(
        err(act(&d, ZoneAction::Reset, n).await).kind(),
        ErrorKind::OutOfRange
    );
}

pub async fn explicit_open_and_close<B: Backend>(mut b: B) {
    let d = b.create(&geometry()).await;
    let bs = dims(&d).bs;
    act(&d, ZoneAction::Open, 0).await.unwrap();
    assert_eq!(state(&d, 0).await, ZoneState::ExplicitlyOpened);
    act(&d, ZoneAction::Open, 0).await.unwrap();
    write(&d, 0, 0, bs).await.unwrap();
    assert_eq!(
        state(&d, 0).await,
        ZoneState::ExplicitlyOpened,
        "a write keeps a zone explicitly opened"
    );
    act(&d, ZoneAction::Close, 0).await.unwrap();
    assert_eq!(state(&d, 0).await, ZoneState::Closed);
    act(&d, ZoneAction::Close, 0).await.unwrap();
    act(&d, ZoneAction::Open, 0).await.unwrap();
    assert_eq!(state(&d, 0).await, ZoneState::ExplicitlyOpened);
    write(&d, 1, 0, bs).await.unwrap();
    act(&d, ZoneAction::Open, 1).await.unwrap();
    assert_eq!(
        state(&d, 1).await,
        ZoneState::ExplicitlyOpened,
        "open of an implicitly opened zone"
    );
    act(&d, ZoneAction::Close, 1).await.unwrap();
    write(&d, 1, bs, bs).await.unwrap();
    assert_eq!(
        state(&d, 1).await,
        ZoneState::ImplicitlyOpened,
        "a write to a Closed zone reopens it implicitly"
    );
    assert_eq!(wp(&d, 1).await, 2 * bs);
}

pub async fn closing_an_unwritten_zone_keeps_it_closed_and_active<B: Backend>(mut b: B) {
    let d = b.create(&geometry()).await;
    let max_active = d.geometry().max_active_zones;
    if max_active.is_none() {
        note("closing_an_unwritten_zone_keeps_it_closed_and_active: the device has no active limit: only the Close outcome is checked");
    }
    let opened = max_active.unwrap_or(3);
    for z in 0..opened {
        act(&d, ZoneAction::Open, z)
            .await
            .unwrap_or_else(|e| panic!("open {z}: {e}"));
        act(&d, ZoneAction::Close, z).await.unwrap();
        let info = zone(&d, z).await;
        if B::CAPS.zbc {
            assert_eq!(
                (info.state, info.write_pointer_bytes),
                (ZoneState::Empty, 0),
                "ZBC (null_blk), not ZNS: closing a zone with nothing written empties it"
            );
        } else {
            assert_eq!(
                (info.state, info.write_pointer_bytes),
                (ZoneState::Closed, 0),
                "ZNS, not ZBC: Close never empties"
            );
        }
    }
    let Some(max_active) = max_active else {
        return;
    };
    if B::CAPS.zbc {
        // ZBC: the closed zones went back to Empty and hold no active resource.
        act(&d, ZoneAction::Open, max_active).await.unwrap();
        assert_eq!(state(&d, max_active).await, ZoneState::ExplicitlyOpened);
        return;
    }
    let e = err(act(&d, ZoneAction::Open, max_active).await);
    assert_eq!(
        e.to_string(),
        format!("Too Many Active Zones: zone {max_active} cannot leave Empty, all {max_active} active resources are taken")
    );
    act(&d, ZoneAction::Reset, 0).await.unwrap();
    assert_eq!(state(&d, 0).await, ZoneState::Empty);
    act(&d, ZoneAction::Open, max_active).await.unwrap();
}

pub async fn invalid_transitions_are_refused<B: Backend>(mut b: B) {
    let d = b.create(&geometry()).await;
    let e = err(act(&d, ZoneAction::Close, 0).await);
    assert_eq!(
        e.to_string(),
        "Invalid Zone State Transition: cannot close zone 0 in state Empty"
    );
    assert_eq!(e.nvme_status(), Some((1, 0xBF)));
    act(&d, ZoneAction::Finish, 0).await.unwrap();
    let e = err(act(&d, ZoneAction::Open, 0).await);
    assert_eq!(
        e.to_string(),
        "Invalid Zone State Transition: cannot open zone 0 in state Full"
    );
    assert_eq!(
        err(act(&d, ZoneAction::Close, 0).await).kind(),
        ErrorKind::InvalidTransition
    );
    assert_eq!(
        err(act(&d, ZoneAction::Offline, 0).await).kind(),
        ErrorKind::InvalidTransition
    );
    act(&d, ZoneAction::Finish, 0).await.unwrap();
    assert_eq!(
        state(&d, 0).await,
        ZoneState::Full,
        "finishing a Full zone changes nothing"
    );
    act(&d, ZoneAction::Reset, 1).await.unwrap();
    assert_eq!(
        state(&d, 1).await,
        ZoneState::Empty,
        "resetting an Empty zone changes nothing"
    );
}

pub async fn finish_makes_zones_full<B: Backend>(mut b: B) {
    let d = b.create(&geometry()).await;
    let Dims { bs, cap, zones, .. } = dims(&d);
    act(&d, ZoneAction::Finish, 0).await.unwrap();
    assert_eq!(
        (state(&d, 0).await, wp(&d, 0).await),
        (ZoneState::Full, cap)
    );
    write(&d, 1, 0, 2 * bs).await.unwrap();
    act(&d, ZoneAction::Finish, 1).await.unwrap();
    assert_eq!(
        (state(&d, 1).await, wp(&d, 1).await),
        (ZoneState::Full, cap)
    );
    let buf = read(&d, 1, 0, 4 * bs).await.unwrap();
    check_data::<B>(&buf, 1, 0, 2 * bs);
    act(&d, ZoneAction::Open, 2).await.unwrap();
    act(&d, ZoneAction::Finish, 2).await.unwrap();
    write(&d, 3, 0, bs).await.unwrap();
    act(&d, ZoneAction::Close, 3).await.unwrap();
    act(&d, ZoneAction::Finish, 3).await.unwrap();
    assert_eq!(state(&d, 3).await, ZoneState::Full);
    // Finished zones hold no resources: every active resource is free again.
    let active = d.geometry().max_active_zones.unwrap_or(3).min(zones - 4);
    for z in 4..4 + active {
        act(&d, ZoneAction::Open, z)
            .await
            .unwrap_or_else(|e| panic!("open {z}: {e}"));
        act(&d, ZoneAction::Close, z).await.unwrap();
    }
}

pub async fn reset_and_reuse<B: Backend>(mut b: B) {
    let d = b.create(&geometry()).await;
    let Dims { bs, cap, .. } = dims(&d);
    write(&d, 7, 0, 8 * bs).await.unwrap();
    act(&d, ZoneAction::Reset, 7).await.unwrap();
    assert_eq!((state(&d, 7).await, wp(&d, 7).await), (ZoneState::Empty, 0));
    let buf = read(&d, 7, 0, 8 * bs).await.unwrap();
    check_data::<B>(&buf, 7, 0, 0);
    d.write(7, 0, DmaBuf::from_slice(&pattern(1, 0, 2 * bs)))
        .await
        .0
        .unwrap();
    let buf = read(&d, 7, 0, 8 * bs).await.unwrap();
    if B::CAPS.stores_data {
        assert!(buf[..2 * bs as usize] == pattern(1, 0, 2 * bs)[..]);
        assert!(
            buf[2 * bs as usize..].iter().all(|&x| x == 0),
            "old data visible after reset"
        );
    }
    write(&d, 6, 0, cap).await.unwrap();
    act(&d, ZoneAction::Reset, 6).await.unwrap();
    write(&d, 6, 0, bs).await.unwrap();
    assert_eq!(wp(&d, 6).await, bs);
}

/// `(max_open, max_active)` when the device has both limits, else a note that `scenario`
/// cannot run on it.
fn open_and_active_limits<D: ZonedDevice>(d: &D, scenario: &str) -> Option<(u32, u32)> {
    let g = d.geometry();
    match (g.max_open_zones, g.max_active_zones) {
        (Some(open), Some(active)) => Some((open, active)),
        _ => {
            note(&format!(
                "{scenario}: skipped, the device has no open or no active limit ({:?} / {:?})",
                g.max_open_zones, g.max_active_zones
            ));
            None
        }
    }
}

pub async fn open_limit_closes_the_oldest_implicitly_opened_zone<B: Backend>(mut b: B) {
    let d = b.create(&geometry()).await;
    let bs = dims(&d).bs;
    let Some((max_open, max_active)) =
        open_and_active_limits(&d, "open_limit_closes_the_oldest_implicitly_opened_zone")
    else {
        return;
    };
    // Every active resource taken: the oldest `max_active - max_open` zones were closed by
    // the device to open the newer ones.
    for z in 0..max_active {
        write(&d, z, 0, bs).await.unwrap();
    }
    let first_open = max_active - max_open;
    for z in 0..max_active {
        let want = if z < first_open {
            ZoneState::Closed
        } else {
            ZoneState::ImplicitlyOpened
        };
        assert_eq!(state(&d, z).await, want, "zone {z}: the oldest are closed");
    }
    let e = err(write(&d, max_active, 0, bs).await);
    assert_eq!(
        e.to_string(),
        format!("Too Many Active Zones: zone {max_active} cannot leave Empty, all {max_active} active resources are taken")
    );
    assert_eq!(e.nvme_status(), Some((1, 0xBD)));
    assert_eq!(state(&d, max_active).await, ZoneState::Empty);
    // The refused write itself changes nothing, but ZNS lets the controller close an
    // Implicitly Opened zone to free an open resource whenever one is needed: QEMU 7.2
    // (`zoned.auto_transition`) closes the oldest before it checks the active limit, so
    // zone `first_open` may be Closed now; the model closes nothing. Either way its write
    // pointer stays and no other zone changes.
    let z = zone(&d, first_open).await;
    assert!(
        matches!(z.state, ZoneState::ImplicitlyOpened | ZoneState::Closed),
        "a refused write may at most close the oldest implicitly opened zone: {z:?}"
    );
    assert_eq!(z.write_pointer_bytes, bs);
    for other in first_open + 1..max_active {
        assert_eq!(state(&d, other).await, ZoneState::ImplicitlyOpened);
    }
    if B::CAPS.zbc && first_open > 0 {
        // null_blk: reopening a Closed zone while every active resource is taken fails even
        // though closing an implicitly opened zone would free the open resource it needs
        // (null_blk checks for a free active resource before closing one; QEMU's ZNS does not).
        let e = err(write(&d, 0, bs, bs).await);
        assert_eq!(e.kind(), ErrorKind::TooManyOpen, "{e}");
        assert_eq!(state(&d, 0).await, ZoneState::Closed);
        assert_eq!(state(&d, first_open).await, ZoneState::ImplicitlyOpened);
        return;
    }
    if first_open == 0 {
        note("open_limit_closes_the_oldest_implicitly_opened_zone: max open = max active, no zone is closed: the reopen part is skipped");
        return;
    }
    write(&d, 0, bs, bs).await.unwrap();
    assert_eq!(state(&d, 0).await, ZoneState::ImplicitlyOpened);
    assert_eq!(state(&d, first_open).await, ZoneState::Closed);
    // Explicit open also closes an implicitly opened zone to get its resource.
    act(&d, ZoneAction::Open, first_open).await.unwrap();
    if max_open > 1 {
        assert_eq!(state(&d, first_open + 1).await, ZoneState::Closed);
    }
}

pub async fn open_limit_with_explicit_opens_is_too_many_open<B: Backend>(mut b: B) {
    let d = b.create(&geometry()).await;
    let bs = dims(&d).bs;
    let Some((max_open, max_active)) =
        open_and_active_limits(&d, "open_limit_with_explicit_opens_is_too_many_open")
    else {
        return;
    };
    if max_active <= max_open {
        note(
            "open_limit_with_explicit_opens_is_too_many_open: skipped, needs max active > max open",
        );
        return;
    }
    for z in 0..max_open {
        act(&d, ZoneAction::Open, z).await.unwrap();
    }
    let next = max_open;
    let e = err(write(&d, next, 0, bs).await);
    assert_eq!(
        e.to_string(),
        format!("Too Many Open Zones: zone {next} needs an open resource, all {max_open} are held by explicitly opened zones")
    );
    assert_eq!(e.nvme_status(), Some((1, 0xBE)));
    assert_eq!(state(&d, next).await, ZoneState::Empty);
    assert_eq!(
        err(act(&d, ZoneAction::Open, next).await).kind(),
        ErrorKind::TooManyOpen
    );
    assert_eq!(
        err(append(&d, next, bs, 0).await).kind(),
        ErrorKind::TooManyOpen
    );
    act(&d, ZoneAction::Close, 0).await.unwrap();
    write(&d, next, 0, bs).await.unwrap();
    act(&d, ZoneAction::Open, next).await.unwrap();
    let e = err(write(&d, 0, 0, bs).await);
    if B::CAPS.zbc {
        assert_eq!(e.kind(), ErrorKind::TooManyOpen, "{e}");
        assert_eq!(
            state(&d, 0).await,
            ZoneState::Empty,
            "ZBC (null_blk): the zone closed with nothing written went back to Empty"
        );
    } else {
        assert_eq!(
            e.kind(),
            ErrorKind::TooManyOpen,
            "a Closed zone needs an open resource too"
        );
        assert_eq!(state(&d, 0).await, ZoneState::Closed);
    }
}

pub async fn finish_of_a_closed_zone_needs_no_open_resource<B: Backend>(mut b: B) {
    let d = b.create(&geometry()).await;
    let bs = dims(&d).bs;
    let Some((max_open, max_active)) =
        open_and_active_limits(&d, "finish_of_a_closed_zone_needs_no_open_resource")
    else {
        return;
    };
    let first_open = max_active - max_open;
    if first_open == 0 {
        note("finish_of_a_closed_zone_needs_no_open_resource: max active = max open");
        return;
    }
    // Every open and every active resource taken: the first zones written and closed, the
    // others written and left implicitly opened. (Closed explicitly, not by the device's
    // implicit close: zoned null_blk picks its implicit-close victim round-robin across the
    // whole device's life, and other scenarios expect a particular one.)
    for z in 0..max_active {
        write(&d, z, 0, bs).await.unwrap();
        if z < first_open {
            act(&d, ZoneAction::Close, z).await.unwrap();
        }
    }
    // Finishing a Closed zone (ZSC -> ZSF) needs no open resource. (Zoned null_blk refuses it
    // with every open and active resource taken; the zbd backend closes an implicitly opened
    // zone and finishes again, as a controller's implicit close would.)
    act(&d, ZoneAction::Finish, 0).await.unwrap();
    let z = zone(&d, 0).await;
    assert_eq!(z.state, ZoneState::Full, "{z:?}");
    for other in first_open..max_active {
        let z = zone(&d, other).await;
        assert!(
            matches!(z.state, ZoneState::ImplicitlyOpened | ZoneState::Closed),
            "finishing zone 0 may at most close an implicitly opened zone: {z:?}"
        );
        assert_eq!(z.write_pointer_bytes, bs, "{z:?}");
    }
    // The active resource it held is free again.
    write(&d, max_active, 0, bs).await.unwrap();
}

pub async fn select_all_actions<B: Backend>(mut b: B) {
    let d = b.create(&geometry()).await;
    let Dims { bs, cap, .. } = dims(&d);
    let g = *d.geometry();
    // `k` zones end up Closed: one more than can be open at once when the limits allow it,
    // so that Open All has to be refused.
    let refusable = match (g.max_open_zones, g.max_active_zones) {
        (Some(open), active) if active.is_none_or(|a| a > open) => Some(open + 1),
        _ => None,
    };
    if refusable.is_none() {
        note("select_all_actions: no refused Open All (no open limit, or max active = max open)");
    }
    let k = refusable.unwrap_or(3);
    let full = k;
    write(&d, full, 0, cap).await.unwrap();
    for z in 0..k {
        write(&d, z, 0, bs).await.unwrap();
    }
    d.zone_action(ZoneAction::Close, ZoneTarget::All)
        .await
        .unwrap();
    let states = |zs: Vec<ZoneInfo>| zs.iter().map(|z| z.state).collect::<Vec<_>>();
    use ZoneState::*;
    let mut want = vec![Closed; k as usize];
    want.extend([Full, Empty]);
    assert_eq!(
        states(d.report_all().await.unwrap())[..k as usize + 2],
        want
    );
    if refusable.is_some() {
        let e = err(d.zone_action(ZoneAction::Open, ZoneTarget::All).await);
        assert_eq!(e.kind(), ErrorKind::TooManyOpen);
        // ZNS does not make a Select All action atomic: the model checks the resources first
        // and opens nothing, QEMU 7.2 opens Closed zones one by one and stops at the first
        // that finds no open resource. Either way at most `max open` zones are open, only
        // Closed zones were opened, and no write pointer moved.
        let after = d.report_all().await.unwrap();
        let opened = after.iter().filter(|z| z.state == ExplicitlyOpened).count();
        assert!(
            opened <= g.max_open_zones.unwrap_or(u32::MAX) as usize,
            "a refused Open All leaves at most max open zones open"
        );
        for z in &after[..k as usize] {
            assert!(matches!(z.state, Closed | ExplicitlyOpened), "{z:?}");
            assert_eq!(z.write_pointer_bytes, bs);
        }
        act(&d, ZoneAction::Reset, k - 1).await.unwrap();
        want[k as usize - 1] = Empty;
    }
    d.zone_action(ZoneAction::Open, ZoneTarget::All)
        .await
        .unwrap();
    for w in want.iter_mut().filter(|w| **w == Closed) {
        *w = ExplicitlyOpened;
    }
    assert_eq!(
        states(d.report_all().await.unwrap())[..k as usize + 2],
        want
    );
    d.zone_action(ZoneAction::Finish, ZoneTarget::All)
        .await
        .unwrap();
    for w in want.iter_mut().filter(|w| **w == ExplicitlyOpened) {
        *w = Full;
    }
    assert_eq!(
        states(d.report_all().await.unwrap())[..k as usize + 2],
        want,
        "Finish All leaves Empty zones alone"
    );
    d.zone_action(ZoneAction::Reset, ZoneTarget::All)
        .await
        .unwrap();
    assert!(d
        .report_all()
        .await
        .unwrap()
        .iter()
        .all(|z| z.state == Empty && z.write_pointer_bytes == 0));
}

pub async fn flush_keeps_everything_usable<B: Backend>(mut b: B) {
    let d = b.create(&geometry()).await;
    let bs = dims(&d).bs;
    d.flush().await.unwrap();
    write(&d, 0, 0, 2 * bs).await.unwrap();
    d.flush().await.unwrap();
    write(&d, 0, 2 * bs, bs).await.unwrap();
    assert_eq!(wp(&d, 0).await, 3 * bs);
    let buf = read(&d, 0, 0, 3 * bs).await.unwrap();
    check_data::<B>(&buf, 0, 0, 3 * bs);
}

// ---- persistence scenarios (persistent backends) -------------------------------------------

pub async fn reopen_keeps_flushed_data_and_states<B: Backend>(mut b: B) {
    let d = b.create(&geometry()).await;
    let Dims { bs, cap, .. } = dims(&d);
    write(&d, 0, 0, 4 * bs).await.unwrap();
    act(&d, ZoneAction::Open, 1).await.unwrap();
    write(&d, 2, 0, bs).await.unwrap();
    act(&d, ZoneAction::Finish, 2).await.unwrap();
    write(&d, 3, 0, cap).await.unwrap();
    d.flush().await.unwrap();
    let d = b.reopen(d).await;
    let z: Vec<_> = d.report_all().await.unwrap();
    assert_eq!(
        (z[0].state, z[0].write_pointer_bytes),
        (ZoneState::Closed, 4 * bs),
        "open zones come back Closed"
    );
    let dataless = if B::DATALESS_STATES_VOLATILE {
        ZoneState::Empty
    } else {
        ZoneState::Closed
    };
    assert_eq!((z[1].state, z[1].write_pointer_bytes), (dataless, 0));
    assert_eq!(
        (z[2].state, z[2].write_pointer_bytes),
        (ZoneState::Full, cap)
    );
    assert_eq!(z[3].state, ZoneState::Full);
    assert_eq!(z[4].state, ZoneState::Empty);
    check_data::<B>(&read(&d, 0, 0, 8 * bs).await.unwrap(), 0, 0, 4 * bs);
    check_data::<B>(&read(&d, 2, 0, 4 * bs).await.unwrap(), 2, 0, bs);
    check_data::<B>(&read(&d, 3, 0, cap).await.unwrap(), 3, 0, cap);
    write(&d, 0, 4 * bs, bs).await.unwrap();
    assert_eq!(state(&d, 0).await, ZoneState::ImplicitlyOpened);
}

pub async fn reopen_forgets_unflushed_writes<B: Backend>(mut b: B) {
    let d = b.create(&geometry()).await;
    let Dims { bs, .. } = dims(&d);
    write(&d, 0, 0, 2 * bs).await.unwrap();
    d.flush().await.unwrap();
    write(&d, 0, 2 * bs, 2 * bs).await.unwrap();
    append(&d, 1, bs, 0).await.unwrap();
    let d = b.reopen(d).await;
    let w = wp(&d, 0).await;
    assert!(
        w == 2 * bs || w == 4 * bs,
        "write pointer {w} is neither the flushed nor the written one"
    );
    check_data::<B>(&read(&d, 0, 0, w).await.unwrap(), 0, 0, w);
    write(&d, 0, w, bs).await.unwrap();
    let w1 = wp(&d, 1).await;
    check_data::<B>(&read(&d, 1, 0, bs).await.unwrap()[..w1 as usize], 1, 0, w1);
}

pub async fn zone_management_is_durable<B: Backend>(mut b: B) {
    let d = b.create(&geometry()).await;
    let Dims { bs, .. } = dims(&d);
    write(&d, 0, 0, 4 * bs).await.unwrap();
    d.flush().await.unwrap();
    act(&d, ZoneAction::Reset, 0).await.unwrap();
    act(&d, ZoneAction::Open, 5).await.unwrap();
    act(&d, ZoneAction::Close, 5).await.unwrap();
    let d = b.reopen(d).await;
    assert_eq!((state(&d, 0).await, wp(&d, 0).await), (ZoneState::Empty, 0));
    check_data::<B>(&read(&d, 0, 0, 4 * bs).await.unwrap(), 0, 0, 0);
    let dataless = if B::DATALESS_STATES_VOLATILE {
        ZoneState::Empty
    } else {
        ZoneState::Closed
    };
    assert_eq!(state(&d, 5).await, dataless);
}

/// Expands one `#[test]` per scenario for a backend, in a module named `$name`. `$make` is an
/// expression building a fresh [`Backend`]; add `persistent` to include the reopen scenarios.
macro_rules! conformance_suite {
    ($name:ident, $make:expr) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            conformance_suite!(@common $make);
        }
    };
    ($name:ident, $make:expr, persistent) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            conformance_suite!(@common $make);
            conformance_suite!(@tests $make;
                reopen_keeps_flushed_data_and_states,
                reopen_forgets_unflushed_writes,
                zone_management_is_durable,
            );
        }
    };
    (@common $make:expr) => {
        conformance_suite!(@tests $make;
            geometry_and_initial_report,
            write_at_write_pointer_opens_implicitly,
            write_off_the_write_pointer_is_invalid_write,
            write_crossing_capacity_is_refused_whole,
            zone_becomes_full_at_capacity,
            capacity_below_zone_size,
            append_returns_where_data_landed,
            concurrent_appends_land_apart,
            reads_of_written_and_unwritten_ranges,
            misaligned_and_out_of_range_ops,
            explicit_open_and_close,
            closing_an_unwritten_zone_keeps_it_closed_and_active,
            invalid_transitions_are_refused,
            finish_makes_zones_full,
            reset_and_reuse,
            open_limit_closes_the_oldest_implicitly_opened_zone,
            open_limit_with_explicit_opens_is_too_many_open,
            select_all_actions,
            finish_of_a_closed_zone_needs_no_open_resource,
            flush_keeps_everything_usable,
        );
    };
    (@tests $make:expr; $($scenario:ident),* $(,)?) => {
        $(
            #[test]
            fn $scenario() {
                crate::conformance::run(|| $make, |b| crate::conformance::$scenario(b));
            }
        )*
    };
}
