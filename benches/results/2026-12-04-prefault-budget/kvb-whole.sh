#!/bin/bash
# kv-bench's whole sequence and modes, one run per binary, alternated: ./kvb-whole.sh OUTDIR ROUNDS LABEL... (binary /tmp/s39/kvd-LABEL)
out=$1; rounds=$2; shift 2
mkdir -p $out
for r in $(seq 1 $rounds); do
  if [ $((r % 2)) -eq 1 ]; then set -- "$@"; labels="$*"; else labels=$(echo "$*" | awk '{for(i=NF;i>0;i--) printf "%s ", $i}'); fi
  for l in $labels; do
    /work/main/target/release/kv-bench --modes rocksdb,rocksdb-direct,kv-demo,kv-demo-pagecache,fjall --num 100000 --value-sizes 1024 --runs 1 --syncs 0 --kv-demo /tmp/s39/kvd-$l --out $out/$l-$r > $out/$l-$r.log 2>&1
  done
done
