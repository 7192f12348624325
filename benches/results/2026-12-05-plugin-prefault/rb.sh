#!/bin/bash
# rocksdb-bench on the new plugin, then on the base plugin (same day, same flags).
D=/work/main/benches/results/2026-12-05-plugin-prefault
for p in new base; do
  /tmp/s40/rocksdb-bench --plugin /tmp/s40/plugin-$p.so --ziob-cli /tmp/s40/ziob --targets local,ziob-emu,ziob-emu-pagecache --num 100000 --runs 3 --value-sizes 100,1024 --out $D/rocksdb-host-100k-$p > $D/rocksdb-host-100k-$p.log 2>&1
done
