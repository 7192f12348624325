// ziob_fs.cc: a thin rocksdb::FileSystem over the C ABI of libziob_rocksdb.so (ziob_rocksdb.h),
// registered for "ziob://<device spec>[?options]" in ObjectLibrary::Default() from a static
// initializer, so LD_PRELOAD=libziob_rocksdb.so and --fs_uri=ziob://... is all an unmodified
// RocksDB application needs.
//
// Everything a DB stores goes to the zone file layer: SSTs, WALs, MANIFEST, CURRENT, OPTIONS,
// the LOCK file and the info LOG. Only GetAbsolutePath and GetTestDirectory (pure path
// arithmetic) are answered by FileSystem::Default(). What the zone file layer cannot do
// (random-write files, memory maps, hard links, truncate) returns NotSupported, never a
// silent fall-back to the local file system.

#include <rocksdb/env.h>
#include <rocksdb/file_system.h>
#include <rocksdb/io_status.h>
#include <rocksdb/utilities/object_registry.h>

#include <sys/time.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ziob_rocksdb.h"

namespace ziob_rocksdb {

using rocksdb::Env;
using rocksdb::FileLock;
using rocksdb::FileOptions;
using rocksdb::FileSystem;
using rocksdb::FSDirectory;
using rocksdb::FSRandomAccessFile;
using rocksdb::FSSequentialFile;
using rocksdb::FSWritableFile;
using rocksdb::IODebugContext;
using rocksdb::IOOptions;
using rocksdb::IOStatus;
using rocksdb::Logger;
using rocksdb::Slice;
using rocksdb::Status;

// The IOStatus of a C ABI result; takes (and frees) the message the call stored in *err. It
// takes the address, not the value: `ToStatus(ziob_x(..., &err), &err, ...)` reads `err` only
// after the call (C++ leaves the evaluation order of arguments unspecified).
static IOStatus ToStatus(int code, char** errp, const std::string& what) {
  char* err = *errp;
  *errp = nullptr;
  if (code == ZIOB_OK) {
    ziob_rocksdb_free_error(err);
    return IOStatus::OK();
  }
  std::string msg = err ? err : "unknown error";
  ziob_rocksdb_free_error(err);
  switch (code) {
    case ZIOB_NOT_FOUND:
      return IOStatus::PathNotFound(what, msg);
    case ZIOB_NO_SPACE:
      return IOStatus::NoSpace(what, msg);
    case ZIOB_CORRUPTION:
      return IOStatus::Corruption(what, msg);
    case ZIOB_INVALID_ARGUMENT:
      return IOStatus::InvalidArgument(what, msg);
    default:
      return IOStatus::IOError(what, msg);
  }
}

// WAL files (*.log) get a class of their own; other files take RocksDB's hint.
static int LifetimeFor(const std::string& fname, Env::WriteLifeTimeHint hint) {
  const std::string suffix = ".log";
  if (fname.size() >= suffix.size() &&
      fname.compare(fname.size() - suffix.size(), suffix.size(), suffix) == 0) {
    return ZIOB_LIFETIME_WAL;
  }
  return static_cast<int>(hint);
}

// Reads go through a read handle (ziob_rfile): no path lookup per call.
class ZiobSequentialFile : public FSSequentialFile {
 public:
  ZiobSequentialFile(ziob_rfile* f, std::string path) : f_(f), path_(std::move(path)) {}
  ~ZiobSequentialFile() override { ziob_rfile_free(f_); }

  IOStatus Read(size_t n, const IOOptions&, Slice* result, char* scratch,
                IODebugContext*) override {
    size_t got = 0;
    char* err = nullptr;
    int rc = ziob_rfile_read(f_, pos_, reinterpret_cast<uint8_t*>(scratch), n, &got, &err);
    if (rc != ZIOB_OK) return ToStatus(rc, &err, path_);
    pos_ += got;
    *result = Slice(scratch, got);
    return IOStatus::OK();
  }

  IOStatus PositionedRead(uint64_t offset, size_t n, const IOOptions&, Slice* result,
                          char* scratch, IODebugContext*) override {
    size_t got = 0;
    char* err = nullptr;
    int rc = ziob_rfile_read(f_, offset, reinterpret_cast<uint8_t*>(scratch), n, &got, &err);
    if (rc != ZIOB_OK) return ToStatus(rc, &err, path_);
    *result = Slice(scratch, got);
    return IOStatus::OK();
  }

  // Past the end of the file reads give 0 bytes (as after lseek on a local file).
  IOStatus Skip(uint64_t n) override {
    pos_ = n > UINT64_MAX - pos_ ? UINT64_MAX : pos_ + n;
    return IOStatus::OK();
  }

 private:
  ziob_rfile* f_;
  std::string path_;
  uint64_t pos_ = 0;
};

class ZiobRandomAccessFile : public FSRandomAccessFile {
 public:
  ZiobRandomAccessFile(ziob_rfile* f, std::string path) : f_(f), path_(std::move(path)) {}
  ~ZiobRandomAccessFile() override { ziob_rfile_free(f_); }

  IOStatus Read(uint64_t offset, size_t n, const IOOptions&, Slice* result, char* scratch,
                IODebugContext*) const override {
    size_t got = 0;
    char* err = nullptr;
    int rc = ziob_rfile_read(f_, offset, reinterpret_cast<uint8_t*>(scratch), n, &got, &err);
    if (rc != ZIOB_OK) return ToStatus(rc, &err, path_);
    *result = Slice(scratch, got);
    return IOStatus::OK();
  }

  // Asked by an iterator's automatic readahead and when a table is opened (its tail). The
  // range is in the plugin's read cache: RocksDB then reads it block by block (as from the
  // page cache after a readahead). Else NotSupported (no message: it comes again for the
  // next blocks of an uncached scan): RocksDB reads ahead into a buffer of its own.
  IOStatus Prefetch(uint64_t offset, size_t n, const IOOptions&, IODebugContext*) override {
    if (ziob_rfile_cached(f_, offset, n)) return IOStatus::OK();
    return IOStatus::NotSupported();
  }

 private:
  ziob_rfile* f_;
  std::string path_;
};

class ZiobWritableFile : public FSWritableFile {
 public:
  ZiobWritableFile(ziob_wfile* f, std::string path, bool is_wal, const FileOptions& opts)
      : FSWritableFile(opts), f_(f), path_(std::move(path)), is_wal_(is_wal) {}
  ~ZiobWritableFile() override {
    if (!closed_) {
      char* err = nullptr;
      ToStatus(ziob_wfile_close(f_, &err), &err, path_).PermitUncheckedError();
    }
    ziob_wfile_free(f_);
  }

  IOStatus Append(const Slice& data, const IOOptions&, IODebugContext*) override {
    char* err = nullptr;
    return ToStatus(ziob_wfile_append(f_, reinterpret_cast<const uint8_t*>(data.data()),
                                      data.size(), &err),
                    &err, path_);
  }
  IOStatus Append(const Slice& data, const IOOptions& opts,
                  const rocksdb::DataVerificationInfo&, IODebugContext* dbg) override {
    return Append(data, opts, dbg);
  }
  // Only appends at the end are possible on zones.
  IOStatus PositionedAppend(const Slice& data, uint64_t offset, const IOOptions& opts,
                            IODebugContext* dbg) override {
    if (offset != ziob_wfile_size(f_)) {
      return IOStatus::NotSupported(path_, "ziob: positioned append not at the end of the file");
    }
    return Append(data, opts, dbg);
  }
  IOStatus PositionedAppend(const Slice& data, uint64_t offset, const IOOptions& opts,
                            const rocksdb::DataVerificationInfo&, IODebugContext* dbg) override {
    return PositionedAppend(data, offset, opts, dbg);
  }
  IOStatus Truncate(uint64_t size, const IOOptions&, IODebugContext*) override {
    if (size == ziob_wfile_size(f_)) return IOStatus::OK();
    return IOStatus::NotSupported(path_, "ziob: files on zones cannot be truncated");
  }
  IOStatus Close(const IOOptions&, IODebugContext*) override {
    if (closed_) return IOStatus::OK();
    closed_ = true;
    char* err = nullptr;
    return ToStatus(ziob_wfile_close(f_, &err), &err, path_);
  }
  // Appends are in the zone layer (readable) when Append returns.
  IOStatus Flush(const IOOptions&, IODebugContext*) override { return IOStatus::OK(); }
  // Durable when it returns: the file's zones written back, then a zonefs journal commit
  // (one device cache flush for both).
  IOStatus Sync(const IOOptions&, IODebugContext*) override {
    char* err = nullptr;
    return ToStatus(ziob_wfile_sync(f_, &err), &err, path_);
  }
  IOStatus Fsync(const IOOptions& opts, IODebugContext* dbg) override { return Sync(opts, dbg); }
  IOStatus RangeSync(uint64_t, uint64_t, const IOOptions&, IODebugContext*) override {
    return IOStatus::OK();  // a hint; Sync makes it durable
  }
  bool IsSyncThreadSafe() const override { return true; }
  void SetWriteLifeTimeHint(Env::WriteLifeTimeHint hint) override {
    write_hint_ = hint;
    if (!is_wal_) ziob_wfile_set_lifetime(f_, static_cast<int>(hint));
  }
  uint64_t GetFileSize(const IOOptions&, IODebugContext*) override {
    return ziob_wfile_size(f_);
  }

 private:
  ziob_wfile* f_;
  std::string path_;
  bool is_wal_;
  bool closed_ = false;
};

class ZiobDirectory : public FSDirectory {
 public:
  ZiobDirectory(const ziob_fs* fs, std::string path) : fs_(fs), path_(std::move(path)) {}
  // Renames and deletes are durable when they return; a file's creation is durable with its
  // first Sync or this call, which creates the files opened under the directory but not
  // written yet and makes every creation so far durable.
  IOStatus Fsync(const IOOptions&, IODebugContext*) override {
    char* err = nullptr;
    return ToStatus(ziob_fs_fsync_dir(fs_, path_.c_str(), &err), &err, path_);
  }
  IOStatus Close(const IOOptions&, IODebugContext*) override { return IOStatus::OK(); }

 private:
  const ziob_fs* fs_;
  std::string path_;
};

class ZiobFileLock : public FileLock {
 public:
  explicit ZiobFileLock(std::string path) : path_(std::move(path)) {}
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The info LOG, written to the zone file layer like any file (synced on close and at exit).
class ZiobLogger : public Logger {
 public:
  ZiobLogger(ziob_wfile* f, std::string path) : f_(f), path_(std::move(path)) {}
  ~ZiobLogger() override {
    if (!closed_) CloseImpl().PermitUncheckedError();
    ziob_wfile_free(f_);
  }

  using Logger::Logv;
  void Logv(const char* format, va_list ap) override {
    char buf[4096];
    struct timeval now;
    gettimeofday(&now, nullptr);
    struct tm t;
    localtime_r(&now.tv_sec, &t);
    int n = snprintf(buf, sizeof(buf), "%04d/%02d/%02d-%02d:%02d:%02d.%06ld %zx ",
                     t.tm_year + 1900, t.tm_mon + 1, t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec,
                     static_cast<long>(now.tv_usec),
                     std::hash<std::thread::id>()(std::this_thread::get_id()));
    std::string line(buf, n > 0 ? static_cast<size_t>(n) : 0);
    va_list copy;
    va_copy(copy, ap);
    int m = vsnprintf(buf, sizeof(buf), format, copy);
    va_end(copy);
    if (m > 0) line.append(buf, std::min(static_cast<size_t>(m), sizeof(buf) - 1));
    if (line.empty() || line.back() != '\n') line.push_back('\n');
    std::lock_guard<std::mutex> g(mu_);
    if (closed_) return;
    ziob_wfile_append(f_, reinterpret_cast<const uint8_t*>(line.data()), line.size(), nullptr);
  }
  size_t GetLogFileSize() const override { return ziob_wfile_size(f_); }

 protected:
  Status CloseImpl() override {
    std::lock_guard<std::mutex> g(mu_);
    closed_ = true;
    char* err = nullptr;
    int rc = ziob_wfile_sync(f_, &err);
    return ToStatus(rc, &err, path_);
  }

 private:
  std::mutex mu_;
  ziob_wfile* f_;
  std::string path_;
};

struct ChildList {
  std::vector<std::string>* out;
};
extern "C" void ziob_rocksdb_push_child(void* ctx, const char* name) {
  static_cast<ChildList*>(ctx)->out->emplace_back(name);
}

class ZiobFileSystem : public FileSystem {
 public:
  ZiobFileSystem(const ziob_fs* fs, std::string uri) : fs_(fs), uri_(std::move(uri)) {}

  static const char* kClassName() { return "ZiobFileSystem"; }
  const char* Name() const override { return kClassName(); }
  bool IsInstanceOf(const std::string& id) const override {
    return id == kClassName() || id.rfind("ziob://", 0) == 0 || FileSystem::IsInstanceOf(id);
  }

  IOStatus NewSequentialFile(const std::string& fname, const FileOptions&,
                             std::unique_ptr<FSSequentialFile>* result,
                             IODebugContext*) override {
    IOStatus s = MustBeFile(fname);
    if (!s.ok()) return s;
    ziob_rfile* f = nullptr;
    char* err = nullptr;
    s = ToStatus(ziob_rfile_open(fs_, fname.c_str(), &f, &err), &err, fname);
    if (!s.ok()) return s;
    result->reset(new ZiobSequentialFile(f, fname));
    return IOStatus::OK();
  }

  IOStatus NewRandomAccessFile(const std::string& fname, const FileOptions&,
                               std::unique_ptr<FSRandomAccessFile>* result,
                               IODebugContext*) override {
    IOStatus s = MustBeFile(fname);
    if (!s.ok()) return s;
    ziob_rfile* f = nullptr;
    char* err = nullptr;
    s = ToStatus(ziob_rfile_open(fs_, fname.c_str(), &f, &err), &err, fname);
    if (!s.ok()) return s;
    result->reset(new ZiobRandomAccessFile(f, fname));
    return IOStatus::OK();
  }

  IOStatus NewWritableFile(const std::string& fname, const FileOptions& opts,
                           std::unique_ptr<FSWritableFile>* result,
                           IODebugContext*) override {
    return OpenWritable(fname, opts, 0, result);
  }

  IOStatus ReopenWritableFile(const std::string& fname, const FileOptions& opts,
                              std::unique_ptr<FSWritableFile>* result,
                              IODebugContext*) override {
    return OpenWritable(fname, opts, 1, result);
  }

  // Log recycling: the old file goes; the new one starts empty (zones cannot be overwritten).
  IOStatus ReuseWritableFile(const std::string& fname, const std::string& old_fname,
                             const FileOptions& opts, std::unique_ptr<FSWritableFile>* result,
                             IODebugContext* dbg) override {
    IOStatus s = DeleteFile(old_fname, IOOptions(), dbg);
    if (!s.ok() && !s.IsPathNotFound() && !s.IsNotFound()) return s;
    return OpenWritable(fname, opts, 0, result);
  }

  IOStatus NewDirectory(const std::string& name, const IOOptions&,
                        std::unique_ptr<FSDirectory>* result, IODebugContext*) override {
    int kind = 0;
    char* err = nullptr;
    int rc = ziob_fs_stat(fs_, name.c_str(), &kind, &err);
    if (rc != ZIOB_OK) return ToStatus(rc, &err, name);
    if (kind != 2) return IOStatus::PathNotFound(name, "ziob: no such directory");
    result->reset(new ZiobDirectory(fs_, name));
    return IOStatus::OK();
  }

  IOStatus FileExists(const std::string& fname, const IOOptions&, IODebugContext*) override {
    int kind = 0;
    char* err = nullptr;
    int rc = ziob_fs_stat(fs_, fname.c_str(), &kind, &err);
    if (rc != ZIOB_OK) return ToStatus(rc, &err, fname);
    return kind == 0 ? IOStatus::NotFound(fname) : IOStatus::OK();
  }

  IOStatus GetChildren(const std::string& dir, const IOOptions&, std::vector<std::string>* result,
                       IODebugContext*) override {
    result->clear();
    ChildList list{result};
    char* err = nullptr;
    return ToStatus(ziob_fs_children(fs_, dir.c_str(), ziob_rocksdb_push_child, &list, &err), &err,
                    dir);
  }

  IOStatus DeleteFile(const std::string& fname, const IOOptions&, IODebugContext*) override {
    char* err = nullptr;
    return ToStatus(ziob_fs_delete(fs_, fname.c_str(), &err), &err, fname);
  }

  IOStatus CreateDir(const std::string& dirname, const IOOptions& opts,
                     IODebugContext* dbg) override {
    if (FileExists(dirname, opts, dbg).ok()) {
      return IOStatus::IOError(dirname, "ziob: already exists");
    }
    return CreateDirIfMissing(dirname, opts, dbg);
  }

  IOStatus CreateDirIfMissing(const std::string& dirname, const IOOptions&,
                              IODebugContext*) override {
    int kind = 0;
    char* err = nullptr;
    int rc = ziob_fs_stat(fs_, dirname.c_str(), &kind, &err);
    if (rc != ZIOB_OK) return ToStatus(rc, &err, dirname);
    if (kind == 1) return IOStatus::IOError(dirname, "ziob: a file has this name");
    err = nullptr;
    return ToStatus(ziob_fs_create_dir(fs_, dirname.c_str(), &err), &err, dirname);
  }

  IOStatus DeleteDir(const std::string& dirname, const IOOptions&, IODebugContext*) override {
    char* err = nullptr;
    return ToStatus(ziob_fs_delete_dir(fs_, dirname.c_str(), &err), &err, dirname);
  }

  IOStatus GetFileSize(const std::string& fname, const IOOptions&, uint64_t* size,
                       IODebugContext*) override {
    char* err = nullptr;
    return ToStatus(ziob_fs_size(fs_, fname.c_str(), size, &err), &err, fname);
  }

  IOStatus GetFileModificationTime(const std::string& fname, const IOOptions&,
                                   uint64_t* file_mtime, IODebugContext*) override {
    char* err = nullptr;
    return ToStatus(ziob_fs_mtime(fs_, fname.c_str(), file_mtime, &err), &err, fname);
  }

  IOStatus RenameFile(const std::string& src, const std::string& target, const IOOptions&,
                      IODebugContext*) override {
    char* err = nullptr;
    return ToStatus(ziob_fs_rename(fs_, src.c_str(), target.c_str(), &err), &err, src);
  }

  IOStatus LockFile(const std::string& fname, const IOOptions&, FileLock** lock,
                    IODebugContext*) override {
    *lock = nullptr;
    char* err = nullptr;
    int rc = ziob_fs_lock(fs_, fname.c_str(), &err);
    if (rc != ZIOB_OK) return ToStatus(rc, &err, fname);
    *lock = new ZiobFileLock(fname);
    return IOStatus::OK();
  }

  IOStatus UnlockFile(FileLock* lock, const IOOptions&, IODebugContext*) override {
    auto* l = static_cast<ZiobFileLock*>(lock);
    char* err = nullptr;
    IOStatus s = ToStatus(ziob_fs_unlock(fs_, l->path().c_str(), &err), &err, l->path());
    delete l;
    return s;
  }

  IOStatus NewLogger(const std::string& fname, const IOOptions&, std::shared_ptr<Logger>* result,
                     IODebugContext*) override {
    ziob_wfile* f = nullptr;
    char* err = nullptr;
    int rc = ziob_wfile_open(fs_, fname.c_str(), static_cast<int>(Env::WLTH_SHORT), 0, &f, &err);
    if (rc != ZIOB_OK) return ToStatus(rc, &err, fname);
    result->reset(new ZiobLogger(f, fname));
    return IOStatus::OK();
  }

  IOStatus GetFreeSpace(const std::string& path, const IOOptions&, uint64_t* diskfree,
                        IODebugContext*) override {
    char* err = nullptr;
    return ToStatus(ziob_fs_free_space(fs_, path.c_str(), diskfree, &err), &err, path);
  }

  IOStatus IsDirectory(const std::string& path, const IOOptions&, bool* is_dir,
                       IODebugContext*) override {
    int kind = 0;
    char* err = nullptr;
    int rc = ziob_fs_stat(fs_, path.c_str(), &kind, &err);
    if (rc != ZIOB_OK) return ToStatus(rc, &err, path);
    if (kind == 0) return IOStatus::NotFound(path);
    if (is_dir) *is_dir = kind == 2;
    return IOStatus::OK();
  }

  // Path arithmetic only: the default file system's answer.
  IOStatus GetAbsolutePath(const std::string& db_path, const IOOptions& opts,
                           std::string* output_path, IODebugContext* dbg) override {
    return FileSystem::Default()->GetAbsolutePath(db_path, opts, output_path, dbg);
  }
  IOStatus GetTestDirectory(const IOOptions& opts, std::string* path,
                            IODebugContext* dbg) override {
    return FileSystem::Default()->GetTestDirectory(opts, path, dbg);
  }

  IOStatus NewRandomRWFile(const std::string& fname, const FileOptions&,
                           std::unique_ptr<rocksdb::FSRandomRWFile>*, IODebugContext*) override {
    return IOStatus::NotSupported(fname, "ziob: random-write files are not possible on zones");
  }
  IOStatus NewMemoryMappedFileBuffer(const std::string& fname,
                                     std::unique_ptr<rocksdb::MemoryMappedFileBuffer>*) override {
    return IOStatus::NotSupported(fname, "ziob: no memory maps");
  }
  IOStatus Truncate(const std::string& fname, size_t, const IOOptions&,
                    IODebugContext*) override {
    return IOStatus::NotSupported(fname, "ziob: files on zones cannot be truncated");
  }
  IOStatus LinkFile(const std::string& src, const std::string&, const IOOptions&,
                    IODebugContext*) override {
    return IOStatus::NotSupported(src, "ziob: no hard links");
  }

 private:
  IOStatus MustBeFile(const std::string& fname) {
    int kind = 0;
    char* err = nullptr;
    int rc = ziob_fs_stat(fs_, fname.c_str(), &kind, &err);
    if (rc != ZIOB_OK) return ToStatus(rc, &err, fname);
    if (kind != 1) return IOStatus::PathNotFound(fname, "ziob: no such file");
    return IOStatus::OK();
  }

  IOStatus OpenWritable(const std::string& fname, const FileOptions& opts, int reopen,
                        std::unique_ptr<FSWritableFile>* result) {
    int lifetime = LifetimeFor(fname, Env::WLTH_NOT_SET);
    ziob_wfile* f = nullptr;
    char* err = nullptr;
    int rc = ziob_wfile_open(fs_, fname.c_str(), lifetime, reopen, &f, &err);
    if (rc != ZIOB_OK) return ToStatus(rc, &err, fname);
    result->reset(new ZiobWritableFile(f, fname, lifetime == ZIOB_LIFETIME_WAL, opts));
    return IOStatus::OK();
  }

  const ziob_fs* fs_;
  std::string uri_;
};

// The factory for "ziob://...": every FileSystem object of a device shares its mount.
static FileSystem* MakeZiobFileSystem(const std::string& uri, std::unique_ptr<FileSystem>* guard,
                                      std::string* errmsg) {
  const ziob_fs* fs = nullptr;
  char* err = nullptr;
  int rc = ziob_fs_open(uri.c_str(), &fs, &err);
  if (rc != ZIOB_OK) {
    std::string msg = err ? err : "unknown error";
    ziob_rocksdb_free_error(err);
    if (errmsg) *errmsg = msg;
    // db_bench 7.8.3 dereferences a null file system; say why before it does.
    fprintf(stderr, "ziob-rocksdb: cannot open %s: %s\n", uri.c_str(), msg.c_str());
    return nullptr;
  }
  guard->reset(new ZiobFileSystem(fs, uri));
  return guard->get();
}

// Syncs every open device at a normal process exit (data written without Sync then outlives
// the process, as it would in the page cache).
struct SyncAtExit {
  ~SyncAtExit() { ziob_fs_sync_all_mounted(); }
};
static SyncAtExit sync_at_exit;

}  // namespace ziob_rocksdb

// The registration, run when the library is loaded. The linker keeps this object file in the
// cdylib only because build.rs links the shim's archive with +whole-archive.
static rocksdb::FactoryFunc<rocksdb::FileSystem> ziob_filesystem_reg =
    rocksdb::ObjectLibrary::Default()->AddFactory<rocksdb::FileSystem>(
        rocksdb::ObjectLibrary::PatternEntry("ziob", false).AddSeparator("://"),
        ziob_rocksdb::MakeZiobFileSystem);
