//! The C ABI in-process (no RocksDB needed): files written through write handles, lazy
//! creation with the lifetime hint set after open, directories, locks, error codes, and a
//! device holding other data refused without being touched.

use std::ffi::{c_char, c_void, CStr, CString};
use std::path::{Path, PathBuf};
use std::ptr;

use ziob::{Client, Runtime, ZiobConfig};
use ziob_rocksdb::error::{
    ZIOB_CORRUPTION, ZIOB_INVALID_ARGUMENT, ZIOB_NOT_FOUND, ZIOB_NO_SPACE, ZIOB_OK,
};
use ziob_rocksdb::ffi::*;

struct Dev(PathBuf);

impl Dev {
    fn new(tag: &str) -> Dev {
        let p = PathBuf::from(format!(
            "/var/tmp/r-rocksdb-abi-{tag}-{}.zns",
            std::process::id()
        ));
        let _ = std::fs::remove_file(&p);
        Dev(p)
    }
    fn uri(&self) -> String {
        self.uri_with("")
    }
    /// The URI with `emu` options (e.g. `,direct=0`) after the path.
    fn uri_with(&self, emu_opts: &str) -> String {
        format!(
            "ziob://emu:{}{emu_opts}?zones=8&zone_size=4M",
            self.0.display()
        )
    }
}

impl Drop for Dev {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn c(s: &str) -> CString {
    CString::new(s).unwrap()
}

/// Runs a call that takes `err`; returns (code, message).
fn check(f: impl FnOnce(*mut *mut c_char) -> i32) -> (i32, String) {
    let mut err: *mut c_char = ptr::null_mut();
    let rc = f(&mut err);
    let msg = if err.is_null() {
        String::new()
    } else {
        // SAFETY: a message from the library, freed once below.
        let m = unsafe { CStr::from_ptr(err) }
            .to_string_lossy()
            .into_owned();
        // SAFETY: as above.
        unsafe { ziob_rocksdb_free_error(err) };
        m
    };
    (rc, msg)
}

fn open(uri: &str) -> Result<*const ZiobFs, (i32, String)> {
    let mut fs: *const ZiobFs = ptr::null();
    let u = c(uri);
    // SAFETY: valid C string and out pointer.
    let (rc, msg) = check(|e| unsafe { ziob_fs_open(u.as_ptr(), &mut fs, e) });
    if rc == ZIOB_OK {
        Ok(fs)
    } else {
        Err((rc, msg))
    }
}

extern "C" fn collect(ctx: *mut c_void, name: *const c_char) {
    // SAFETY: `ctx` is the Vec passed below; `name` a valid C string for the call.
    let v = unsafe { &mut *(ctx as *mut Vec<String>) };
    // SAFETY: as above.
    v.push(
        unsafe { CStr::from_ptr(name) }
            .to_string_lossy()
            .into_owned(),
    );
}

fn children(fs: *const ZiobFs, dir: &str) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    let d = c(dir);
    // SAFETY: valid handle, string, callback and context.
    let (rc, msg) = check(|e| unsafe {
        ziob_fs_children(
            fs,
            d.as_ptr(),
            Some(collect),
            &mut v as *mut _ as *mut c_void,
            e,
        )
    });
    assert_eq!(rc, ZIOB_OK, "{msg}");
    v
}

fn stat(fs: *const ZiobFs, path: &str) -> i32 {
    let mut kind = -1;
    let p = c(path);
    // SAFETY: valid handle, string and out pointer.
    let (rc, msg) = check(|e| unsafe { ziob_fs_stat(fs, p.as_ptr(), &mut kind, e) });
    assert_eq!(rc, ZIOB_OK, "{msg}");
    kind
}

/// The first 64 KiB of `path`.
fn read_all(fs: *const ZiobFs, path: &str) -> Vec<u8> {
    read_range(fs, &c(path), 0, 1 << 16)
}

#[test]
fn files_dirs_locks_and_errors_through_the_c_abi() {
    let dev = Dev::new("files");
    let fs = open(&dev.uri()).unwrap();
    // The same device again: the same shared handle; other options: refused.
    assert_eq!(open(&dev.uri()).unwrap(), fs);
    let (rc, msg) = open(&format!("{}&cores=2", dev.uri())).unwrap_err();
    assert_eq!(rc, ZIOB_INVALID_ARGUMENT, "{msg}");

    // A directory exists while empty once made; a lazily created file shows at once.
    let d = c("/db");
    // SAFETY: valid handle and string (all calls below likewise).
    assert_eq!(
        check(|e| unsafe { ziob_fs_create_dir(fs, d.as_ptr(), e) }).0,
        ZIOB_OK
    );
    assert_eq!(stat(fs, "/db"), 2);
    assert!(children(fs, "/db").is_empty());
    let path = c("/db//000007.sst");
    let mut w: *mut ZiobWFile = ptr::null_mut();
    let (rc, msg) = check(|e| unsafe { ziob_wfile_open(fs, path.as_ptr(), 0, 0, &mut w, e) });
    assert_eq!(rc, ZIOB_OK, "{msg}");
    assert_eq!(stat(fs, "db/000007.sst"), 1);
    assert_eq!(children(fs, "db"), vec!["000007.sst".to_string()]);
    // The hint RocksDB sets after opening still applies (the file is not on the device yet).
    unsafe { ziob_wfile_set_lifetime(w, 4) };
    for chunk in [&b"hello "[..], b"zones"] {
        let (rc, msg) = check(|e| unsafe { ziob_wfile_append(w, chunk.as_ptr(), chunk.len(), e) });
        assert_eq!(rc, ZIOB_OK, "{msg}");
    }
    assert_eq!(unsafe { ziob_wfile_size(w) }, 11);
    // Gathered appends are seen by reads and sizes before any sync.
    assert_eq!(read_all(fs, "/db/000007.sst"), b"hello zones");
    let mut size = 0u64;
    assert_eq!(
        check(|e| unsafe { ziob_fs_size(fs, path.as_ptr(), &mut size, e) }).0,
        ZIOB_OK
    );
    assert_eq!(size, 11);
    assert_eq!(check(|e| unsafe { ziob_wfile_sync(w, e) }).0, ZIOB_OK);
    assert_eq!(check(|e| unsafe { ziob_wfile_close(w, e) }).0, ZIOB_OK);
    unsafe { ziob_wfile_free(w) };
    assert_eq!(read_all(fs, "/db/000007.sst"), b"hello zones");

    // Rename replaces; delete; NotFound for missing files.
    let to = c("/db/CURRENT");
    assert_eq!(
        check(|e| unsafe { ziob_fs_rename(fs, path.as_ptr(), to.as_ptr(), e) }).0,
        ZIOB_OK
    );
    assert_eq!(stat(fs, "/db/000007.sst"), 0);
    let mut size = 0u64;
    let (rc, _) = check(|e| unsafe { ziob_fs_size(fs, path.as_ptr(), &mut size, e) });
    assert_eq!(rc, ZIOB_NOT_FOUND);
    let (rc, msg) = check(|e| unsafe { ziob_fs_delete(fs, path.as_ptr(), e) });
    assert_eq!(rc, ZIOB_NOT_FOUND, "{msg}");
    assert!(msg.contains("000007.sst"), "{msg}");
    // A non-empty directory is not removed.
    assert_ne!(
        check(|e| unsafe { ziob_fs_delete_dir(fs, d.as_ptr(), e) }).0,
        ZIOB_OK
    );

    // Locks are exclusive in the process and create the file.
    let l = c("/db/LOCK");
    assert_eq!(
        check(|e| unsafe { ziob_fs_lock(fs, l.as_ptr(), e) }).0,
        ZIOB_OK
    );
    assert_ne!(
        check(|e| unsafe { ziob_fs_lock(fs, l.as_ptr(), e) }).0,
        ZIOB_OK
    );
    assert_eq!(stat(fs, "/db/LOCK"), 1);
    assert_eq!(
        check(|e| unsafe { ziob_fs_unlock(fs, l.as_ptr(), e) }).0,
        ZIOB_OK
    );
    assert_eq!(
        check(|e| unsafe { ziob_fs_lock(fs, l.as_ptr(), e) }).0,
        ZIOB_OK
    );

    // Reopen for append continues the file.
    let mut w: *mut ZiobWFile = ptr::null_mut();
    assert_eq!(
        check(|e| unsafe { ziob_wfile_open(fs, to.as_ptr(), 0, 1, &mut w, e) }).0,
        ZIOB_OK
    );
    assert_eq!(unsafe { ziob_wfile_size(w) }, 11);
    let more = b"!";
    assert_eq!(
        check(|e| unsafe { ziob_wfile_append(w, more.as_ptr(), 1, e) }).0,
        ZIOB_OK
    );
    unsafe { ziob_wfile_free(w) };
    assert_eq!(read_all(fs, "/db/CURRENT"), b"hello zones!");
    let mut free = 0u64;
    assert_eq!(
        check(|e| unsafe { ziob_fs_free_space(fs, d.as_ptr(), &mut free, e) }).0,
        ZIOB_OK
    );
    assert!(free > 0 && free <= 8 * (4 << 20));

    // Null arguments are errors, not crashes.
    let (rc, _) = check(|e| unsafe { ziob_fs_stat(fs, ptr::null(), &mut 0, e) });
    assert_eq!(rc, ZIOB_INVALID_ARGUMENT);
    let (rc, msg) =
        check(|e| unsafe { ziob_fs_read_at(fs, to.as_ptr(), 0, ptr::null_mut(), 16, &mut 0, e) });
    assert_eq!(rc, ZIOB_INVALID_ARGUMENT, "{msg}");
    let (rc, msg) =
        check(|e| unsafe { ziob_fs_children(fs, d.as_ptr(), None, ptr::null_mut(), e) });
    assert_eq!(rc, ZIOB_INVALID_ARGUMENT, "{msg}");
}

/// Reads `len` bytes at `offset` of `path`.
fn read_range(fs: *const ZiobFs, path: &CStr, offset: u64, len: usize) -> Vec<u8> {
    let mut buf = vec![0u8; len];
    let mut got = 0usize;
    // SAFETY: valid handle and string; `buf` writable for its length.
    let (rc, msg) = check(|e| unsafe {
        ziob_fs_read_at(
            fs,
            path.as_ptr(),
            offset,
            buf.as_mut_ptr(),
            len,
            &mut got,
            e,
        )
    });
    assert_eq!(rc, ZIOB_OK, "{msg}");
    buf.truncate(got);
    buf
}

/// Opens `path` for reading.
fn open_read(fs: *const ZiobFs, path: &CStr) -> *mut ZiobRFile {
    let mut f: *mut ZiobRFile = ptr::null_mut();
    // SAFETY: valid handle, string and out pointer.
    let (rc, msg) = check(|e| unsafe { ziob_rfile_open(fs, path.as_ptr(), &mut f, e) });
    assert_eq!(rc, ZIOB_OK, "{msg}");
    f
}

/// Reads `len` bytes at `offset` through a read handle (into a dirty buffer).
fn read_handle(f: *const ZiobRFile, offset: u64, len: usize) -> Result<Vec<u8>, (i32, String)> {
    let mut buf = vec![0xa5u8; len];
    let mut got = 0usize;
    // SAFETY: a live read handle; `buf` writable for its length.
    let (rc, msg) =
        check(|e| unsafe { ziob_rfile_read(f, offset, buf.as_mut_ptr(), len, &mut got, e) });
    if rc != ZIOB_OK {
        return Err((rc, msg));
    }
    buf.truncate(got);
    Ok(buf)
}

#[test]
fn appends_of_any_size_read_back_in_order_while_writing() {
    appends_of_any_size_read_back(&Dev::new("sizes"), "", "/db/000009.log");
}

/// As above for a table file, whose written pages (completed across hand-overs) and tail
/// go to the read cache.
#[test]
fn appends_of_any_size_to_a_table_read_back_in_order_while_writing() {
    appends_of_any_size_read_back(&Dev::new("sizes-sst"), "", "/db/000010.sst");
}

/// As above on an emu file through the page cache, where the read cache is off by default.
#[test]
fn appends_of_any_size_read_back_through_the_page_cache_without_the_read_cache() {
    appends_of_any_size_read_back(&Dev::new("sizes-pagecache"), ",direct=0", "/db/000009.log");
}

fn appends_of_any_size_read_back(dev: &Dev, emu_opts: &str, path: &str) {
    let fs = open(&dev.uri_with(emu_opts)).unwrap();
    let by_handle = emu_opts.contains("direct=0");
    let path = c(path);
    let mut w: *mut ZiobWFile = ptr::null_mut();
    // SAFETY (all calls in this test): valid handle, strings, buffers and out pointers.
    let (rc, msg) = check(|e| unsafe { ziob_wfile_open(fs, path.as_ptr(), 6, 0, &mut w, e) });
    assert_eq!(rc, ZIOB_OK, "{msg}");
    // A read handle opened while the file is only pending, kept while it grows.
    let r = open_read(fs, &path);
    assert_eq!(
        read_handle(r, 0, 100).unwrap(),
        b"",
        "a pending file is empty"
    );
    let mut model: Vec<u8> = Vec::new();
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for step in 0..300 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        // Mostly small records, sometimes one larger than the gathering buffer.
        let len = match x % 10 {
            0 => 100_000 + (x >> 8) as usize % 200_000,
            1..=3 => (x >> 8) as usize % 9000,
            _ => (x >> 8) as usize % 300,
        };
        let chunk: Vec<u8> = (0..len).map(|i| (i as u64 ^ x) as u8).collect();
        let (rc, msg) = check(|e| unsafe { ziob_wfile_append(w, chunk.as_ptr(), chunk.len(), e) });
        assert_eq!(rc, ZIOB_OK, "{msg}");
        model.extend_from_slice(&chunk);
        // Now and then the last bytes, and past the end: the read cache keeps a file's tail,
        // which must serve only the bytes it holds as the file grows. (Each such read hands
        // the gathered appends over: not every step, so that full gatherings still queue.)
        if step % 5 == 2 {
            let back = (x >> 20) as usize % 40_000;
            let at = model.len().saturating_sub(back);
            let got = read_range(fs, &path, at as u64, 3000);
            let end = (at + 3000).min(model.len());
            assert_eq!(got, &model[at..end], "step {step}, tail");
            let via_handle = read_handle(r, at as u64, 3000).unwrap();
            assert_eq!(via_handle, got, "step {step}, tail by handle");
        }
        if step % 37 == 0 {
            // A read mid-way sees everything appended so far.
            let at = (x >> 3) % model.len().max(1) as u64;
            let got = read_range(fs, &path, at, 5000);
            let end = (at as usize + 5000).min(model.len());
            assert_eq!(got, &model[at as usize..end], "step {step}");
            assert_eq!(
                read_handle(r, at, 5000).unwrap(),
                got,
                "step {step}, by handle"
            );
        }
    }
    assert_eq!(check(|e| unsafe { ziob_wfile_close(w, e) }).0, ZIOB_OK);
    unsafe { ziob_wfile_free(w) };
    let mut off = 0;
    while off < model.len() {
        let got = read_range(fs, &path, off as u64, 1 << 20);
        assert!(!got.is_empty());
        assert_eq!(got, &model[off..off + got.len()], "at {off}");
        off += got.len();
    }
    // Small reads at random places, twice: the second pass is served by the read cache when
    // it is on (pages across boundaries, the partial last page, past the end).
    for pass in 0..2 {
        let mut y: u64 = 0x2545_F491_4F6C_DD1D;
        for _ in 0..400 {
            y ^= y << 13;
            y ^= y >> 7;
            y ^= y << 17;
            let at = (y >> 4) % (model.len() as u64 + 100);
            let len = 1 + (y >> 40) as usize % 70_000;
            let got = read_range(fs, &path, at, len);
            let from = (at as usize).min(model.len());
            let to = (at as usize + len).min(model.len());
            assert_eq!(got, &model[from..to], "pass {pass}: {len} bytes at {at}");
            // Block-sized reads too, which a handle reads at once where it can.
            let small = 1 + (y >> 20) as usize % 4096;
            let to = (at as usize + small).min(model.len());
            assert_eq!(
                read_handle(r, at, small).unwrap(),
                &model[from..to],
                "pass {pass}: {small} bytes at {at} by handle"
            );
            assert_eq!(
                read_handle(r, at, len).unwrap(),
                got,
                "pass {pass}, by handle"
            );
        }
    }
    // Deleted and made again: where the handle reads its file (read cache off), it gives
    // the old file's bytes or NotFound, never the new file's; with the read cache on it
    // reads by path, as a read by path does.
    let old = model[..4096.min(model.len())].to_vec();
    assert_eq!(
        check(|e| unsafe { ziob_fs_delete(fs, path.as_ptr(), e) }).0,
        ZIOB_OK
    );
    write_file(fs, &path, &vec![0x11; 8192]);
    for at in [0u64, 100, 4000] {
        let want = &old[at as usize..at as usize + 96];
        match read_handle(r, at, 96) {
            Ok(got) if by_handle => assert_eq!(got, want, "after the delete"),
            Ok(got) => assert_eq!(got, vec![0x11; 96], "by path after the delete"),
            Err((rc, msg)) => assert!(by_handle && rc == ZIOB_NOT_FOUND, "{msg}"),
        }
    }
    unsafe { ziob_rfile_free(r) };
    let r = open_read(fs, &path);
    assert_eq!(
        read_handle(r, 0, 8192).unwrap(),
        vec![0x11; 8192],
        "the new file"
    );
    unsafe { ziob_rfile_free(r) };
    // Null arguments are errors, not crashes.
    let r = open_read(fs, &path);
    let mut buf = [0u8; 8];
    let mut got = 0usize;
    for (what, rc) in [
        (
            "handle",
            check(|e| unsafe { ziob_rfile_read(ptr::null(), 0, buf.as_mut_ptr(), 8, &mut got, e) })
                .0,
        ),
        (
            "buf",
            check(|e| unsafe { ziob_rfile_read(r, 0, ptr::null_mut(), 8, &mut got, e) }).0,
        ),
        (
            "got",
            check(|e| unsafe { ziob_rfile_read(r, 0, buf.as_mut_ptr(), 8, ptr::null_mut(), e) }).0,
        ),
        (
            "out",
            check(|e| unsafe { ziob_rfile_open(fs, path.as_ptr(), ptr::null_mut(), e) }).0,
        ),
    ] {
        assert_eq!(rc, ZIOB_INVALID_ARGUMENT, "a null {what}");
    }
    unsafe { ziob_rfile_free(r) };
    unsafe { ziob_rfile_free(ptr::null_mut()) };
    // Nothing there: NotFound at the open.
    let none = c("/db/no-such-file");
    let mut f: *mut ZiobRFile = ptr::null_mut();
    let (rc, _) = check(|e| unsafe { ziob_rfile_open(fs, none.as_ptr(), &mut f, e) });
    assert_eq!(rc, ZIOB_NOT_FOUND);
    assert!(f.is_null());
}

/// Writes `data` at the start of `zone` of the emu device at `path` (created with 8 zones of
/// 4 MiB), through ZIOB.
fn put_foreign_data(path: &Path, zone: u32, data: &[u8]) {
    let spec = format!("emu:{}", path.display());
    let rt = Runtime::builder().cores(1).build().unwrap();
    let data = data.to_vec();
    let spec2 = spec.clone();
    rt.block_on(move || async move {
        let g = ziob::Geometry::new(8, 4 << 20);
        drop(ziob::backends::create_device(&spec2, &g).await.unwrap());
    })
    .unwrap();
    futures::executor::block_on(async {
        let client = Client::open(rt.handle(), &spec, ZiobConfig::default())
            .await
            .unwrap();
        client.append_slice(zone, &data).await.unwrap();
        client.close().await.unwrap();
    });
}

fn zone_start(path: &Path, zone: u32, len: usize) -> Vec<u8> {
    let spec = format!("emu:{}", path.display());
    let rt = Runtime::builder().cores(1).build().unwrap();
    futures::executor::block_on(async {
        let client = Client::open(rt.handle(), &spec, ZiobConfig::default())
            .await
            .unwrap();
        let d = client.read(zone, 0, len).await.unwrap().to_vec();
        client.close().await.unwrap();
        d
    })
}

#[test]
fn a_device_holding_other_data_is_refused_and_left_alone() {
    let junk = vec![0xA5u8; 8192];
    // Something in the reserved zones that is not a zone file system.
    let dev = Dev::new("foreign");
    put_foreign_data(&dev.0, 0, &junk);
    let (rc, msg) = open(&dev.uri()).unwrap_err();
    assert_eq!(rc, ZIOB_CORRUPTION, "{msg}");
    assert!(msg.contains("never formats"), "{msg}");
    assert_eq!(zone_start(&dev.0, 0, junk.len()), junk);

    // Empty reserved zones but data in a data zone: not blank, so not formatted either.
    let dev = Dev::new("dataonly");
    put_foreign_data(&dev.0, 5, &junk);
    let (rc, msg) = open(&dev.uri()).unwrap_err();
    assert_eq!(rc, ZIOB_CORRUPTION, "{msg}");
    assert_eq!(zone_start(&dev.0, 5, junk.len()), junk);
}

/// Writes a whole new file `path` with `data` (closed, not synced).
fn write_file(fs: *const ZiobFs, path: &CStr, data: &[u8]) {
    let mut w: *mut ZiobWFile = ptr::null_mut();
    // SAFETY (this function): valid handle, string, buffer and out pointer.
    let (rc, msg) = check(|e| unsafe { ziob_wfile_open(fs, path.as_ptr(), 0, 0, &mut w, e) });
    assert_eq!(rc, ZIOB_OK, "{msg}");
    let (rc, msg) = check(|e| unsafe { ziob_wfile_append(w, data.as_ptr(), data.len(), e) });
    assert_eq!(rc, ZIOB_OK, "{msg}");
    assert_eq!(check(|e| unsafe { ziob_wfile_close(w, e) }).0, ZIOB_OK);
    unsafe { ziob_wfile_free(w) };
}

#[test]
fn cached_reads_never_outlive_a_delete_recreate_or_rename() {
    let dev = Dev::new("cache");
    let fs = open(&dev.uri()).unwrap();
    let a = c("/db/A");
    let b = c("/db/B");
    // Files of more than one cache page, so that their first page is kept.
    let body = |ch: u8| vec![ch; 40_000];
    write_file(fs, &a, &body(b'a'));
    assert_eq!(read_range(fs, &a, 0, 4), b"aaaa"); // page 0 kept in the read cache
    assert_eq!(read_range(fs, &a, 0, 4), b"aaaa"); // served from it
                                                   // Recreated (NewWritableFile over it): the old bytes are gone.
    write_file(fs, &a, &body(b'b'));
    assert_eq!(read_range(fs, &a, 0, 4), b"bbbb");
    // Deleted and written again.
    // SAFETY: valid handle and string.
    assert_eq!(
        check(|e| unsafe { ziob_fs_delete(fs, a.as_ptr(), e) }).0,
        ZIOB_OK
    );
    write_file(fs, &a, &body(b'c'));
    assert_eq!(read_range(fs, &a, 0, 4), b"cccc");
    // Renamed over a file whose bytes were cached.
    write_file(fs, &b, &body(b'd'));
    assert_eq!(read_range(fs, &b, 0, 4), b"dddd");
    // SAFETY: valid handle and strings.
    assert_eq!(
        check(|e| unsafe { ziob_fs_rename(fs, a.as_ptr(), b.as_ptr(), e) }).0,
        ZIOB_OK
    );
    assert_eq!(read_range(fs, &b, 0, 4), b"cccc");
    let mut kind = -1;
    // SAFETY: valid handle, string and out pointer.
    let (rc, _) = check(|e| unsafe { ziob_fs_stat(fs, a.as_ptr(), &mut kind, e) });
    assert_eq!((rc, kind), (ZIOB_OK, 0));
    // SAFETY: as above.
    let (rc, _) = check(|e| unsafe {
        ziob_fs_read_at(fs, a.as_ptr(), 0, [0u8; 4].as_mut_ptr(), 4, &mut 0, e)
    });
    assert_eq!(
        rc, ZIOB_NOT_FOUND,
        "a renamed-away file is not served from the cache"
    );
}

#[test]
fn lifetime_hints_set_after_open_pick_the_zones() {
    let dev = Dev::new("hints");
    let fs = open(&dev.uri()).unwrap();
    // (path, lifetime at open, hint set after open): WAL = 6, Extreme = 5, none = 0.
    let files = [
        ("/db/000001.log", 6, None),
        ("/db/000002.sst", 0, Some(5)),
        ("/db/000003.sst", 0, None),
    ];
    for (name, at_open, hint) in files {
        let p = c(name);
        let mut w: *mut ZiobWFile = ptr::null_mut();
        // SAFETY (this loop): valid handle, strings, buffers and out pointers.
        let (rc, msg) =
            check(|e| unsafe { ziob_wfile_open(fs, p.as_ptr(), at_open, 0, &mut w, e) });
        assert_eq!(rc, ZIOB_OK, "{msg}");
        if let Some(h) = hint {
            unsafe { ziob_wfile_set_lifetime(w, h) };
        }
        let data = [7u8; 5000];
        assert_eq!(
            check(|e| unsafe { ziob_wfile_append(w, data.as_ptr(), data.len(), e) }).0,
            ZIOB_OK
        );
        assert_eq!(check(|e| unsafe { ziob_wfile_sync(w, e) }).0, ZIOB_OK);
        // A hint once data is on the device changes nothing.
        unsafe { ziob_wfile_set_lifetime(w, 2) };
        assert_eq!(check(|e| unsafe { ziob_wfile_close(w, e) }).0, ZIOB_OK);
        unsafe { ziob_wfile_free(w) };
    }
    // SAFETY: the handle is a live `SharedFs` (never freed).
    let shared = unsafe { &*fs };
    let zones = futures::executor::block_on(shared.fs.fs().zones());
    let mut open_slots: Vec<usize> = zones
        .iter()
        .filter_map(|(_, usage, _, live)| match usage {
            ziob_zonefs::ZoneUse::Open(slot) if *live > 0 => Some(*slot),
            _ => None,
        })
        .collect();
    open_slots.sort_unstable();
    // One open zone per class: NotSet (0), Extreme (5), WAL (6); none for Short (2).
    assert_eq!(open_slots, vec![0, 5, 6], "{zones:?}");
}

/// A raw fs handle that crosses threads (the `SharedFs` behind it is `Sync` and lives for the
/// process).
#[derive(Clone, Copy)]
struct Handle(*const ZiobFs);
// SAFETY: the handle points to a leaked `SharedFs`, which is `Sync`.
unsafe impl Send for Handle {}

#[test]
fn reads_racing_a_rename_or_recreate_never_leave_stale_pages() {
    let dev = Dev::new("race");
    let fs = Handle(open(&dev.uri()).unwrap());
    // Whole cache pages (32 KiB), so that the first page of each file is kept.
    let body = |ch: u8| vec![ch; 64 << 10];
    for round in 0..400u32 {
        let to = c(&format!("/race/T{round}"));
        let from = c(&format!("/race/F{round}"));
        write_file(fs.0, &to, &body(b'o'));
        write_file(fs.0, &from, &body(b'n'));
        assert_eq!(read_range(fs.0, &to, 0, 4), b"oooo");
        // A reader of `to` all the time while it is replaced: by a rename in even rounds,
        // by creating it again (NewWritableFile over it) in odd ones.
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let readers: Vec<_> = (0..3)
            .map(|_| {
                let (stop, to) = (stop.clone(), to.clone());
                std::thread::spawn(move || {
                    let fs = fs;
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        let mut buf = [0u8; 4];
                        let mut got = 0usize;
                        // SAFETY: valid handle and string; `buf` writable for its length.
                        let (rc, msg) = check(|e| unsafe {
                            ziob_fs_read_at(fs.0, to.as_ptr(), 0, buf.as_mut_ptr(), 4, &mut got, e)
                        });
                        // Recreating shows an empty or short file for a moment.
                        assert!(rc == ZIOB_OK || rc == ZIOB_NOT_FOUND, "{rc}: {msg}");
                        let seen = &buf[..got];
                        assert!(
                            seen.iter().all(|&b| b == b'o') || seen.iter().all(|&b| b == b'n'),
                            "{seen:?}"
                        );
                    }
                })
            })
            .collect();
        if round % 2 == 0 {
            // SAFETY: valid handle and strings.
            let (rc, msg) =
                check(|e| unsafe { ziob_fs_rename(fs.0, from.as_ptr(), to.as_ptr(), e) });
            assert_eq!(rc, ZIOB_OK, "{msg}");
        } else {
            write_file(fs.0, &to, &body(b'n'));
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for r in readers {
            r.join().unwrap();
        }
        assert_eq!(
            read_range(fs.0, &to, 0, 4),
            b"nnnn",
            "round {round}: a page read while the file was replaced was kept"
        );
        // Room for the next rounds (the device holds 32 MiB).
        for p in [&to, &from] {
            // SAFETY: valid handle and string.
            let (rc, msg) = check(|e| unsafe { ziob_fs_delete(fs.0, p.as_ptr(), e) });
            assert!(rc == ZIOB_OK || rc == ZIOB_NOT_FOUND, "{rc}: {msg}");
        }
    }
}

#[test]
fn a_sync_after_gathered_appends_were_lost_fails() {
    let dev = Dev::new("lost");
    let fs = open(&dev.uri()).unwrap();
    // Fill the device with one file, in appends larger than the gathering buffer.
    let filler = c("/db/filler");
    let mut w: *mut ZiobWFile = ptr::null_mut();
    // SAFETY (this test): valid handle, strings, buffers and out pointers.
    let (rc, msg) = check(|e| unsafe { ziob_wfile_open(fs, filler.as_ptr(), 0, 0, &mut w, e) });
    assert_eq!(rc, ZIOB_OK, "{msg}");
    let chunk = vec![1u8; 1 << 20];
    let mut full = false;
    for _ in 0..64 {
        let (rc, _) = check(|e| unsafe { ziob_wfile_append(w, chunk.as_ptr(), chunk.len(), e) });
        if rc == ZIOB_NO_SPACE {
            full = true;
            break;
        }
        assert_eq!(rc, ZIOB_OK);
    }
    assert!(full, "a 32 MiB device took 64 MiB");
    // The writer whose hand-over failed cannot sync what never reached the file.
    let (rc, msg) = check(|e| unsafe { ziob_wfile_sync(w, e) });
    assert_ne!(
        rc, ZIOB_OK,
        "the filler's sync succeeded after its data was lost: {msg}"
    );
    assert!(msg.contains("were lost"), "the loss is recorded: {msg}");
    // A small append is gathered (accepted); another thread's read of the file hands it
    // over, which fails: the device is full.
    let wal = c("/db/000009.log");
    let mut l: *mut ZiobWFile = ptr::null_mut();
    let (rc, msg) = check(|e| unsafe { ziob_wfile_open(fs, wal.as_ptr(), 6, 0, &mut l, e) });
    assert_eq!(rc, ZIOB_OK, "{msg}");
    let record = [7u8; 3000];
    let (rc, msg) = check(|e| unsafe { ziob_wfile_append(l, record.as_ptr(), record.len(), e) });
    assert_eq!(rc, ZIOB_OK, "{msg}");
    let mut buf = [0u8; 16];
    let (rc, _) =
        check(|e| unsafe { ziob_fs_read_at(fs, wal.as_ptr(), 0, buf.as_mut_ptr(), 16, &mut 0, e) });
    assert_ne!(rc, ZIOB_OK, "the hand-over of the gathered record fails");
    // The writer's sync must not report the lost record durable.
    let (rc, msg) = check(|e| unsafe { ziob_wfile_sync(l, e) });
    assert_ne!(rc, ZIOB_OK, "sync succeeded after its data was lost: {msg}");
    unsafe { ziob_wfile_free(l) };
    unsafe { ziob_wfile_free(w) };
}

#[test]
fn a_writer_of_a_deleted_or_replaced_file_never_writes_into_its_successor() {
    let dev = Dev::new("stale-writer");
    let fs = open(&dev.uri()).unwrap();
    stale_writers_never_write_into_successors(fs, "/db/000005.log", 6, &[b"old-1"], b"old-2", "");
}

#[test]
fn a_writer_cut_off_while_its_hand_overs_run_never_writes_into_its_successor() {
    let dev = Dev::new("stale-behind");
    // Without the buffer and with 5 ms per device operation, the hand-overs take a while:
    // the writer's later ones are queued behind the first while the path changes hands.
    let uri = format!(
        "ziob://emu:{},lat_us=5000?zones=8&zone_size=4M&buffer=off",
        dev.0.display()
    );
    let fs = open(&uri).unwrap();
    // Appends of 1 MiB run behind the writer: several are still running when the path
    // changes hands right after.
    let big = vec![0xA5u8; 1 << 20];
    for round in 0..3 {
        stale_writers_never_write_into_successors(
            fs,
            "/db/000007.sst",
            3,
            &[&big, &big, &big, b"old-tail"],
            &big,
            &format!("round {round}"),
        );
    }
}

/// For each way a path changes hands while a writer is open on it (delete, rename over,
/// create again): the old writer appends `before`, the path changes hands, a new writer
/// writes and syncs "new", then the old one appends `after`, syncs and closes — and the
/// file holds exactly "new".
fn stale_writers_never_write_into_successors(
    fs: *const ZiobFs,
    path: &str,
    lifetime: i32,
    before: &[&[u8]],
    after: &[u8],
    label: &str,
) {
    let p = c(path);
    // SAFETY (this function): valid handle, strings, buffers and out pointers.
    let open_w = || {
        let mut w: *mut ZiobWFile = ptr::null_mut();
        let (rc, msg) =
            check(|e| unsafe { ziob_wfile_open(fs, p.as_ptr(), lifetime, 0, &mut w, e) });
        assert_eq!(rc, ZIOB_OK, "{msg}");
        w
    };
    let append = |w: *mut ZiobWFile, data: &[u8]| {
        check(|e| unsafe { ziob_wfile_append(w, data.as_ptr(), data.len(), e) }).0
    };
    for how in ["delete", "rename over", "create again"] {
        let old = open_w();
        for data in before {
            assert_eq!(append(old, data), ZIOB_OK);
        }
        match how {
            "delete" => {
                let (rc, msg) = check(|e| unsafe { ziob_fs_delete(fs, p.as_ptr(), e) });
                assert_eq!(rc, ZIOB_OK, "{msg}");
            }
            "rename over" => {
                let other = c("/db/other");
                write_file(fs, &other, b"");
                let (rc, msg) =
                    check(|e| unsafe { ziob_fs_rename(fs, other.as_ptr(), p.as_ptr(), e) });
                assert_eq!(rc, ZIOB_OK, "{msg}");
            }
            _ => {}
        }
        let new = open_w();
        assert_eq!(append(new, b"new"), ZIOB_OK);
        assert_eq!(check(|e| unsafe { ziob_wfile_sync(new, e) }).0, ZIOB_OK);
        // The stale writer goes on: none of its bytes may land in the new file.
        let _ = append(old, after);
        let _ = check(|e| unsafe { ziob_wfile_sync(old, e) });
        let _ = check(|e| unsafe { ziob_wfile_close(old, e) });
        unsafe { ziob_wfile_free(old) };
        assert_eq!(read_all(fs, path), b"new", "{label} {how}");
        assert_eq!(check(|e| unsafe { ziob_wfile_close(new, e) }).0, ZIOB_OK);
        unsafe { ziob_wfile_free(new) };
    }
}

#[test]
fn a_file_reopened_for_writing_cuts_its_old_writer_off() {
    let dev = Dev::new("reopen");
    let fs = open(&dev.uri()).unwrap();
    let p = c("/db/000013.log");
    // SAFETY (this test): valid handle, strings, buffers and out pointers.
    let open_w = |reopen: i32| {
        let mut w: *mut ZiobWFile = ptr::null_mut();
        let (rc, msg) = check(|e| unsafe { ziob_wfile_open(fs, p.as_ptr(), 6, reopen, &mut w, e) });
        assert_eq!(rc, ZIOB_OK, "{msg}");
        w
    };
    let append = |w: *mut ZiobWFile, data: &[u8]| {
        check(|e| unsafe { ziob_wfile_append(w, data.as_ptr(), data.len(), e) }).0
    };
    let first = open_w(0);
    assert_eq!(append(first, b"a"), ZIOB_OK);
    let second = open_w(1);
    assert_eq!(append(second, b"b"), ZIOB_OK);
    assert_ne!(append(first, b"X"), ZIOB_OK, "the first writer is cut off");
    assert_eq!(check(|e| unsafe { ziob_wfile_sync(second, e) }).0, ZIOB_OK);
    let _ = check(|e| unsafe { ziob_wfile_close(first, e) });
    unsafe { ziob_wfile_free(first) };
    assert_eq!(check(|e| unsafe { ziob_wfile_close(second, e) }).0, ZIOB_OK);
    unsafe { ziob_wfile_free(second) };
    assert_eq!(read_all(fs, "/db/000013.log"), b"ab");
}
