#!/bin/bash
# Who wakes the ZIOB core: per `direct` run of host-sched-rate.sh (its perf .data files in
# DIR), the wake-ups of ziob-core-0 counted by the waking thread's name (whole process: open,
# warm-up and close included), and the db_bench threads by thread id. In host-sched-rate.txt
# the last two db_bench threads of a run are the writer, then the reader; the first is main.
# Usage: bash core-wakers.sh DIR
DIR=$1
for f in "$DIR"/*-direct.data; do
  echo "== $(basename "$f" .data)"
  w=$(perf sched timehist -i "$f" -w 2>/dev/null | grep "awakened: ziob-core-0\[[0-9]*/")
  echo "$w" | awk '{n=$3; sub(/\[.*/, "", n); print n}' | sort | uniq -c | sort -rn
  echo "  db_bench by thread:"
  echo "$w" | awk '$3 ~ /^db_bench/ {print $3}' | sort | uniq -c | sort -rn
done
