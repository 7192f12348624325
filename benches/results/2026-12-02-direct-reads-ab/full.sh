#!/bin/bash
# usage: full.sh out.txt bin1 bin2 ... ; alternates binaries, ROUNDS rounds, full db_bench sequence at 1M x 100 B
out=$1; shift
F=$(cat /work/notes/F)
for r in $(seq 1 ${ROUNDS:-2}); do
 for b in "$@"; do
  rm -f /var/tmp/abfull.zns
  line=$(/var/tmp/$b --benchmarks=fillseq,fillrandom,overwrite,readrandom,readseq,readwhilewriting,seekrandom,deleterandom $F --db=emu:/var/tmp/abfull.zns,direct=0 2>&1 | grep -E "ops/sec" | awk '{printf "%s=%s ", $1, $5}')
  echo "$b r$r $line" | tee -a $out
 done
done
rm -f /var/tmp/abfull.zns
