#!/bin/bash
# Guest: the new plugin (target/release) then the base plugin, ext4 and ziob-nvme, 1 KiB, one run each.
D=/work/main/benches/results/2026-12-05-plugin-prefault
cd /work/main
for p in new base; do
  extra=""; [ $p = base ] && extra="--plugin /tmp/s40/plugin-base.so"
  target/release/rocksdb-bench --targets ext4,ziob-nvme,ziob-zbd --guest --guest-num 30000 --runs 1 --value-sizes 1024 $extra --out $D/guest-1k-$p > $D/guest-1k-$p.log 2>&1
done
