#!/usr/bin/env python3
"""Summarises `perf script` of ops.sh's recording (stdin): the io_uring ops by kind (count,
bytes, sizes by power of two, each labelled by its upper bound: 4K = 2-4 KiB), the workqueue
items run by kworkers, who woke `ziob-core-0` (by the waking thread's name, numbers
stripped), and the core's context switches (sleeps and preemptions). The recording is
system-wide (`perf record -a`): run it with nothing else doing I/O, and the ops are then the
ZIOB core's (the plugin's only data ring). The whole process is counted: open, warm-up and
close included."""
import collections
import re
import sys

ops = {}
kinds = collections.Counter()
sizes = collections.defaultdict(collections.Counter)
total = collections.Counter()
work = collections.Counter()
wakers = collections.Counter()
switches = collections.Counter()
for line in sys.stdin:
    m = re.search(r"io_uring_submit_req: ring \S+ req (\S+), user_data \S+, opcode (\w+)", line)
    if m:
        ops[m.group(1)] = m.group(2)
        continue
    m = re.search(r"io_uring_complete: ring \S+ req (\S+), user_data \S+, result (-?\d+)", line)
    if m:
        op = ops.pop(m.group(1), "?")
        res = int(m.group(2))
        kinds[op] += 1
        if op in ("READ", "WRITE") and res > 0:
            total[op] += res
            sizes[op][1 << (res - 1).bit_length()] += 1
        continue
    m = re.search(r"workqueue_execute_start: work struct \S+ function (\S+)", line)
    if m:
        work[m.group(1)] += 1
        continue
    m = re.search(r"^\s*(.+?)\s+\d+ \[\d+\].*sched_wakeup: comm=ziob-core-0 ", line)
    if m:
        wakers[re.sub(r"[-/:]?[\d:/]+$", "", m.group(1))] += 1
        continue
    m = re.search(r"sched_switch: prev_comm=ziob-core-0 prev_pid=\d+ prev_prio=\d+ prev_state=(\S+)", line)
    if m:
        switches["preempted" if m.group(1).startswith("R") else "slept"] += 1


def kib(n):
    return f"{n // 1024}K" if n >= 1024 else f"{n}B"


print("ring ops:", ", ".join(f"{k} {v}" for k, v in kinds.most_common()))
for op in ("WRITE", "READ"):
    print(f"  {op}: {total[op] / 1e6:.1f} MB;", ", ".join(f"{kib(s)}:{n}" for s, n in sorted(sizes[op].items())))
print("workqueue items:", ", ".join(f"{k} {v}" for k, v in work.most_common(4)))
print("ziob-core-0 woken by:", ", ".join(f"{k} {v}" for k, v in wakers.most_common(8)),
      f"(all {sum(wakers.values())})")
print("ziob-core-0 switched out:", ", ".join(f"{k} {v}" for k, v in switches.items()))
