//! ZIOB over `spdk:` in the QEMU guest: appends on two cores into four zones, reads from the
//! buffer, sync (write-back through SPDK), and the device holds exactly the data.
//! Needs `cargo test -p ziob --features spdk` and, in the guest, `--hugepages 512 --env
//! ZIOB_SPDK=1` (`cargo xtask spdk-test` does both); otherwise it prints why it skipped. With
//! the feature it also checks that every write-back and device read used ZIOB's buffers in
//! place (zero copy).
//!
//! Four partially filled zones need four active zones once they are durable (a zone with
//! data below its capacity is Open or Closed, i.e. active), and each core may only use its
//! share of the device's Max Active Resources (`ziob` crate docs, "Open and active zones").
//! The buffer lifts the limit for data in memory, not for `sync`: on the small guest geometry
//! (3 active, shared 2 + 1 by two cores; each core owns two of the four zones) `sync` fails
//! with `TooManyActive` naming core 1's share, until a zone of that core is finished. The
//! test checks exactly that, on the device and, on every host, on `mem:` with both guest
//! geometries.

#[path = "../../backends/tests/spdk_env/mod.rs"]
mod spdk_env;

use ziob::{
    DeviceError, DmaBuf, ErrorKind, Runtime, Ziob, ZiobConfig, ZiobError, ZoneAction, ZoneState,
    ZoneTarget, ZonedDevice,
};

/// The two cores the scenario runs on.
const CORES: usize = 2;
/// Zones appended to (two per core).
const ZONES: u32 = 4;

#[test]
fn ziob_on_spdk_appends_reads_and_writes_back() {
    // spdk_env checks cfg!(feature = "spdk") of *this* crate, which ziob does not have: check
    // the guest conditions, then let open_device say whether spdk is built in.
    if std::env::var_os("ZIOB_GUEST").is_none() || std::env::var_os("ZIOB_SPDK").is_none() {
        eprintln!(
            "SKIPPED ziob_on_spdk: needs the ZIOB guest with ZIOB_SPDK=1 and --hugepages 512"
        );
        return;
    }
    let pci = std::env::var("ZIOB_NVME_PCI").expect("ZIOB_NVME_PCI");
    spdk_env::bind_uio(&pci).expect("bind uio_pci_generic");
    scenario(&format!("spdk:{pci}"));
}

/// The same scenario on `mem:` devices with the guest's two geometries: the active-zone rule
/// is ZIOB's, not SPDK's, so it is checked on every host too.
#[test]
fn four_partial_zones_sync_within_each_cores_active_share_on_mem() {
    for spec in [
        "mem:zones=16,zone_size=8M,zone_capacity=6M,max_open=4,max_active=6",
        "mem:zones=8,zone_size=1M,zone_capacity=768K,max_open=2,max_active=3",
        "mem:zones=8,zone_size=1M,zone_capacity=768K,max_open=2,max_active=2",
    ] {
        scenario(spec);
    }
}

/// Core `core`'s share of a device-wide limit, as ZIOB splits it (lower cores get the rest).
fn share(limit: u32, core: usize) -> u32 {
    limit / CORES as u32 + u32::from((core as u32) < limit % CORES as u32)
}

fn scenario(spec: &str) {
    let spec = spec.to_string();
    let rt = Runtime::builder().cores(CORES).build().unwrap();
    rt.block_on(move || async move {
        // Start from an empty namespace: ZIOB takes the zones' state from the device at open.
        let max_active = match ziob::open_device(&spec).await {
            Ok(d) => {
                d.zone_action(ZoneAction::Reset, ZoneTarget::All)
                    .await
                    .unwrap();
                d.geometry().max_active_zones
            }
            Err(e) => {
                eprintln!("SKIPPED ziob_on_spdk: {e} (build with --features spdk)");
                return;
            }
        };
        let z = match Ziob::open(&spec, ZiobConfig::default()).await {
            Err(e)
                if format!("{e:?}").contains("Unsupported")
                    || e.to_string().contains("not available") =>
            {
                eprintln!("SKIPPED ziob_on_spdk: {e} (build with --features spdk)");
                return;
            }
            r => r.expect("open ziob"),
        };
        let on_spdk = spec.starts_with("spdk:");
        #[cfg(feature = "spdk")]
        let before = ziob::backends::spdk::transfer_stats();
        let mut expect: Vec<Vec<u8>> = vec![Vec::new(); ZONES as usize];
        for i in 0..200u32 {
            let zone = i % ZONES;
            let data: Vec<u8> = (0..(1000 + i * 97)).map(|j| (i * 7 + j) as u8).collect();
            let off = z.append(zone, DmaBuf::from_slice(&data)).await.unwrap();
            assert_eq!(off, expect[zone as usize].len() as u64);
            expect[zone as usize].extend_from_slice(&data);
        }
        for zone in 0..ZONES {
            let e = &expect[zone as usize];
            let got = z.read(zone, 0, e.len()).await.unwrap();
            assert!(got[..] == e[..], "buffer read of zone {zone}");
        }
        // Each core owns two of the four zones; a core whose share of the active limit is
        // below two cannot make both durable while both stay partial.
        let owned = |core: usize| (0..ZONES).filter(|&o| z.owner_core(o) == core).count() as u32;
        let over: Vec<usize> = (0..CORES)
            .filter(|&c| max_active.is_some_and(|m| share(m, c) < owned(c)))
            .collect();
        let mut finished: Vec<u32> = Vec::new();
        loop {
            match z.sync().await {
                Ok(()) => break,
                Err(ZiobError::Device(DeviceError::TooManyActive {
                    zone,
                    max_active: m,
                })) => {
                    let core = z.owner_core(zone);
                    let limit = max_active.expect("TooManyActive without an active limit");
                    assert!(
                        over.contains(&core),
                        "{spec}: sync refused zone {zone} of core {core}, whose share {} covers its {} zones",
                        share(limit, core),
                        owned(core)
                    );
                    assert_eq!(m, share(limit, core), "{spec}: the error names core {core}'s share of {limit}");
                    // The core's other zone holds its active resource: finishing it (Full is
                    // not active) lets the refused zone be written back.
                    let other = (0..ZONES)
                        .find(|&o| o != zone && z.owner_core(o) == core && !finished.contains(&o))
                        .expect("another zone of the core");
                    z.zone_action(ZoneAction::Finish, ZoneTarget::One(other))
                        .await
                        .unwrap();
                    finished.push(other);
                    assert!(finished.len() <= CORES, "{spec}: sync keeps failing");
                }
                Err(e) => panic!("{spec}: sync: {e}"),
            }
        }
        assert_eq!(
            finished.len(),
            over.len(),
            "{spec}: one finish per over-subscribed core (cores {over:?}, finished {finished:?})"
        );
        // Through the device itself (SPDK reads), bypassing the buffer.
        let dev = z.device().clone();
        let cap = dev.geometry().zone_capacity_bytes;
        for zone in 0..ZONES {
            let e = &expect[zone as usize];
            let len = e.len().div_ceil(4096) * 4096;
            let (r, buf) = dev.read(zone, 0, len, DmaBuf::with_capacity(len)).await;
            r.unwrap();
            assert!(buf[..e.len()] == e[..], "{spec}: device data of zone {zone}");
            let info = dev.report_zones(zone, 1).await.unwrap()[0];
            if finished.contains(&zone) {
                assert_eq!(info.state, ZoneState::Full, "{spec}: zone {zone} finished");
                assert_eq!(info.write_pointer_bytes, cap);
            } else {
                assert_eq!(
                    info.write_pointer_bytes, len as u64,
                    "{spec}: zone {zone} padded to a block"
                );
            }
        }
        // Every data command so far used SPDK memory in place: ZIOB's chunks and the read
        // buffers above were taken after the open installed SPDK's allocator on each core.
        #[cfg(feature = "spdk")]
        if on_spdk {
            let after = ziob::backends::spdk::transfer_stats();
            eprintln!("[spdk] transfers before {before:?}, after {after:?}");
            assert_eq!(
                after.bounced_cmds, before.bounced_cmds,
                "a data command copied"
            );
            assert!(after.zero_copy_cmds >= before.zero_copy_cmds + u64::from(ZONES) * 2);
        }
        // A write below the write pointer of a zone still open is refused with a typed error.
        let partial = (0..ZONES).find(|z| !finished.contains(z)).unwrap();
        let (r, _) = dev.write(partial, 0, DmaBuf::from_slice(&[0; 4096])).await;
        assert_eq!(r.unwrap_err().kind(), ErrorKind::InvalidWrite);
        z.close().await.unwrap();
        eprintln!(
            "[{}] ZIOB over {spec}: 200 appends in {ZONES} zones on {CORES} cores, synced and verified; zones finished to stay within the active share: {finished:?}",
            if on_spdk { "spdk" } else { "mem" }
        );
    })
    .unwrap();
}
