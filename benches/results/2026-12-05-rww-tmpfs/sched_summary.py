#!/usr/bin/env python3
"""One line per run of a host-sched-rate.sh output: reads/s, the writer's keys, and per thread
the run time, time runnable but preempted, and wake-ups (sched-in count), in ms; the reader is
the last db_bench thread, the writer the one before it.

Usage: python3 sched_summary.py HOST_SCHED_OUTPUT
"""
import re
import sys

HEAD = re.compile(r"^(\d+) (\S+) (\d+) reads/s, writer keys (\d+)")
THREAD = re.compile(r"^\s*(\S+)\[(\d+)(?:/\d+)?\]\s+\d+\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)")
runs = []
for line in open(sys.argv[1]):
    m = HEAD.match(line)
    if m:
        runs.append({"head": m.groups(), "threads": []})
        continue
    m = THREAD.match(line)
    if m and runs:
        name, _, ins, run, _sleep, _iowait, preempt, _delay = m.groups()
        runs[-1]["threads"].append((re.sub(r"\d+$", "", name), int(ins), float(run), float(preempt)))

print("round target reads/s writer_keys | reader run/preempt | writer run | compaction run | flush run | ziob core run (wake-ups) | all threads run")
for r in runs:
    rnd, target, reads, keys = r["head"]
    th = r["threads"]
    bench = [t for t in th if t[0] == "db_bench"]
    reader, writer = bench[-1], bench[-2]

    def run_of(prefix):
        return sum(t[2] for t in th if t[0].startswith(prefix))

    core = [t for t in th if t[0].startswith("ziob-core")]
    core_s = f"{sum(t[2] for t in core):4.0f} ({sum(t[1] for t in core)})" if core else "   -"
    print(
        f"{rnd} {target:6} {reads:>7} {keys:>6} | {reader[2]:4.0f} / {reader[3]:4.0f} | {writer[2]:4.0f}"
        f" | {run_of('rocksdb:low'):4.0f} | {run_of('rocksdb:high'):4.0f} | {core_s} | {sum(t[2] for t in th):5.0f}"
    )
