/* ziob_rocksdb.h: the C ABI of libziob_rocksdb.so (Rust, integrations/rocksdb/src/ffi.rs)
 * over the ZIOB zone file layer, used by the C++ rocksdb::FileSystem shim.
 *
 * Every int-returning call returns ZIOB_OK or an error code; on error, when `err` is not
 * NULL, *err receives a message to free with ziob_rocksdb_free_error. No call unwinds (a Rust
 * panic becomes ZIOB_IO_ERROR). All calls are thread-safe and blocking; they must not be made
 * from a ZIOB runtime thread. Paths are NUL-terminated UTF-8; "/a/b", "a/b" and "a//b/" name
 * the same file; "" or "/" is the root directory.
 */
#ifndef ZIOB_ROCKSDB_H
#define ZIOB_ROCKSDB_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ZIOB_OK 0
#define ZIOB_NOT_FOUND 1        /* IOStatus::NotFound */
#define ZIOB_NO_SPACE 2         /* IOStatus::NoSpace */
#define ZIOB_IO_ERROR 3         /* IOStatus::IOError */
#define ZIOB_CORRUPTION 4       /* IOStatus::Corruption (foreign or damaged device) */
#define ZIOB_INVALID_ARGUMENT 5 /* IOStatus::InvalidArgument */

/* Lifetime codes: RocksDB's Env::WriteLifeTimeHint (0..5), plus the WAL class. */
#define ZIOB_LIFETIME_WAL 6

typedef struct SharedFs ziob_fs;     /* one per device per process, never freed */
typedef struct ZiobWFile ziob_wfile; /* a file open for writing */
typedef struct ZiobRFile ziob_rfile; /* a file open for reading */

void ziob_rocksdb_free_error(char* msg);

/* Opens the device of `uri` ("ziob://<spec>[?opts]" or "<spec>[?opts]"): on first use in the
 * process an absent emu: file is created, a blank device formatted, a zone file system
 * mounted; a device holding anything else gives ZIOB_CORRUPTION. Later calls with the same
 * device return the same handle. */
int ziob_fs_open(const char* uri, const ziob_fs** out, char** err);
/* Syncs every file of every device the process opened (a normal exit runs it). */
void ziob_fs_sync_all_mounted(void);

/* *out = 1 (file), 2 (directory) or 0 (nothing). */
int ziob_fs_stat(const ziob_fs* fs, const char* path, int* out, char** err);
/* cb(ctx, name) for each entry directly under dir; ZIOB_NOT_FOUND if no such directory. */
int ziob_fs_children(const ziob_fs* fs, const char* dir, void (*cb)(void*, const char*),
                     void* ctx, char** err);
int ziob_fs_create_dir(const ziob_fs* fs, const char* path, char** err);
int ziob_fs_delete_dir(const ziob_fs* fs, const char* path, char** err);
int ziob_fs_delete(const ziob_fs* fs, const char* path, char** err);
int ziob_fs_lock(const ziob_fs* fs, const char* path, char** err);
int ziob_fs_unlock(const ziob_fs* fs, const char* path, char** err);
int ziob_fs_fsync_dir(const ziob_fs* fs, const char* path, char** err);
int ziob_fs_size(const ziob_fs* fs, const char* path, uint64_t* out, char** err);
int ziob_fs_mtime(const ziob_fs* fs, const char* path, uint64_t* out, char** err);
int ziob_fs_free_space(const ziob_fs* fs, const char* path, uint64_t* out, char** err);
int ziob_fs_rename(const ziob_fs* fs, const char* from, const char* to, char** err);
int ziob_fs_read_at(const ziob_fs* fs, const char* path, uint64_t offset, uint8_t* buf,
                    size_t len, size_t* got, char** err);

/* A file opened for reading (it must exist): reads skip the path lookup and, where the
   device reads at once (emu through the page cache), go straight into buf. */
int ziob_rfile_open(const ziob_fs* fs, const char* path, ziob_rfile** out, char** err);
/* Up to len bytes at offset into buf (need not be initialised); *got fewer only at the end. */
int ziob_rfile_read(const ziob_rfile* f, uint64_t offset, uint8_t* buf, size_t len,
                    size_t* got, char** err);
/* 1 if every byte of [offset, offset + len) the file holds on the device (not what a writer
   still gathers) is in the read cache, else 0: also without a read cache, and when nothing
   is kept at offset (a range wholly past the end of the file included). */
int ziob_rfile_cached(const ziob_rfile* f, uint64_t offset, size_t len);
void ziob_rfile_free(ziob_rfile* f);

/* reopen = 0: a new empty file (replacing one); 1: append to the existing file. */
int ziob_wfile_open(const ziob_fs* fs, const char* path, int lifetime, int reopen,
                    ziob_wfile** out, char** err);
void ziob_wfile_set_lifetime(const ziob_wfile* f, int lifetime);
int ziob_wfile_append(const ziob_wfile* f, const uint8_t* data, size_t len, char** err);
/* Durable up to the file's size when it returns ZIOB_OK. */
int ziob_wfile_sync(const ziob_wfile* f, char** err);
int ziob_wfile_close(const ziob_wfile* f, char** err);
uint64_t ziob_wfile_size(const ziob_wfile* f);
void ziob_wfile_free(ziob_wfile* f);

#ifdef __cplusplus
}
#endif

#endif /* ZIOB_ROCKSDB_H */
