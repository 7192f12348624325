//! ZIOB over `spdk:` in the QEMU guest: appends on two cores into several zones, reads from
//! the buffer, sync (write-back through SPDK), and the device holds exactly the data.
//! Needs `cargo test -p ziob --features spdk` and, in the guest, `--hugepages 512 --env
//! ZIOB_SPDK=1`; otherwise it prints why it skipped. With the feature it also checks that
//! every write-back and device read used ZIOB's buffers in place (zero copy).

#[path = "../../backends/tests/spdk_env/mod.rs"]
mod spdk_env;

use ziob::{DmaBuf, ErrorKind, Runtime, Ziob, ZiobConfig, ZoneAction, ZoneTarget, ZonedDevice};

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
    let spec = format!("spdk:{pci}");
    let rt = Runtime::builder().cores(2).build().unwrap();
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
            r => r.expect("open ziob on spdk"),
        };
        #[cfg(feature = "spdk")]
        let before = ziob::backends::spdk::transfer_stats();
        // Four zones, or as many as the namespace lets be active at once (the small test
        // geometry has 3).
        let zones = max_active.map_or(4, |m| m.clamp(1, 4));
        let mut expect: Vec<Vec<u8>> = vec![Vec::new(); zones as usize];
        for i in 0..200u32 {
            let zone = i % zones;
            let data: Vec<u8> = (0..(1000 + i * 97)).map(|j| (i * 7 + j) as u8).collect();
            let off = z.append(zone, DmaBuf::from_slice(&data)).await.unwrap();
            assert_eq!(off, expect[zone as usize].len() as u64);
            expect[zone as usize].extend_from_slice(&data);
        }
        for zone in 0..zones {
            let e = &expect[zone as usize];
            let got = z.read(zone, 0, e.len()).await.unwrap();
            assert!(got[..] == e[..], "buffer read of zone {zone}");
        }
        z.sync().await.unwrap();
        // Through the device itself (SPDK reads), bypassing the buffer.
        let dev = z.device().clone();
        for zone in 0..zones {
            let e = &expect[zone as usize];
            let len = e.len().div_ceil(4096) * 4096;
            let (r, buf) = dev.read(zone, 0, len, DmaBuf::with_capacity(len)).await;
            r.unwrap();
            assert!(buf[..e.len()] == e[..], "device data of zone {zone}");
            let info = dev.report_zones(zone, 1).await.unwrap()[0];
            assert_eq!(
                info.write_pointer_bytes, len as u64,
                "zone {zone} padded to a block"
            );
        }
        // Every data command so far used SPDK memory in place: ZIOB's chunks and the read
        // buffers above were taken after the open installed SPDK's allocator on each core.
        #[cfg(feature = "spdk")]
        {
            let after = ziob::backends::spdk::transfer_stats();
            eprintln!("[spdk] transfers before {before:?}, after {after:?}");
            assert_eq!(
                after.bounced_cmds, before.bounced_cmds,
                "a data command copied"
            );
            assert!(after.zero_copy_cmds >= before.zero_copy_cmds + u64::from(zones) * 2);
        }
        let (r, _) = dev.write(0, 0, DmaBuf::from_slice(&[0; 4096])).await;
        assert_eq!(r.unwrap_err().kind(), ErrorKind::InvalidWrite);
        z.close().await.unwrap();
        eprintln!(
            "[spdk] ZIOB over spdk: 200 appends in {zones} zones on 2 cores, synced and verified"
        );
    })
    .unwrap();
}
