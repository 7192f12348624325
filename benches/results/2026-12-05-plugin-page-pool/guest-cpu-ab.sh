#!/bin/bash
# Guest: §3j's guest-cpu.sh (one round: ext4 then zbd:, fillrandom, readwhilewriting with each thread's
# CPU ticks) with the plugin of 669ec1b and of 45e8b32, alternating, twice. Run as
#   cargo xtask vm-run --zones 128 --zone-size 16M --zone-capacity 12M --max-open 14 --max-active 14 \
#     --conv-size 2G --timeout-secs 1400 -- bash /var/tmp/gcpu.sh   (this file)   -> guest-cpu.txt
for p in /var/tmp/plugin-669e.so /var/tmp/plugin-pool2.so /var/tmp/plugin-669e.so /var/tmp/plugin-pool2.so; do
  echo "=== plugin $p"
  bash /work/main/benches/results/2026-12-05-rocksdb-rww-cpu/guest-cpu.sh 1 $p
done
