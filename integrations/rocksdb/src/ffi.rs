//! The C ABI (`include/ziob_rocksdb.h`) the C++ `FileSystem` shim calls.
//!
//! Every call returns a status code (`ZIOB_OK` or an error code of [`crate::error`]); on an
//! error it stores a message the caller frees with [`ziob_rocksdb_free_error`] in `*err` (when
//! `err` is not null). No panic crosses the ABI: each body runs under `catch_unwind` and a
//! panic becomes `ZIOB_IO_ERROR`. Paths are NUL-terminated UTF-8; `/a/b`, `a/b` and `a//b/`
//! name the same file.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::mem::MaybeUninit;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use ziob_zonefs::WriteLifetime;

use crate::error::{PluginError, ZIOB_OK};
use crate::reader::ReadHandle;
use crate::shared::{clean, SharedFs, WriteBuf};

/// An open device (opaque to C): a `&'static SharedFs`, valid for the whole process.
pub type ZiobFs = SharedFs;

/// A file open for writing (opaque to C); freed with [`ziob_wfile_free`].
pub struct ZiobWFile {
    fs: &'static SharedFs,
    path: String,
    size: AtomicU64,
    buf: Arc<WriteBuf>,
}

/// The lifetime class of a C lifetime code: RocksDB's `Env::WriteLifeTimeHint` values 0..=5
/// (`WLTH_NOT_SET` .. `WLTH_EXTREME`), 6 for a write-ahead log; anything else is `NotSet`.
pub fn lifetime_of(code: c_int) -> WriteLifetime {
    u8::try_from(code)
        .ok()
        .and_then(WriteLifetime::from_code)
        .unwrap_or(WriteLifetime::NotSet)
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}

/// Runs `f` with panics caught, and turns its result into a status code and message.
fn call(err: *mut *mut c_char, f: impl FnOnce() -> Result<(), PluginError>) -> c_int {
    let result = catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|p| {
        Err(PluginError::Io(format!(
            "ziob-rocksdb: internal error (panic): {}",
            panic_message(p.as_ref())
        )))
    });
    match result {
        Ok(()) => ZIOB_OK,
        Err(e) => {
            if !err.is_null() {
                let msg = CString::new(e.to_string().replace('\0', " "))
                    .unwrap_or_else(|_| CString::from(c"ziob-rocksdb: error"));
                // SAFETY: `err` is non-null and, by the header's contract, points to a
                // writable `char*` of the caller.
                unsafe { *err = msg.into_raw() };
            }
            e.code()
        }
    }
}

/// The `&str` of a C string argument, cleaned as a zonefs path when `path`.
///
/// # Safety
/// `p` is null or a NUL-terminated string valid for the call.
unsafe fn arg(p: *const c_char, what: &str) -> Result<String, PluginError> {
    if p.is_null() {
        return Err(PluginError::InvalidArgument(format!("{what} is null")));
    }
    // SAFETY: non-null and NUL-terminated by the caller's contract.
    let s = unsafe { CStr::from_ptr(p) };
    s.to_str()
        .map(str::to_string)
        .map_err(|_| PluginError::InvalidArgument(format!("{what} is not UTF-8")))
}

/// # Safety
/// As [`arg`].
unsafe fn path_arg(p: *const c_char) -> Result<String, PluginError> {
    // SAFETY: forwarded contract.
    Ok(clean(&unsafe { arg(p, "path") }?))
}

/// RocksDB's buffer `buf` of `len` bytes as memory to read into (`len == 0`: an empty
/// slice, whatever `buf` is); a null `buf` is an error.
///
/// # Safety
/// `buf` is null or writable for `len` bytes and not read or written by anyone else while
/// the slice lives; it need not be initialised.
unsafe fn out_buf<'a>(buf: *mut u8, len: usize) -> Result<&'a mut [MaybeUninit<u8>], PluginError> {
    if len == 0 {
        return Ok(&mut []);
    }
    if buf.is_null() {
        return Err(PluginError::InvalidArgument("buf is null".into()));
    }
    // SAFETY: non-null (checked above), writable for `len` bytes and ours alone by the
    // caller's contract; as `MaybeUninit<u8>` the slice claims nothing of its contents.
    Ok(unsafe { std::slice::from_raw_parts_mut(buf.cast::<MaybeUninit<u8>>(), len) })
}

/// Stores `n` in `*got`; a null `got` is an error.
///
/// # Safety
/// `got` is null or writable.
unsafe fn set_got(got: *mut usize, n: usize) -> Result<(), PluginError> {
    // SAFETY: caller's contract.
    unsafe { got.as_mut() }
        .map(|g| *g = n)
        .ok_or_else(|| PluginError::InvalidArgument("got is null".into()))
}

/// The shared fs behind a handle.
///
/// # Safety
/// `fs` is null or a pointer [`ziob_fs_open`] returned (they are never freed).
unsafe fn fs_ref(fs: *const ZiobFs) -> Result<&'static SharedFs, PluginError> {
    // SAFETY: handles come from `Box::leak` in `SharedFs::get` and live for the process.
    unsafe { fs.as_ref() }.ok_or_else(|| PluginError::InvalidArgument("fs handle is null".into()))
}

/// Frees an error message a call stored in `*err`.
///
/// # Safety
/// `msg` is null or a message from this library, freed once.
#[no_mangle]
pub unsafe extern "C" fn ziob_rocksdb_free_error(msg: *mut c_char) {
    if !msg.is_null() {
        // SAFETY: made by `CString::into_raw` in `call`, freed once by the contract.
        drop(unsafe { CString::from_raw(msg) });
    }
}

/// Opens (on first use: creates, formats, mounts) the device of `uri` (`ziob://spec?opts` or
/// `spec?opts`) and stores its process-wide handle in `*out`.
///
/// # Safety
/// `uri` is a NUL-terminated string; `out` points to writable storage; `err` as in the header.
#[no_mangle]
pub unsafe extern "C" fn ziob_fs_open(
    uri: *const c_char,
    out: *mut *const ZiobFs,
    err: *mut *mut c_char,
) -> c_int {
    call(err, || {
        // The plugin's events (mount, prefault, warm-up, failed write-backs) go to stderr,
        // filtered by `RUST_LOG` (warnings by default), unless the process set a subscriber.
        ziob::logging::init();
        // SAFETY: caller's contract.
        let uri = unsafe { arg(uri, "uri") }?;
        let fs = SharedFs::get(&uri)?;
        if out.is_null() {
            return Err(PluginError::InvalidArgument("out is null".into()));
        }
        // SAFETY: non-null, writable by the caller's contract.
        unsafe { *out = fs as *const SharedFs };
        Ok(())
    })
}

/// Syncs every file of every device this process opened (run at process exit).
#[no_mangle]
pub extern "C" fn ziob_fs_sync_all_mounted() {
    let _ = catch_unwind(SharedFs::sync_all_mounted);
}

/// Sets `*out` to 1 if a file is at `path`, 2 if a directory is, else 0.
///
/// # Safety
/// `fs` from [`ziob_fs_open`]; `path` NUL-terminated; `out` writable; `err` as in the header.
#[no_mangle]
pub unsafe extern "C" fn ziob_fs_stat(
    fs: *const ZiobFs,
    path: *const c_char,
    out: *mut c_int,
    err: *mut *mut c_char,
) -> c_int {
    call(err, || {
        // SAFETY: caller's contract (this and the dereferences below).
        let (fs, path) = unsafe { (fs_ref(fs)?, path_arg(path)?) };
        let kind = if !path.is_empty() && fs.file_exists(&path)? {
            1
        } else if fs.dir_exists(&path)? {
            2
        } else {
            0
        };
        // SAFETY: as above.
        unsafe { out.as_mut() }
            .map(|o| *o = kind)
            .ok_or_else(|| PluginError::InvalidArgument("out is null".into()))
    })
}

/// Calls `cb(ctx, name)` for each name directly under `dir` (files and directories).
///
/// # Safety
/// `fs` from [`ziob_fs_open`]; `dir` NUL-terminated; `cb` null or callable with `ctx`; `err`
/// as in the header.
#[no_mangle]
pub unsafe extern "C" fn ziob_fs_children(
    fs: *const ZiobFs,
    dir: *const c_char,
    cb: Option<extern "C" fn(*mut c_void, *const c_char)>,
    ctx: *mut c_void,
    err: *mut *mut c_char,
) -> c_int {
    call(err, || {
        // SAFETY: caller's contract.
        let (fs, dir) = unsafe { (fs_ref(fs)?, path_arg(dir)?) };
        // A null function pointer is `None` (never a dangling `fn`).
        let cb = cb.ok_or_else(|| PluginError::InvalidArgument("callback is null".into()))?;
        if !fs.dir_exists(&dir)? {
            return Err(PluginError::NotFound(format!("no such directory: /{dir}")));
        }
        for name in fs.children(&dir)? {
            if let Ok(c) = CString::new(name) {
                cb(ctx, c.as_ptr());
            }
        }
        Ok(())
    })
}

macro_rules! path_op {
    ($(#[$doc:meta])* $name:ident, |$fs:ident, $p:ident| $body:expr) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// `fs` from [`ziob_fs_open`]; `path` NUL-terminated; `err` as in the header.
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            fs: *const ZiobFs,
            path: *const c_char,
            err: *mut *mut c_char,
        ) -> c_int {
            call(err, || {
                // SAFETY: caller's contract.
                let ($fs, $p) = unsafe { (fs_ref(fs)?, path_arg(path)?) };
                $body
            })
        }
    };
}

path_op!(
    /// Records a directory (it exists while empty, in this process).
    ziob_fs_create_dir,
    |fs, p| {
        fs.create_dir(&p);
        Ok(())
    }
);
path_op!(
    /// Removes an empty directory.
    ziob_fs_delete_dir,
    |fs, p| fs.delete_dir(&p)
);
path_op!(
    /// Deletes a file (durable when it returns).
    ziob_fs_delete,
    |fs, p| fs.delete(&p)
);
path_op!(
    /// Takes the in-process lock on `path`, creating the file if absent.
    ziob_fs_lock,
    |fs, p| fs.lock_file(&p)
);
path_op!(
    /// Releases a lock taken with [`ziob_fs_lock`].
    ziob_fs_unlock,
    |fs, p| fs.unlock_file(&p)
);
path_op!(
    /// A directory fsync: creates the files under `path` that were opened but not written
    /// and makes every file creation, deletion and rename so far durable.
    ziob_fs_fsync_dir,
    |fs, p| fs.fsync_dir(&p)
);

macro_rules! u64_op {
    ($(#[$doc:meta])* $name:ident, |$fs:ident, $p:ident| $body:expr) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// `fs` from [`ziob_fs_open`]; `path` NUL-terminated; `out` writable; `err` as in the
        /// header.
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            fs: *const ZiobFs,
            path: *const c_char,
            out: *mut u64,
            err: *mut *mut c_char,
        ) -> c_int {
            call(err, || {
                // SAFETY: caller's contract.
                let ($fs, $p) = unsafe { (fs_ref(fs)?, path_arg(path)?) };
                let v: u64 = $body?;
                // SAFETY: caller's contract.
                unsafe { out.as_mut() }
                    .map(|o| *o = v)
                    .ok_or_else(|| PluginError::InvalidArgument("out is null".into()))
            })
        }
    };
}

u64_op!(
    /// The size of a file in bytes.
    ziob_fs_size,
    |fs, p| fs.size(&p)
);
u64_op!(
    /// A file's modification time in seconds since the epoch (see `docs/ROCKSDB.md`).
    ziob_fs_mtime,
    |fs, p| fs.mtime(&p)
);
u64_op!(
    /// Bytes still writable on the device (`path` is ignored).
    ziob_fs_free_space,
    |fs, _p| fs.free_bytes()
);

/// Renames a file, atomically replacing `to` (durable when it returns).
///
/// # Safety
/// `fs` from [`ziob_fs_open`]; `from`, `to` NUL-terminated; `err` as in the header.
#[no_mangle]
pub unsafe extern "C" fn ziob_fs_rename(
    fs: *const ZiobFs,
    from: *const c_char,
    to: *const c_char,
    err: *mut *mut c_char,
) -> c_int {
    call(err, || {
        // SAFETY: caller's contract.
        let (fs, from, to) = unsafe { (fs_ref(fs)?, path_arg(from)?, path_arg(to)?) };
        fs.rename(&from, &to)
    })
}

/// Reads up to `len` bytes at `offset` of a file into `buf`; `*got` = bytes read (fewer at
/// the end of the file, 0 past it).
///
/// # Safety
/// `fs` from [`ziob_fs_open`]; `path` NUL-terminated; `buf` writable for `len` bytes; `got`
/// writable; `err` as in the header.
#[no_mangle]
pub unsafe extern "C" fn ziob_fs_read_at(
    fs: *const ZiobFs,
    path: *const c_char,
    offset: u64,
    buf: *mut u8,
    len: usize,
    got: *mut usize,
    err: *mut *mut c_char,
) -> c_int {
    call(err, || {
        // SAFETY: caller's contract.
        let (fs, path) = unsafe { (fs_ref(fs)?, path_arg(path)?) };
        // SAFETY: caller's contract.
        let out = unsafe { out_buf(buf, len) }?;
        let data = fs.read_at(&path, offset, len)?;
        let n = data.len().min(len);
        out[..n].write_copy_of_slice(&data[..n]);
        // SAFETY: caller's contract.
        unsafe { set_got(got, n) }
    })
}

/// A file open for reading (opaque to C); freed with [`ziob_rfile_free`].
pub struct ZiobRFile {
    fs: &'static SharedFs,
    file: ReadHandle,
}

/// Opens `path` for reading (it must exist); the handle goes to `*out`.
///
/// # Safety
/// `fs` from [`ziob_fs_open`]; `path` NUL-terminated; `out` writable; `err` as in the header.
#[no_mangle]
pub unsafe extern "C" fn ziob_rfile_open(
    fs: *const ZiobFs,
    path: *const c_char,
    out: *mut *mut ZiobRFile,
    err: *mut *mut c_char,
) -> c_int {
    call(err, || {
        // SAFETY: caller's contract.
        let (fs, path) = unsafe { (fs_ref(fs)?, path_arg(path)?) };
        let file = Box::new(ZiobRFile {
            fs,
            file: fs.open_read(&path)?,
        });
        // SAFETY: caller's contract.
        match unsafe { out.as_mut() } {
            Some(o) => {
                *o = Box::into_raw(file);
                Ok(())
            }
            None => Err(PluginError::InvalidArgument("out is null".into())),
        }
    })
}

/// Reads up to `len` bytes at `offset` of a file open for reading into `buf`; `*got` says
/// how many (fewer only at the end of the file).
///
/// # Safety
/// `f` a live handle from [`ziob_rfile_open`]; `buf` writable for `len` bytes (it need not be
/// initialised) and not read or written by anyone else during the call; `got` writable; `err`
/// as in the header.
#[no_mangle]
pub unsafe extern "C" fn ziob_rfile_read(
    f: *const ZiobRFile,
    offset: u64,
    buf: *mut u8,
    len: usize,
    got: *mut usize,
    err: *mut *mut c_char,
) -> c_int {
    call(err, || {
        // SAFETY: caller's contract.
        let f = unsafe { f.as_ref() }
            .ok_or_else(|| PluginError::InvalidArgument("file handle is null".into()))?;
        // SAFETY: caller's contract.
        let out = unsafe { out_buf(buf, len) }?;
        let n = f.fs.read_into(&f.file, offset, out)?;
        // SAFETY: caller's contract.
        unsafe { set_got(got, n) }
    })
}

/// 1 if every byte of `[offset, offset + len)` that the file holds on the device is in the
/// plugin's read cache (reading it costs no round trip), else 0 (also without a read cache,
/// when nothing is kept at `offset`, and for a null handle). For
/// `FSRandomAccessFile::Prefetch`.
///
/// # Safety
/// `f` null or a live handle from [`ziob_rfile_open`].
#[no_mangle]
pub unsafe extern "C" fn ziob_rfile_cached(f: *const ZiobRFile, offset: u64, len: usize) -> c_int {
    catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: by this function's contract `f` is null or a live handle from
        // `ziob_rfile_open` that no one frees during the call, so `as_ref` gives `None` or a
        // reference valid (and only read) for this call.
        unsafe { f.as_ref() }.is_some_and(|f| f.fs.is_range_cached(f.file.path(), offset, len))
    }))
    .map_or(0, c_int::from)
}

/// Frees a handle from [`ziob_rfile_open`] (null: nothing).
///
/// # Safety
/// `f` null or a live handle, not used after this call.
#[no_mangle]
pub unsafe extern "C" fn ziob_rfile_free(f: *mut ZiobRFile) {
    if f.is_null() {
        return;
    }
    // SAFETY: made by `Box::into_raw` in `ziob_rfile_open`, freed once by the contract.
    drop(unsafe { Box::from_raw(f) });
}

/// Opens `path` for writing: `reopen` = 0 starts an empty file (replacing one there), 1
/// appends to the existing file (or starts one). A writer still open on `path` is cut off
/// (its later appends, syncs and closes fail). `lifetime`: RocksDB's write-lifetime hint
/// (0..=5) or 6 for a write-ahead log. The handle goes to `*out`.
///
/// # Safety
/// `fs` from [`ziob_fs_open`]; `path` NUL-terminated; `out` writable; `err` as in the header.
#[no_mangle]
pub unsafe extern "C" fn ziob_wfile_open(
    fs: *const ZiobFs,
    path: *const c_char,
    lifetime: c_int,
    reopen: c_int,
    out: *mut *mut ZiobWFile,
    err: *mut *mut c_char,
) -> c_int {
    call(err, || {
        // SAFETY: caller's contract.
        let (fs, path) = unsafe { (fs_ref(fs)?, path_arg(path)?) };
        if path.is_empty() {
            return Err(PluginError::InvalidArgument("empty file path".into()));
        }
        let class = lifetime_of(lifetime);
        let size = if reopen != 0 && fs.file_exists(&path)? {
            fs.size(&path)?
        } else {
            fs.create_lazy(&path, class)?;
            0
        };
        let buf = fs.writer(&path);
        let file = Box::new(ZiobWFile {
            fs,
            path,
            size: AtomicU64::new(size),
            buf,
        });
        // SAFETY: caller's contract.
        match unsafe { out.as_mut() } {
            Some(o) => {
                *o = Box::into_raw(file);
                Ok(())
            }
            None => Err(PluginError::InvalidArgument("out is null".into())),
        }
    })
}

/// The file of a write handle.
///
/// # Safety
/// `f` is null or a live handle from [`ziob_wfile_open`].
unsafe fn wfile<'a>(f: *const ZiobWFile) -> Result<&'a ZiobWFile, PluginError> {
    // SAFETY: caller's contract.
    unsafe { f.as_ref() }.ok_or_else(|| PluginError::InvalidArgument("file handle is null".into()))
}

/// Sets the lifetime class of a file not written yet (no effect once data is on the device).
///
/// # Safety
/// `f` a live handle from [`ziob_wfile_open`].
#[no_mangle]
pub unsafe extern "C" fn ziob_wfile_set_lifetime(f: *const ZiobWFile, lifetime: c_int) {
    let _ = call(std::ptr::null_mut(), || {
        // SAFETY: caller's contract.
        let f = unsafe { wfile(f) }?;
        f.fs.set_pending_lifetime(&f.path, lifetime_of(lifetime));
        Ok(())
    });
}

/// Appends `len` bytes (readable at once; durable after the next sync).
///
/// # Safety
/// `f` a live handle; `data` readable for `len` bytes; `err` as in the header.
#[no_mangle]
pub unsafe extern "C" fn ziob_wfile_append(
    f: *const ZiobWFile,
    data: *const u8,
    len: usize,
    err: *mut *mut c_char,
) -> c_int {
    call(err, || {
        // SAFETY: caller's contract.
        let f = unsafe { wfile(f) }?;
        if len == 0 {
            return Ok(());
        }
        if data.is_null() {
            return Err(PluginError::InvalidArgument("data is null".into()));
        }
        // SAFETY: `data` is readable for `len` bytes for the call by the caller's contract.
        let bytes = unsafe { std::slice::from_raw_parts(data, len) };
        f.fs.buffered_append(&f.path, &f.buf, bytes)?;
        f.size.fetch_add(len as u64, Ordering::Relaxed);
        Ok(())
    })
}

/// Makes the file durable up to its size (zonefs sync: its zones written back, then a journal
/// commit whose one device cache flush covers both);
/// durable when it returns `ZIOB_OK`. Also creates a file not written yet.
///
/// # Safety
/// `f` a live handle; `err` as in the header.
#[no_mangle]
pub unsafe extern "C" fn ziob_wfile_sync(f: *const ZiobWFile, err: *mut *mut c_char) -> c_int {
    call(err, || {
        // SAFETY: caller's contract.
        let f = unsafe { wfile(f) }?;
        f.fs.push_buf(&f.path, &f.buf)?;
        f.fs.sync(&f.path)
    })
}

/// Closes the file for writing: a file not written yet is created on the device (empty).
/// Unsynced data stays unsynced (a normal process exit syncs it; a crash loses it).
///
/// # Safety
/// `f` a live handle; `err` as in the header.
#[no_mangle]
pub unsafe extern "C" fn ziob_wfile_close(f: *const ZiobWFile, err: *mut *mut c_char) -> c_int {
    call(err, || {
        // SAFETY: caller's contract.
        let f = unsafe { wfile(f) }?;
        f.fs.push_buf(&f.path, &f.buf)?;
        f.fs.materialize(&f.path)
    })
}

/// The file's size: bytes it had when opened plus bytes appended through this handle.
///
/// # Safety
/// `f` a live handle.
#[no_mangle]
pub unsafe extern "C" fn ziob_wfile_size(f: *const ZiobWFile) -> u64 {
    // SAFETY: caller's contract.
    unsafe { f.as_ref() }.map_or(0, |f| f.size.load(Ordering::Relaxed))
}

/// Frees a write handle: hands over its gathered appends (an error is printed: there is no
/// caller to tell; call [`ziob_wfile_close`] first to get it; a handle whose file was only
/// deleted, renamed or created again meanwhile prints nothing). A file not written yet
/// stays visible as an empty file.
///
/// # Safety
/// `f` is null or a live handle from [`ziob_wfile_open`], freed once.
#[no_mangle]
pub unsafe extern "C" fn ziob_wfile_free(f: *mut ZiobWFile) {
    if f.is_null() {
        return;
    }
    // SAFETY: made by `Box::into_raw` in `ziob_wfile_open`, freed once by the contract.
    let f = unsafe { Box::from_raw(f) };
    let _ = catch_unwind(AssertUnwindSafe(|| {
        if let Err(e) = f.fs.release_writer(&f.path, &f.buf) {
            eprintln!("ziob-rocksdb: writing /{} on release failed: {e}", f.path);
        }
    }));
}
