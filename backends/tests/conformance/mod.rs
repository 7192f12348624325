//! The conformance suite: every scenario is written once, generic over [`Backend`], and
//! expanded into one `#[test]` per scenario for each backend by [`conformance_suite!`].
//!
//! A backend joins with one line in `tests/conformance.rs`:
//! `conformance_suite!(mem, MemBackend);` (add `, persistent` for backends whose data survives
//! a reopen, which adds the persistence scenarios).

#![allow(dead_code)]

use std::future::Future;

use ziob_backends::{
    DeviceError, ErrorKind, Geometry, ZoneAction, ZoneInfo, ZoneState, ZoneTarget, ZonedDevice,
};
use ziob_runtime::DmaBuf;

/// What a backend can do, so scenarios skip only what it cannot.
#[derive(Debug, Clone, Copy)]
pub struct Caps {
    /// Reads return what was written (false for nil).
    pub stores_data: bool,
}

/// How the suite makes (and remakes) devices of one backend. Made fresh inside each test.
#[allow(async_fn_in_trait)]
pub trait Backend: 'static {
    /// The device type.
    type Dev: ZonedDevice;
    /// Capabilities.
    const CAPS: Caps;
    /// A new device with `geometry`, every zone Empty.
    async fn create(&mut self, geometry: &Geometry) -> Self::Dev;
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
    let rt = ziob_runtime::Runtime::builder()
        .cores(1)
        .build()
        .expect("runtime");
    rt.block_on(move || scenario(make()))
        .expect("the scenario panicked on the core (see the panic message above)");
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

pub async fn geometry_and_initial_report<B: Backend>(mut b: B) {
    let d = b.create(&geometry()).await;
    assert_eq!(d.geometry(), &geometry());
    let zones = d.report_all().await.unwrap();
    assert_eq!(zones.len(), 8);
    for (i, z) in zones.iter().enumerate() {
        assert_eq!(z.index, i as u32);
        assert_eq!(z.start_bytes, i as u64 * ZONE);
        assert_eq!(z.capacity_bytes, CAP);
        assert_eq!(z.write_pointer_bytes, 0);
        assert_eq!(z.state, ZoneState::Empty);
    }
    let tail = d.report_zones(6, 10).await.unwrap();
    assert_eq!(tail.iter().map(|z| z.index).collect::<Vec<_>>(), vec![6, 7]);
    let e = err(d.report_zones(8, 1).await);
    assert_eq!(
        e.to_string(),
        "LBA Out of Range: zone 8 does not exist, the device has 8 zones"
    );
    assert_eq!(e.nvme_status(), Some((0, 0x80)));
}

pub async fn write_at_write_pointer_opens_implicitly<B: Backend>(mut b: B) {
    let d = b.create(&geometry()).await;
    write(&d, 0, 0, BS).await.unwrap();
    assert_eq!(state(&d, 0).await, ZoneState::ImplicitlyOpened);
    assert_eq!(wp(&d, 0).await, BS);
    write(&d, 0, BS, 2 * BS).await.unwrap();
    assert_eq!(wp(&d, 0).await, 3 * BS);
    let buf = read(&d, 0, 0, 3 * BS).await.unwrap();
    check_data::<B>(&buf, 0, 0, 3 * BS);
}

pub async fn write_off_the_write_pointer_is_invalid_write<B: Backend>(mut b: B) {
    let d = b.create(&geometry()).await;
    let e = err(write(&d, 3, BS, BS).await);
    assert_eq!(
        e.to_string(),
        "Zone Invalid Write: write at block 1 of zone 3, write pointer is at block 0"
    );
    assert_eq!(
        state(&d, 3).await,
        ZoneState::Empty,
        "a refused write must not open the zone"
    );
    write(&d, 3, 0, 3 * BS).await.unwrap();
    let e = err(write(&d, 3, 40 * BS, BS).await);
    assert_eq!(
        e.to_string(),
        "Zone Invalid Write: write at block 40 of zone 3, write pointer is at block 3"
    );
    assert_eq!(e.kind(), ErrorKind::InvalidWrite);
    assert_eq!(e.nvme_status(), Some((1, 0xBC)));
    let e = err(write(&d, 3, 0, BS).await);
    assert_eq!(
        e.kind(),
        ErrorKind::InvalidWrite,
        "rewriting below the write pointer"
    );
    assert_eq!(wp(&d, 3).await, 3 * BS);
}

pub async fn write_crossing_capacity_is_refused_whole<B: Backend>(mut b: B) {
    let d = b.create(&geometry()).await;
    write(&d, 1, 0, CAP - 2 * BS).await.unwrap();
    let e = err(write(&d, 1, CAP - 2 * BS, 4 * BS).await);
    assert_eq!(
        e.to_string(),
        "Zone Boundary Error: write of 4 blocks at block 190 of zone 1 crosses the zone capacity (block 192)"
    );
    assert_eq!(e.nvme_status(), Some((1, 0xB8)));
    assert_eq!(
        wp(&d, 1).await,
        CAP - 2 * BS,
        "nothing of a refused write may land"
    );
    let buf = read(&d, 1, CAP - 4 * BS, 4 * BS).await.unwrap();
    check_data::<B>(&buf, 1, CAP - 4 * BS, 2 * BS);
}

pub async fn zone_becomes_full_at_capacity<B: Backend>(mut b: B) {
    let d = b.create(&geometry()).await;
    write(&d, 2, 0, CAP / 2).await.unwrap();
    write(&d, 2, CAP / 2, CAP / 2).await.unwrap();
    let z = zone(&d, 2).await;
    assert_eq!(z.state, ZoneState::Full);
    assert_eq!(
        z.write_pointer_bytes, CAP,
        "a Full zone reports its capacity, not the next zone"
    );
    let e = err(write(&d, 2, CAP, BS).await);
    assert_eq!(
        e.to_string(),
        "Zone Is Full: write at block 192 of zone 2, the zone is Full (capacity 192 blocks)"
    );
    assert_eq!(e.nvme_status(), Some((1, 0xB9)));
    let e = err(append(&d, 2, BS, 0).await);
    assert_eq!(
        e.to_string(),
        "Zone Is Full: append at block 0 of zone 2, the zone is Full (capacity 192 blocks)"
    );
    // A Full zone holds no resource: three more zones can become active.
    for z in 3..6 {
        write(&d, z, 0, BS).await.unwrap();
    }
}

pub async fn capacity_below_zone_size<B: Backend>(mut b: B) {
    let d = b.create(&geometry()).await;
    write(&d, 0, 0, CAP).await.unwrap();
    write(&d, 1, 0, BS).await.unwrap();
    let buf = read(&d, 0, CAP - BS, ZONE - CAP + BS).await.unwrap();
    check_data::<B>(&buf, 0, CAP - BS, BS);
    let e = err(read(&d, 0, ZONE - BS, 2 * BS).await);
    assert_eq!(
        e.to_string(),
        "Zone Boundary Error: read of 2 blocks at block 255 of zone 0 crosses the zone end (block 256)"
    );
    let buf = read(&d, 1, 0, BS).await.unwrap();
    check_data::<B>(&buf, 1, 0, BS);
    assert_eq!(zone(&d, 1).await.start_bytes, ZONE);
}

pub async fn append_returns_where_data_landed<B: Backend>(mut b: B) {
    let d = b.create(&geometry()).await;
    assert_eq!(append(&d, 4, BS, 1000).await.unwrap(), 0);
    assert_eq!(state(&d, 4).await, ZoneState::ImplicitlyOpened);
    assert_eq!(append(&d, 4, 2 * BS, 2000).await.unwrap(), BS);
    assert_eq!(append(&d, 4, BS, 3000).await.unwrap(), 3 * BS);
    assert_eq!(wp(&d, 4).await, 4 * BS);
    let buf = read(&d, 4, BS, 2 * BS).await.unwrap();
    if B::CAPS.stores_data {
        assert!(buf[..] == pattern(4, 2000, 2 * BS)[..]);
    }
    let e = err(append(&d, 4, 128 * KIB, 0).await);
    assert_eq!(
        e.to_string(),
        "append of 131072 bytes to zone 4 exceeds the zone append size limit of 65536 bytes"
    );
    assert_eq!(e.nvme_status(), Some((0, 0x02)));
    while wp(&d, 4).await + 64 * KIB <= CAP {
        append(&d, 4, 64 * KIB, 0).await.unwrap();
    }
    let left = CAP - wp(&d, 4).await;
    assert_eq!(left, 48 * KIB);
    let e = err(append(&d, 4, 64 * KIB, 0).await);
    assert_eq!(
        e.to_string(),
        "Zone Boundary Error: append of 16 blocks at block 180 of zone 4 crosses the zone capacity (block 192)"
    );
    assert_eq!(append(&d, 4, left, 0).await.unwrap(), CAP - left);
    assert_eq!(state(&d, 4).await, ZoneState::Full);
}

pub async fn concurrent_appends_land_apart<B: Backend>(mut b: B) {
    let d = b.create(&geometry()).await;
    let tasks: Vec<_> = (0..8u64)
        .map(|i| {
            let d = d.clone();
            ziob_runtime::spawn(async move { (i, append(&d, 5, BS, i * 10_000).await.unwrap()) })
        })
        .collect();
    let mut offsets = Vec::new();
    for t in tasks {
        let (i, off) = t.await;
        let buf = read(&d, 5, off, BS).await.unwrap();
        if B::CAPS.stores_data {
            assert!(
                buf[..] == pattern(5, i * 10_000, BS)[..],
                "append {i} landed elsewhere"
            );
        }
        offsets.push(off);
    }
    offsets.sort_unstable();
    assert_eq!(offsets, (0..8).map(|i| i * BS).collect::<Vec<_>>());
}

pub async fn reads_of_written_and_unwritten_ranges<B: Backend>(mut b: B) {
    let d = b.create(&geometry()).await;
    let buf = read(&d, 6, 0, 4 * BS).await.unwrap();
    check_data::<B>(&buf, 6, 0, 0);
    write(&d, 6, 0, 3 * BS).await.unwrap();
    let buf = read(&d, 6, BS, 4 * BS).await.unwrap();
    check_data::<B>(&buf, 6, BS, 2 * BS);
    let buf = read(&d, 6, 10 * BS, BS).await.unwrap();
    check_data::<B>(&buf, 6, 10 * BS, 0);
    let (r, _) = d
        .read(6, 0, 2 * BS as usize, DmaBuf::with_capacity(BS as usize))
        .await;
    assert_eq!(err(r).kind(), ErrorKind::InvalidArgument);
    let e = err(read(&d, 6, 100, BS).await);
    assert_eq!(e.to_string(), "read of 4096 bytes at byte 100 of zone 6 is not a positive multiple of the 4096-byte block size");
}

pub async fn misaligned_and_out_of_range_ops<B: Backend>(mut b: B) {
    let d = b.create(&geometry()).await;
    let e = err(d.write(0, 0, DmaBuf::from_slice(&[1; 100])).await.0);
    assert_eq!(e.kind(), ErrorKind::Misaligned);
    assert_eq!(e.nvme_status(), None);
    let e = err(d.write(0, 0, DmaBuf::with_capacity(BS as usize)).await.0);
    assert_eq!(e.to_string(), "write of 0 bytes at byte 0 of zone 0 is not a positive multiple of the 4096-byte block size");
    assert_eq!(state(&d, 0).await, ZoneState::Empty);
    let e = err(write(&d, 8, 0, BS).await);
    assert_eq!(e.kind(), ErrorKind::OutOfRange);
    assert_eq!(err(read(&d, 9, 0, BS).await).kind(), ErrorKind::OutOfRange);
    assert_eq!(
        err(append(&d, 8, BS, 0).await).kind(),
        ErrorKind::OutOfRange
    );
    assert_eq!(
        err(act(&d, ZoneAction::Reset, 8).await).kind(),
        ErrorKind::OutOfRange
    );
}

pub async fn explicit_open_and_close<B: Backend>(mut b: B) {
    let d = b.create(&geometry()).await;
    act(&d, ZoneAction::Open, 0).await.unwrap();
    assert_eq!(state(&d, 0).await, ZoneState::ExplicitlyOpened);
    act(&d, ZoneAction::Open, 0).await.unwrap();
    write(&d, 0, 0, BS).await.unwrap();
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
    write(&d, 1, 0, BS).await.unwrap();
    act(&d, ZoneAction::Open, 1).await.unwrap();
    assert_eq!(
        state(&d, 1).await,
        ZoneState::ExplicitlyOpened,
        "open of an implicitly opened zone"
    );
    act(&d, ZoneAction::Close, 1).await.unwrap();
    write(&d, 1, BS, BS).await.unwrap();
    assert_eq!(
        state(&d, 1).await,
        ZoneState::ImplicitlyOpened,
        "a write to a Closed zone reopens it implicitly"
    );
    assert_eq!(wp(&d, 1).await, 2 * BS);
}

pub async fn closing_an_unwritten_zone_keeps_it_closed_and_active<B: Backend>(mut b: B) {
    let d = b.create(&geometry()).await;
    for z in 0..3 {
        act(&d, ZoneAction::Open, z)
            .await
            .unwrap_or_else(|e| panic!("open {z}: {e}"));
        act(&d, ZoneAction::Close, z).await.unwrap();
        let info = zone(&d, z).await;
        assert_eq!(
            (info.state, info.write_pointer_bytes),
            (ZoneState::Closed, 0),
            "ZNS, not ZBC: Close never empties"
        );
    }
    let e = err(act(&d, ZoneAction::Open, 3).await);
    assert_eq!(
        e.to_string(),
        "Too Many Active Zones: zone 3 cannot leave Empty, all 3 active resources are taken"
    );
    act(&d, ZoneAction::Reset, 0).await.unwrap();
    assert_eq!(state(&d, 0).await, ZoneState::Empty);
    act(&d, ZoneAction::Open, 3).await.unwrap();
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
    act(&d, ZoneAction::Finish, 0).await.unwrap();
    assert_eq!(
        (state(&d, 0).await, wp(&d, 0).await),
        (ZoneState::Full, CAP)
    );
    write(&d, 1, 0, 2 * BS).await.unwrap();
    act(&d, ZoneAction::Finish, 1).await.unwrap();
    assert_eq!(
        (state(&d, 1).await, wp(&d, 1).await),
        (ZoneState::Full, CAP)
    );
    let buf = read(&d, 1, 0, 4 * BS).await.unwrap();
    check_data::<B>(&buf, 1, 0, 2 * BS);
    act(&d, ZoneAction::Open, 2).await.unwrap();
    act(&d, ZoneAction::Finish, 2).await.unwrap();
    write(&d, 3, 0, BS).await.unwrap();
    act(&d, ZoneAction::Close, 3).await.unwrap();
    act(&d, ZoneAction::Finish, 3).await.unwrap();
    assert_eq!(state(&d, 3).await, ZoneState::Full);
    // Finished zones hold no resources.
    for z in 4..7 {
        act(&d, ZoneAction::Open, z)
            .await
            .unwrap_or_else(|e| panic!("open {z}: {e}"));
        act(&d, ZoneAction::Close, z).await.unwrap();
    }
}

pub async fn reset_and_reuse<B: Backend>(mut b: B) {
    let d = b.create(&geometry()).await;
    write(&d, 7, 0, 8 * BS).await.unwrap();
    act(&d, ZoneAction::Reset, 7).await.unwrap();
    assert_eq!((state(&d, 7).await, wp(&d, 7).await), (ZoneState::Empty, 0));
    let buf = read(&d, 7, 0, 8 * BS).await.unwrap();
    check_data::<B>(&buf, 7, 0, 0);
    d.write(7, 0, DmaBuf::from_slice(&pattern(1, 0, 2 * BS)))
        .await
        .0
        .unwrap();
    let buf = read(&d, 7, 0, 8 * BS).await.unwrap();
    if B::CAPS.stores_data {
        assert!(buf[..2 * BS as usize] == pattern(1, 0, 2 * BS)[..]);
        assert!(
            buf[2 * BS as usize..].iter().all(|&x| x == 0),
            "old data visible after reset"
        );
    }
    write(&d, 6, 0, CAP).await.unwrap();
    act(&d, ZoneAction::Reset, 6).await.unwrap();
    write(&d, 6, 0, BS).await.unwrap();
    assert_eq!(wp(&d, 6).await, BS);
}

pub async fn open_limit_closes_the_oldest_implicitly_opened_zone<B: Backend>(mut b: B) {
    let d = b.create(&geometry()).await;
    write(&d, 0, 0, BS).await.unwrap();
    write(&d, 1, 0, BS).await.unwrap();
    write(&d, 2, 0, BS).await.unwrap();
    assert_eq!(
        state(&d, 0).await,
        ZoneState::Closed,
        "zone 0 was the oldest implicitly opened"
    );
    assert_eq!(state(&d, 1).await, ZoneState::ImplicitlyOpened);
    assert_eq!(state(&d, 2).await, ZoneState::ImplicitlyOpened);
    let e = err(write(&d, 3, 0, BS).await);
    assert_eq!(
        e.to_string(),
        "Too Many Active Zones: zone 3 cannot leave Empty, all 3 active resources are taken"
    );
    assert_eq!(e.nvme_status(), Some((1, 0xBD)));
    assert_eq!(
        state(&d, 1).await,
        ZoneState::ImplicitlyOpened,
        "a refused write closes nothing"
    );
    write(&d, 0, BS, BS).await.unwrap();
    assert_eq!(state(&d, 0).await, ZoneState::ImplicitlyOpened);
    assert_eq!(state(&d, 1).await, ZoneState::Closed);
    // Explicit open also closes an implicitly opened zone to get its resource.
    act(&d, ZoneAction::Open, 1).await.unwrap();
    assert_eq!(state(&d, 2).await, ZoneState::Closed);
}

pub async fn open_limit_with_explicit_opens_is_too_many_open<B: Backend>(mut b: B) {
    let d = b.create(&geometry()).await;
    act(&d, ZoneAction::Open, 0).await.unwrap();
    act(&d, ZoneAction::Open, 1).await.unwrap();
    let e = err(write(&d, 2, 0, BS).await);
    assert_eq!(e.to_string(), "Too Many Open Zones: zone 2 needs an open resource, all 2 are held by explicitly opened zones");
    assert_eq!(e.nvme_status(), Some((1, 0xBE)));
    assert_eq!(state(&d, 2).await, ZoneState::Empty);
    assert_eq!(
        err(act(&d, ZoneAction::Open, 2).await).kind(),
        ErrorKind::TooManyOpen
    );
    assert_eq!(
        err(append(&d, 2, BS, 0).await).kind(),
        ErrorKind::TooManyOpen
    );
    act(&d, ZoneAction::Close, 0).await.unwrap();
    write(&d, 2, 0, BS).await.unwrap();
    act(&d, ZoneAction::Open, 2).await.unwrap();
    let e = err(write(&d, 0, 0, BS).await);
    assert_eq!(
        e.kind(),
        ErrorKind::TooManyOpen,
        "a Closed zone needs an open resource too"
    );
    assert_eq!(state(&d, 0).await, ZoneState::Closed);
}

pub async fn select_all_actions<B: Backend>(mut b: B) {
    let d = b.create(&geometry()).await;
    write(&d, 3, 0, CAP).await.unwrap();
    write(&d, 0, 0, BS).await.unwrap();
    act(&d, ZoneAction::Open, 1).await.unwrap();
    write(&d, 2, 0, BS).await.unwrap();
    d.zone_action(ZoneAction::Close, ZoneTarget::All)
        .await
        .unwrap();
    let states: Vec<_> = d
        .report_all()
        .await
        .unwrap()
        .iter()
        .map(|z| z.state)
        .collect();
    use ZoneState::*;
    assert_eq!(states[..5], [Closed, Closed, Closed, Full, Empty]);
    let e = err(d.zone_action(ZoneAction::Open, ZoneTarget::All).await);
    assert_eq!(e.kind(), ErrorKind::TooManyOpen);
    assert_eq!(
        state(&d, 0).await,
        Closed,
        "a refused Open All changes nothing"
    );
    act(&d, ZoneAction::Reset, 2).await.unwrap();
    d.zone_action(ZoneAction::Open, ZoneTarget::All)
        .await
        .unwrap();
    let states: Vec<_> = d
        .report_all()
        .await
        .unwrap()
        .iter()
        .map(|z| z.state)
        .collect();
    assert_eq!(
        states[..5],
        [ExplicitlyOpened, ExplicitlyOpened, Empty, Full, Empty]
    );
    d.zone_action(ZoneAction::Finish, ZoneTarget::All)
        .await
        .unwrap();
    let states: Vec<_> = d
        .report_all()
        .await
        .unwrap()
        .iter()
        .map(|z| z.state)
        .collect();
    assert_eq!(
        states[..5],
        [Full, Full, Empty, Full, Empty],
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
    d.flush().await.unwrap();
    write(&d, 0, 0, 2 * BS).await.unwrap();
    d.flush().await.unwrap();
    write(&d, 0, 2 * BS, BS).await.unwrap();
    assert_eq!(wp(&d, 0).await, 3 * BS);
    let buf = read(&d, 0, 0, 3 * BS).await.unwrap();
    check_data::<B>(&buf, 0, 0, 3 * BS);
}

// ---- persistence scenarios (persistent backends) -------------------------------------------

pub async fn reopen_keeps_flushed_data_and_states<B: Backend>(mut b: B) {
    let d = b.create(&geometry()).await;
    write(&d, 0, 0, 4 * BS).await.unwrap();
    act(&d, ZoneAction::Open, 1).await.unwrap();
    write(&d, 2, 0, BS).await.unwrap();
    act(&d, ZoneAction::Finish, 2).await.unwrap();
    write(&d, 3, 0, CAP).await.unwrap();
    d.flush().await.unwrap();
    let d = b.reopen(d).await;
    let z: Vec<_> = d.report_all().await.unwrap();
    assert_eq!(
        (z[0].state, z[0].write_pointer_bytes),
        (ZoneState::Closed, 4 * BS),
        "open zones come back Closed"
    );
    assert_eq!(
        (z[1].state, z[1].write_pointer_bytes),
        (ZoneState::Closed, 0)
    );
    assert_eq!(
        (z[2].state, z[2].write_pointer_bytes),
        (ZoneState::Full, CAP)
    );
    assert_eq!(z[3].state, ZoneState::Full);
    assert_eq!(z[4].state, ZoneState::Empty);
    check_data::<B>(&read(&d, 0, 0, 8 * BS).await.unwrap(), 0, 0, 4 * BS);
    check_data::<B>(&read(&d, 2, 0, 4 * BS).await.unwrap(), 2, 0, BS);
    check_data::<B>(&read(&d, 3, 0, CAP).await.unwrap(), 3, 0, CAP);
    write(&d, 0, 4 * BS, BS).await.unwrap();
    assert_eq!(state(&d, 0).await, ZoneState::ImplicitlyOpened);
}

pub async fn reopen_forgets_unflushed_writes<B: Backend>(mut b: B) {
    let d = b.create(&geometry()).await;
    write(&d, 0, 0, 2 * BS).await.unwrap();
    d.flush().await.unwrap();
    write(&d, 0, 2 * BS, 2 * BS).await.unwrap();
    append(&d, 1, BS, 0).await.unwrap();
    let d = b.reopen(d).await;
    let w = wp(&d, 0).await;
    assert!(
        w == 2 * BS || w == 4 * BS,
        "write pointer {w} is neither the flushed nor the written one"
    );
    check_data::<B>(&read(&d, 0, 0, w).await.unwrap(), 0, 0, w);
    write(&d, 0, w, BS).await.unwrap();
    let w1 = wp(&d, 1).await;
    check_data::<B>(&read(&d, 1, 0, BS).await.unwrap()[..w1 as usize], 1, 0, w1);
}

pub async fn zone_management_is_durable<B: Backend>(mut b: B) {
    let d = b.create(&geometry()).await;
    write(&d, 0, 0, 4 * BS).await.unwrap();
    d.flush().await.unwrap();
    act(&d, ZoneAction::Reset, 0).await.unwrap();
    act(&d, ZoneAction::Open, 5).await.unwrap();
    act(&d, ZoneAction::Close, 5).await.unwrap();
    let d = b.reopen(d).await;
    assert_eq!((state(&d, 0).await, wp(&d, 0).await), (ZoneState::Empty, 0));
    check_data::<B>(&read(&d, 0, 0, 4 * BS).await.unwrap(), 0, 0, 0);
    assert_eq!(state(&d, 5).await, ZoneState::Closed);
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
