//! An `emu` device opened through the page cache (`direct=0`) reads any byte range
//! (`read_granularity_bytes` 1): the bytes are those of the whole-block read around it, with
//! zeros past the data; with `O_DIRECT`, and on other backends, reads stay whole blocks. Its
//! `read_now` (one `preadv2` with `RWF_NOWAIT`) gives the same bytes as `read`, or nothing.

use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config, TestRunner};
use ziob_backends::{create_device, open_device, AnyDevice, Geometry, ZonedDevice};
use ziob_runtime::DmaBuf;

fn on_core<T: Send + 'static, F: std::future::Future<Output = T> + 'static>(
    f: impl FnOnce() -> F + Send + 'static,
) -> T {
    let rt = ziob_runtime::Runtime::builder().cores(1).build().unwrap();
    rt.block_on(f).unwrap()
}

const BLOCK: usize = 4096;
const ZONE: u64 = 256 * 1024;
/// Bytes written to zone 0 (whole blocks); the rest of the zone reads as zeros.
const WRITTEN: usize = 5 * BLOCK;

fn data() -> Vec<u8> {
    (0..WRITTEN)
        .map(|i| (i * 31 + i / 4096) as u8 | 1)
        .collect()
}

/// An emu device in `dir` (on /var/tmp: /tmp is often tmpfs, which refuses O_DIRECT) with
/// [`data`] in zone 0; returns its path.
fn make(dir: &std::path::Path) -> String {
    let path = dir.join("dev.zns");
    let spec = format!("emu:{}", path.display());
    let s = spec.clone();
    on_core(move || async move {
        let d = create_device(&s, &Geometry::new(4, ZONE)).await.unwrap();
        let (r, _) = d.write(0, 0, DmaBuf::from_slice(&data())).await;
        r.unwrap();
        d.flush().await.unwrap();
    });
    spec
}

#[test]
fn page_cache_reads_take_any_range_and_match_the_data() {
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let spec = format!("{},direct=0", make(dir.path()));
    on_core(move || async move {
        let d = open_device(&spec).await.unwrap();
        assert!(matches!(d, AnyDevice::Emu(_)));
        assert_eq!(d.read_granularity_bytes(), 1);
        let want = |o: usize, l: usize| -> Vec<u8> {
            let data = data();
            (o..o + l)
                .map(|i| data.get(i).copied().unwrap_or(0))
                .collect()
        };
        // Seeded random ranges (proptest's deterministic generator).
        let mut runner = TestRunner::new(Config::default());
        let strategy = (0usize..WRITTEN + 2 * BLOCK, 1usize..3 * BLOCK, 0usize..2);
        let mut cases: Vec<(usize, usize, usize)> = (0..300)
            .map(|_| strategy.new_tree(&mut runner).unwrap().current())
            .collect();
        // Edges: at the data's end, straddling it, one byte.
        cases.extend([
            (WRITTEN - 1, 2, 0),
            (WRITTEN - 10, 10, 1),
            (0, 1, 0),
            (4095, 2, 0),
        ]);
        for (o, l, extra) in cases {
            // A buffer larger than the read: only `l` bytes come back.
            let buf = DmaBuf::with_capacity(l + extra * BLOCK);
            let (r, buf) = d.read(0, o as u64, l, buf).await;
            r.unwrap();
            assert_eq!(buf.len(), l);
            assert!(buf[..] == want(o, l)[..], "read {o}+{l}");
        }
        // Past the zone: an error as always.
        let (r, _) = d.read(0, ZONE - 10, 20, DmaBuf::with_capacity(20)).await;
        assert!(r.is_err());
    });
}

#[test]
fn direct_and_memory_devices_read_whole_blocks_only() {
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let spec = make(dir.path());
    on_core(move || async move {
        let d = open_device(&spec).await.unwrap();
        let AnyDevice::Emu(e) = &d else {
            panic!("not emu")
        };
        if e.is_direct() {
            assert_eq!(d.read_granularity_bytes(), BLOCK as u64);
            let (r, _) = d.read(0, 10, 100, DmaBuf::with_capacity(100)).await;
            assert!(r.is_err(), "an unaligned O_DIRECT read was accepted");
            let (r, buf) = d.read(0, 0, BLOCK, DmaBuf::with_capacity(BLOCK)).await;
            r.unwrap();
            assert!(buf[..] == data()[..BLOCK]);
        } else {
            eprintln!("skipped: this filesystem refuses O_DIRECT");
        }
        let m = open_device("mem:zones=2,zone_size=1M").await.unwrap();
        assert_eq!(m.read_granularity_bytes(), m.geometry().block_size_bytes);
        let (r, _) = m.read(0, 10, 100, DmaBuf::with_capacity(100)).await;
        assert!(r.is_err());
    });
}

#[test]
fn read_now_gives_the_bytes_of_read_or_nothing() {
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let base = make(dir.path());
    let spec = format!("{base},direct=0");
    on_core(move || async move {
        let d = open_device(&spec).await.unwrap();
        // Read once the ordinary way: the file's pages are in the page cache now.
        let (r, _) = d.read(0, 0, WRITTEN, DmaBuf::with_capacity(WRITTEN)).await;
        r.unwrap();
        let mut runner = TestRunner::new(Config::default());
        let strategy = (0usize..WRITTEN + 2 * BLOCK, 1usize..3 * BLOCK);
        let mut cases: Vec<(usize, usize)> = (0..300)
            .map(|_| strategy.new_tree(&mut runner).unwrap().current())
            .collect();
        cases.extend([
            (WRITTEN - 1, 2),
            (WRITTEN, 10),
            (0, 1),
            (4095, 2),
            (0, WRITTEN),
        ]);
        let (mut served, mut served_into) = (0, 0);
        for (o, l) in cases {
            let (r, want) = d.read(0, o as u64, l, DmaBuf::with_capacity(l)).await;
            r.unwrap();
            // `None` (not cached) is allowed.
            if let Some(got) = d.read_now(0, o as u64, l) {
                let got = got.unwrap();
                assert!(got[..] == want[..], "read_now {o}+{l} differs from read");
                served += 1;
            }
            // Into memory of the caller's, dirty first (bytes past the data must be zeroed).
            let mut out = vec![std::mem::MaybeUninit::new(0xa5u8); l];
            if let Some(got) = d.read_now_into(0, o as u64, &mut out) {
                let got = got.unwrap();
                assert!(
                    got[..] == want[..],
                    "read_now_into {o}+{l} differs from read"
                );
                served_into += 1;
            }
        }
        assert!(
            served_into > 0,
            "read_now_into served nothing from a cached file"
        );
        assert!(served > 0, "read_now served nothing from a cached file");
        // Past the zone: the same error as `read`.
        assert!(matches!(d.read_now(0, ZONE - 10, 20), Some(Err(_))));
        let mut out = [std::mem::MaybeUninit::uninit(); 20];
        assert!(matches!(
            d.read_now_into(0, ZONE - 10, &mut out),
            Some(Err(_))
        ));
    });
    // O_DIRECT (where the file system allows it) and a latency model: never at once.
    on_core(move || async move {
        let d = open_device(&base).await.unwrap();
        let AnyDevice::Emu(e) = &d else {
            panic!("not emu")
        };
        if e.is_direct() {
            assert!(d.read_now(0, 0, BLOCK).is_none());
        }
        drop(d);
        let d = open_device(&format!("{base},direct=0,lat_us=10"))
            .await
            .unwrap();
        assert!(d.read_now(0, 0, BLOCK).is_none());
    });
}
