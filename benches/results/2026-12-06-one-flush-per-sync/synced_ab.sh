#!/bin/bash
# Host, synced writes: per sample a fresh database and db_bench fillrandom with --sync=1 (every
# write's WAL append synced: one sync per write), 1 KiB values (or VALUE bytes); the modes
# rotate per round. Prints per sample the fillrandom ops/s and micros/op.
# Usage: [VALUE=bytes] [NUM=writes] synced_ab.sh ROUNDS MODE...
#   MODE = local | NAME:PLUGIN_SO:SPEC_TAIL (SPEC_TAIL follows ziob://emu:/var/tmp/sync-ab.zns,
#   e.g. ?prefault=auto). Needs target/debug/ziob of the repository at /work/main (ziob create).
ROUNDS=$1; shift
F="--num=${NUM:-3000} --key_size=16 --compression_type=none --bloom_bits=10 --cache_size=33554432 --write_buffer_size=4194304 --target_file_size_base=4194304 --max_bytes_for_level_base=16777216 --threads=1 --value_size=${VALUE:-1024} --seed=1000 --sync=1"
trap 'rm -rf /var/tmp/sync-ab-db /var/tmp/sync-ab.zns' EXIT
for r in $(seq "$ROUNDS"); do
  n=$#; modes=("$@"); off=$(( (r-1) % n ))
  for i in $(seq 0 $((n-1))); do m=${modes[$(( (i+off) % n ))]}
    if [ "$m" = local ]; then rm -rf /var/tmp/sync-ab-db; T="--db=/var/tmp/sync-ab-db"; PRE=""; name=local
    else IFS=: read -r name so q <<<"$m"; rm -f /var/tmp/sync-ab.zns
      /work/main/target/debug/ziob create emu:/var/tmp/sync-ab.zns --zones 256 --zone-size 16M --zone-capacity 12M --max-open 14 --max-active 14 >/dev/null \
        || { echo "ziob create failed" >&2; exit 1; }
      T="--db=/rdb --fs_uri=ziob://emu:/var/tmp/sync-ab.zns$q"; PRE="env LD_PRELOAD=$so"; fi
    out=$($PRE db_bench $F $T --benchmarks=fillrandom 2>&1) || { echo "$r $name: failed: $out" >&2; exit 1; }
    echo "$r $name $(awk '$1=="fillrandom"{print $5, "ops/s", $3, "micros/op"}' <<<"$out")"
  done
done
