//! The blocking form: used from many plain threads at once (each its own files, all checked
//! after a remount), and refused on a ZIOB core with `BlockingOnCore`.

mod support;

use support::{b, bounded, end, formatted, open, runtime, EmuFile};
use ziob::ZiobError;
use ziob_zonefs::{FsError, WriteLifetime, ZoneFs};

#[test]
fn blocking_calls_from_threads_and_refused_on_a_core() {
    let file = EmuFile::create("blocking", 64, 256 << 10, None);
    let spec = file.spec();
    bounded(120, move || {
        let rt = runtime(2);
        // Keep only the blocking handle: the async one, left alive, would keep the device
        // open past the reopen below.
        let (client, fs) = {
            let (client, fs) = formatted(&rt, &spec, true);
            (client, fs.blocking())
        };
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let fs = fs.clone();
                std::thread::spawn(move || {
                    for f in 0..5 {
                        let p = format!("t{t}/f{f}");
                        fs.create(&p, WriteLifetime::ALL[(t + f) % 7]).unwrap();
                        for i in 0..10u8 {
                            fs.append(&p, &[i; 1000]).unwrap();
                        }
                        fs.sync(&p).unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(fs.df().unwrap().used_bytes, 4 * 5 * 10_000);
        let on_core = {
            let fs = fs.clone();
            b(client.with_ziob(move |_| async move { Ok(fs.size("t0/f0")) })).unwrap()
        };
        assert!(
            matches!(
                on_core,
                Err(FsError::Ziob(ZiobError::BlockingOnCore { .. }))
            ),
            "{on_core:?}"
        );
        drop(fs);
        end(client, false);
        let client = open(&rt, &spec, true);
        let fs = b(ZoneFs::mount(client.clone())).unwrap().blocking();
        for t in 0..4 {
            assert_eq!(fs.list(&format!("t{t}")).unwrap().len(), 5);
            for f in 0..5 {
                let data = fs.read_at(&format!("t{t}/f{f}"), 0, 20_000).unwrap();
                let want: Vec<u8> = (0..10u8).flat_map(|i| [i; 1000]).collect();
                assert_eq!(&data[..], &want[..]);
            }
        }
        drop(fs);
        end(client, false);
    });
}
