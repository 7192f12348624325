//! With registered (fixed) buffers configured on the runtime, the buffer's chunks come from
//! each core's arena (so write-back is WRITE_FIXED on io_uring backends), the data reaches
//! the device intact, and chunks beyond the arena fall back to pooled memory.

use ziob::backends::{EmuDevice, Geometry};
use ziob::runtime::buf::pool_stats;
use ziob::{DmaBuf, Runtime, Ziob, ZiobConfig, ZonedDevice};

const UNIT: usize = 64 << 10;

#[test]
fn chunks_come_from_the_fixed_arena_and_write_back_intact() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fixed.zns");
    // 6 slots per core: fewer than the chunks a zone needs, so some fall back.
    let rt = Runtime::builder()
        .cores(2)
        .fixed_buffers(6, UNIT)
        .build()
        .unwrap();
    let g = Geometry {
        block_size_bytes: 4096,
        zone_size_bytes: 1 << 20,
        zone_capacity_bytes: 1 << 20,
        zone_count: 4,
        max_open_zones: Some(4),
        max_active_zones: Some(4),
        max_append_bytes: 128 << 10,
        volatile_write_cache: true,
    };
    let z = rt
        .block_on(move || async move {
            let dev = EmuDevice::create(&path, &g).await.unwrap();
            let config = ZiobConfig {
                writeback_unit_bytes: Some(UNIT as u64),
                shard_budget_bytes: 2 << 20,
                ..ZiobConfig::default()
            };
            Ziob::with_device(dev, config).await.unwrap()
        })
        .unwrap();
    let zc = z.clone();
    let expect = rt
        .block_on(move || async move {
            let mut expect = vec![Vec::new(); 4];
            for i in 0..320u32 {
                let zone = i % 4;
                let data: Vec<u8> = (0..(3000 + i * 13)).map(|j| (i * 3 + j) as u8).collect();
                let off = zc.append(zone, DmaBuf::from_slice(&data)).await.unwrap();
                assert_eq!(off, expect[zone as usize].len() as u64);
                expect[zone as usize].extend_from_slice(&data);
            }
            zc.sync().await.unwrap();
            expect
        })
        .unwrap();
    // Every core's shard took chunks from its arena, and ran out of slots at least once.
    let stats = rt.run_on_all(|_| async { pool_stats() }).unwrap();
    for (core, s) in stats.iter().enumerate() {
        assert!(s.fixed_taken >= 6, "core {core}: {s:?}");
        assert!(s.fixed_fallbacks > 0, "core {core}: {s:?}");
    }
    // The device holds exactly what was appended (read past the buffer).
    rt.block_on(move || async move {
        let dev = z.device().clone();
        for (zone, e) in expect.iter().enumerate() {
            let len = e.len().div_ceil(4096) * 4096;
            let (r, buf) = dev
                .read(zone as u32, 0, len, DmaBuf::with_capacity(len))
                .await;
            r.unwrap();
            assert!(buf[..e.len()] == e[..], "zone {zone}");
        }
        z.close().await.unwrap();
    })
    .unwrap();
}
