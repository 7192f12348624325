#!/usr/bin/env bash
# Load test of log-server on loopback with wrk (Debian package `wrk`): POST /logs/bench with
# RECORD_BYTES-byte records for each store (ZIOB's ZoneLog on an emu device vs plain files
# with fdatasync group commit) and sync=false / sync=true, SECONDS_PER_CASE per case, REPEAT
# rounds (the cases interleaved in each round), every case on fresh storage. Prints each run,
# then the median of the rounds per case, side by side.
#
#   examples/log-server/loadtest/loadtest.sh            # defaults below
#   SECONDS_PER_CASE=5 REPEAT=1 STORES="file" examples/log-server/loadtest/loadtest.sh
set -euo pipefail

SECONDS_PER_CASE=${SECONDS_PER_CASE:-10}
REPEAT=${REPEAT:-3}
CONNECTIONS=${CONNECTIONS:-64}
THREADS=${THREADS:-2}
RECORD_BYTES=${RECORD_BYTES:-1024}
STORES=${STORES:-"ziob file"}
SYNCS=${SYNCS:-"false true"}
PORT=${PORT:-18180}
WORK=${WORK:-/var/tmp/log-server-loadtest.$$}
SERVER_ARGS=${SERVER_ARGS:-}

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
command -v wrk >/dev/null || { echo "wrk not found: apt-get install wrk" >&2; exit 1; }
(cd "$root" && cargo build --release -q -p log-server)
bin="$root/target/release/log-server"

mkdir -p "$WORK"
server_pid=
cleanup() {
  if [ -n "$server_pid" ]; then
    kill -TERM "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT

results="$WORK/results"
: > "$results"
echo "log-server load test: wrk -t$THREADS -c$CONNECTIONS -d${SECONDS_PER_CASE}s," \
  "$RECORD_BYTES-byte records, $REPEAT round(s), $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
for round in $(seq 1 "$REPEAT"); do
  for store in $STORES; do
    for sync in $SYNCS; do
      rm -rf "$WORK/dev.zns" "$WORK/files"
      # shellcheck disable=SC2086
      "$bin" --store "$store" --dev "emu:$WORK/dev.zns" --dir "$WORK/files" \
        --listen "127.0.0.1:$PORT" $SERVER_ARGS > "$WORK/server.out" 2> "$WORK/server.err" &
      server_pid=$!
      for _ in $(seq 1 300); do
        grep -q "listening on" "$WORK/server.out" 2>/dev/null && break
        kill -0 "$server_pid" 2>/dev/null || { cat "$WORK/server.err" >&2; exit 1; }
        sleep 0.1
      done
      line=$(RECORD_BYTES=$RECORD_BYTES wrk -t"$THREADS" -c"$CONNECTIONS" \
        -d"${SECONDS_PER_CASE}s" --timeout 10s -s "$here/post.lua" \
        "http://127.0.0.1:$PORT/logs/bench?sync=$sync" | grep '^RESULT')
      # Batching seen by the store: records per write (pwrite / append_batch) and per sync.
      curl -s "http://127.0.0.1:$PORT/metrics" > "$WORK/metrics" || : > "$WORK/metrics"
      kill -TERM "$server_pid"
      if ! wait "$server_pid"; then
        echo "server exited with an error:" >&2
        cat "$WORK/server.err" >&2
        exit 1
      fi
      server_pid=
      batching=$(awk -v req="${line#*requests=}" '
        /^log_server_(file_writes|zone_append_batches)_total / { writes = $2 }
        /^log_server_(file|zone)_group_commit_records_sum / { synced = $2 }
        /^log_server_(file|zone)_group_commit_records_count / { syncs = $2 }
        END {
          split(req, r, " ")
          printf "per_write=%.1f per_sync=%.1f", (writes ? r[1] / writes : 0), (syncs ? synced / syncs : 0)
        }' "$WORK/metrics")
      echo "round=$round store=$store sync=$sync ${line#RESULT } $batching" | tee -a "$results"
    done
  done
done

# The median of the rounds, per case and per column.
median() { sort -n | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : int((v[NR/2]+v[NR/2+1])/2)}'; }
field() { sed -n "s/.* $1=\([0-9.]*\).*/\1/p"; }
echo
echo "median of $REPEAT round(s):"
printf '%-6s %-6s %10s %9s %9s %9s %10s %7s %9s %9s\n' store sync req/s p50_us p90_us p99_us \
  p99.9_us errors per_write per_sync
for sync in $SYNCS; do
  for store in $STORES; do
    rows=$(grep "store=$store sync=$sync " "$results")
    printf '%-6s %-6s %10s %9s %9s %9s %10s %7s %9s %9s\n' "$store" "$sync" \
      "$(echo "$rows" | field rps | median)" "$(echo "$rows" | field p50_us | median)" \
      "$(echo "$rows" | field p90_us | median)" "$(echo "$rows" | field p99_us | median)" \
      "$(echo "$rows" | field p999_us | median)" "$(echo "$rows" | field errors | median)" \
      "$(echo "$rows" | field per_write | median)" "$(echo "$rows" | field per_sync | median)"
  done
done
