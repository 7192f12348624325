#!/bin/bash
# Process time of a tiny kv-demo run (a fresh O_DIRECT emu device in /var/tmp, ZIOB on, no
# prefault, --benchmarks=fillseq --num=10: almost all of it opening and closing the store)
# for BASE and NEW, alternated, ROUNDS rounds. Prints: round build seconds.
# Usage: open-ab.sh BASE NEW [ROUNDS]
BASE=$1; NEW=$2; ROUNDS=${3:-10}
for r in $(seq 1 "$ROUNDS"); do
  order="base new"; [ $((r % 2)) = 0 ] && order="new base"
  for m in $order; do
    bin=$BASE; [ $m = new ] && bin=$NEW
    rm -f /var/tmp/open-ab.zns
    /usr/bin/time -f "$r $m %e" "$bin" --benchmarks=fillseq --num=10 --prefault_memory=0 \
      --db=emu:/var/tmp/open-ab.zns --ziob=on 2>&1 >/dev/null | tail -1
  done
done
rm -f /var/tmp/open-ab.zns
