#!/bin/bash
# kv-bench's order, fills and readrandom: kv-bench --modes rocksdb,rocksdb-direct,kv-demo --runs 1 per LABEL,
# alternated, kv-demo = the wrapper /tmp/s39/kvd-LABEL (see README.md). Usage: kvb.sh OUT ROUNDS LABEL...
# Raw kv-bench output stays in /tmp/s39/kvb-LABEL-ROUND/; OUT gets one line per run.
out=$1; rounds=$2; shift 2
for r in $(seq 1 $rounds); do for pf in "$@"; do
 /work/main/target/release/kv-bench --modes rocksdb,rocksdb-direct,kv-demo --num 100000 --value-sizes 1024 --runs 1 --syncs 0 --benchmarks fillseq,fillrandom,overwrite,readrandom --kv-demo /tmp/s39/kvd-$pf --out /tmp/s39/kvb-$pf-$r > /tmp/s39/kvb-$pf-$r.log 2>&1
 python3 - $pf $r >> $out <<'PY'
import json,sys
pf,r=sys.argv[1:]
j=json.load(open(f"/tmp/s39/kvb-{pf}-{r}/results.json"))
d={}
for s in j["samples"]: d[(s["mode"],s["bench"])]=int(s["ops_per_sec"])
print(r,pf," ".join(f"{b}:{d.get(('kv-demo',b))}/{d.get(('rocksdb-direct',b))}={d.get(('kv-demo',b),0)/max(1,d.get(('rocksdb-direct',b),1)):.2f}" for b in ["fillseq","fillrandom","overwrite"]))
PY
done; done
