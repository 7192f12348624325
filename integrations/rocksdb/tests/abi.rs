//! The C ABI in-process (no RocksDB needed): files written through write handles, lazy
//! creation with the lifetime hint set after open, directories, locks, error codes, and a
//! device holding other data refused without being touched.

use std::ffi::{c_char, c_void, CStr, CString};
use std::path::{Path, PathBuf};
use std::ptr;

use ziob::{Client, Runtime, ZiobConfig};
use ziob_rocksdb::error::{ZIOB_CORRUPTION, ZIOB_INVALID_ARGUMENT, ZIOB_NOT_FOUND, ZIOB_OK};
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
        format!("ziob://emu:{}?zones=8&zone_size=4M", self.0.display())
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
        ziob_fs_children(fs, d.as_ptr(), collect, &mut v as *mut _ as *mut c_void, e)
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

fn read_all(fs: *const ZiobFs, path: &str) -> Vec<u8> {
    let p = c(path);
    let mut buf = vec![0u8; 1 << 16];
    let mut got = 0usize;
    // SAFETY: valid handle and string; `buf` writable for its length.
    let (rc, msg) = check(|e| unsafe {
        ziob_fs_read_at(fs, p.as_ptr(), 0, buf.as_mut_ptr(), buf.len(), &mut got, e)
    });
    assert_eq!(rc, ZIOB_OK, "{msg}");
    buf.truncate(got);
    buf
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
