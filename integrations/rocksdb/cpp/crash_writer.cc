// crash_writer: the crash test's RocksDB program (run with LD_PRELOAD=libziob_rocksdb.so).
//
//   crash_writer write  <fs uri> <db path> <first key>   writes keys first, first+1, ... with
//       sync=true, printing "<i>\n" (flushed) after each Put returns OK, until killed;
//   crash_writer verify <fs uri> <db path> <last key>    checks that keys 0..=last hold their
//       values; prints "ok <n>" or the first missing/wrong key and exits 1.
//
// Small memtables (64 KiB) and SSTs make flushes and compactions happen while it writes, so a
// kill lands in WAL appends, syncs, SST writes, MANIFEST updates and file deletions.

#include <rocksdb/convenience.h>
#include <rocksdb/db.h>
#include <rocksdb/env.h>
#include <rocksdb/options.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

static std::string Key(long i) {
  char b[32];
  snprintf(b, sizeof(b), "key%012ld", i);
  return b;
}

// 50..549 bytes, derived from the key number only.
static std::string Value(long i) {
  size_t len = 50 + static_cast<size_t>((i * 7919) % 500);
  std::string v;
  v.reserve(len);
  unsigned long x = static_cast<unsigned long>(i) * 2654435761UL + 1;
  while (v.size() < len) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    v.push_back(static_cast<char>('a' + x % 26));
  }
  return v;
}

int main(int argc, char** argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: %s write|verify <fs uri> <db path> <n>\n", argv[0]);
    return 2;
  }
  std::string mode = argv[1];
  long n = atol(argv[4]);
  rocksdb::Env* env = nullptr;
  std::shared_ptr<rocksdb::Env> guard;
  rocksdb::ConfigOptions cfg;
  rocksdb::Status s = rocksdb::Env::CreateFromUri(cfg, "", argv[2], &env, &guard);
  if (!s.ok() || env == nullptr) {
    fprintf(stderr, "env %s: %s\n", argv[2], s.ToString().c_str());
    return 2;
  }
  rocksdb::Options opts;
  opts.env = env;
  opts.create_if_missing = true;
  opts.write_buffer_size = 64 << 10;
  opts.target_file_size_base = 256 << 10;
  opts.max_bytes_for_level_base = 1 << 20;
  opts.level0_file_num_compaction_trigger = 2;
  opts.compression = rocksdb::kNoCompression;
  rocksdb::DB* raw = nullptr;
  s = rocksdb::DB::Open(opts, argv[3], &raw);
  if (!s.ok()) {
    fprintf(stderr, "open %s: %s\n", argv[3], s.ToString().c_str());
    return 2;
  }
  std::unique_ptr<rocksdb::DB> db(raw);
  if (mode == "write") {
    rocksdb::WriteOptions wo;
    wo.sync = true;
    for (long i = n;; i++) {
      s = db->Put(wo, Key(i), Value(i));
      if (!s.ok()) {
        fprintf(stderr, "put %ld: %s\n", i, s.ToString().c_str());
        return 1;
      }
      printf("%ld\n", i);
      fflush(stdout);
    }
  }
  if (mode == "verify") {
    for (long i = 0; i <= n; i++) {
      std::string v;
      s = db->Get(rocksdb::ReadOptions(), Key(i), &v);
      if (!s.ok()) {
        printf("missing %ld: %s\n", i, s.ToString().c_str());
        return 1;
      }
      if (v != Value(i)) {
        printf("wrong %ld: %zu bytes\n", i, v.size());
        return 1;
      }
    }
    printf("ok %ld\n", n + 1);
    s = db->Close();
    if (!s.ok()) {
      fprintf(stderr, "close: %s\n", s.ToString().c_str());
      return 1;
    }
    return 0;
  }
  fprintf(stderr, "unknown mode %s\n", mode.c_str());
  return 2;
}
