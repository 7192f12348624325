//! A `FileReader` follows its file: it reads bytes appended after it was opened (past the
//! size it knew), keeps reading the file after a rename, reads the old file (or gives
//! `NotFound`) after a delete or a rename over it, never the bytes of the file now at its
//! path; reads at once (`read_now_into`) and by id (`read_at`) give the same bytes as a read
//! by path. Seeded, with the buffer on and off.

mod support;

use std::mem::MaybeUninit;

use support::{b, bounded, end, formatted, runtime, Rng};
use ziob_zonefs::{FileReader, FsError, WriteLifetime};

/// The bytes of file `tag` at `from..from + len`.
fn content(tag: u64, from: u64, len: usize) -> Vec<u8> {
    (from..from + len as u64)
        .map(|o| (tag.wrapping_mul(131).wrapping_add(o / 3) % 253 + 1) as u8)
        .collect()
}

/// `len` bytes at `from` through `r`: at once when it can be, else by id.
fn read(r: &FileReader, from: u64, len: usize) -> Result<Vec<u8>, FsError> {
    let mut out = vec![MaybeUninit::uninit(); len];
    if let Some(got) = r.read_now_into(from, &mut out) {
        return Ok(got?.to_vec());
    }
    Ok(b(r.read_at(from, len))?.to_vec())
}

#[test]
fn a_reader_follows_its_file_through_growth_renames_and_deletes() {
    for buffered in [true, false] {
        bounded(120, move || {
            let rt = runtime(2);
            let (client, fs) = formatted(&rt, "mem:zones=16,zone_size=256K", buffered);
            let mut rng = Rng(7 + u64::from(buffered));
            for round in 0..20u64 {
                let (a, c) = (format!("a{round}"), format!("c{round}"));
                b(fs.create(&a, WriteLifetime::Medium)).unwrap();
                let mut size = 0u64;
                let grow = |fs: &ziob_zonefs::ZoneFs, size: &mut u64, rng: &mut Rng| {
                    let n = 1 + rng.next() % 20_000;
                    b(fs.append(&a, &content(round, *size, n as usize))).unwrap();
                    *size += n;
                    if rng.next().is_multiple_of(2) {
                        b(fs.sync(&a)).unwrap();
                    }
                };
                grow(&fs, &mut size, &mut rng);
                let r = b(fs.open_reader(&a)).unwrap();
                for _ in 0..3 {
                    // Appended after the open: read past the size the reader knew.
                    let before = size;
                    grow(&fs, &mut size, &mut rng);
                    let from = rng.next() % before;
                    let len = (size - from) as usize;
                    let want = content(round, from, len);
                    let got = read(&r, from, len).unwrap();
                    assert!(
                        got == want,
                        "{} of {len} bytes at {from} after growing",
                        got.len()
                    );
                    let got = read(&r, from, len + 100).unwrap();
                    assert!(
                        got == want,
                        "{} bytes at {from}: short at the end",
                        got.len()
                    );
                    for _ in 0..20 {
                        let from = rng.next() % size;
                        let len = 1 + (rng.next() % 6000).min(size - from - 1) as usize;
                        let want = content(round, from, len);
                        assert!(read(&r, from, len).unwrap() == want, "{len} at {from}");
                        assert!(b(fs.read_at(&a, from, len)).unwrap()[..] == want[..]);
                        // Nothing asked, nothing read, wherever.
                        assert!(b(r.read_at(from, 0)).unwrap().is_empty(), "0 at {from}");
                    }
                }
                // Renamed: the reader still reads it.
                b(fs.rename(&a, &c)).unwrap();
                assert!(
                    read(&r, 0, 100).unwrap() == content(round, 0, 100),
                    "after a rename"
                );
                // Another file renamed over it, then garbage collection: the old bytes or
                // NotFound, never the new file's.
                b(fs.create(&a, WriteLifetime::Medium)).unwrap();
                b(fs.append(&a, &content(1000 + round, 0, 5000))).unwrap();
                b(fs.sync(&a)).unwrap();
                b(fs.rename(&a, &c)).unwrap();
                b(fs.gc(4)).unwrap();
                for _ in 0..10 {
                    let from = rng.next() % 4000;
                    match read(&r, from, 500) {
                        Ok(got) => assert!(got == content(round, from, 500), "round {round}"),
                        Err(FsError::NotFound(_)) => {}
                        Err(e) => panic!("round {round}: {e}"),
                    }
                }
                let fresh = b(fs.open_reader(&c)).unwrap();
                assert!(read(&fresh, 0, 5000).unwrap() == content(1000 + round, 0, 5000));
                b(fs.delete(&c)).unwrap();
                match read(&fresh, 0, 64) {
                    Ok(got) => assert!(got == content(1000 + round, 0, 64), "after the delete"),
                    Err(FsError::NotFound(_)) => {}
                    Err(e) => panic!("after the delete: {e}"),
                }
            }
            let missing = b(fs.open_reader("no-such-file"));
            assert!(matches!(missing, Err(FsError::NotFound(_))), "{missing:?}");
            drop(fs);
            end(client, false);
        });
    }
}
