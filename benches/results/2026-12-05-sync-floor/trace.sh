#!/bin/bash
# Timeline of kv-demo's synced puts (floor.sh's fillseq, 5,000 x 1 KiB, --sync=1, page-cache
# emu file) from kernel tracepoints: io_uring FSYNC submit/complete, pwrite64, scheduler
# switches and wake-ups. Prints the distribution of each FSYNC's time in io_uring and of the
# gap from its completion to the next FSYNC's submission, then two whole gaps as examples.
# Usage: trace.sh KV_DEMO   (needs perf; tracing slows the run by about a fifth)
KV=$1
F="--benchmarks=fillseq --key_size=16 --threads=1 --compression_type=none --write_buffer_size=16777216 --cache_size=8388608 --bloom_bits=10 --num=5000 --value_size=1024 --sync=1 --seed=1000"
rm -f /var/tmp/trace.zns
perf record -q -o /tmp/sync-trace.perf -e 'io_uring:io_uring_submit_req,io_uring:io_uring_complete,sched:sched_switch,sched:sched_wakeup,syscalls:sys_enter_pwrite64,syscalls:sys_exit_pwrite64' \
  -- "$KV" $F --db=emu:/var/tmp/trace.zns,direct=0 2>&1 | grep fillseq
rm -f /var/tmp/trace.zns
perf script -i /tmp/sync-trace.perf -F comm,tid,cpu,time,event,trace 2>/dev/null > /tmp/sync-trace.txt
python3 - <<'PY'
import re
ev = []
for l in open('/tmp/sync-trace.txt'):
    m = re.match(r'\s*(\S.*?)\s+(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+(\S+):\s*(.*)', l)
    if m:
        comm, tid, cpu, t, e, rest = m.groups()
        ev.append((float(t) * 1e6, comm, int(tid), int(cpu), e.split(':')[1], rest))
pending, dur, gaps, last, marks = {}, [], [], None, []
for i, (t, c, tid, cpu, e, r) in enumerate(ev):
    if e == 'io_uring_submit_req' and 'opcode FSYNC' in r:
        pending[re.search(r'user_data (\S+),', r).group(1)] = (t, i)
        if last is not None:
            gaps.append(t - last[0]); marks.append((last[1], i))
    elif e == 'io_uring_complete':
        u = re.search(r'user_data (\S+),', r).group(1)
        if u in pending:
            dur.append(t - pending.pop(u)[0]); last = (t, i)
def q(x):
    x = sorted(x); n = len(x)
    return 'p10 %.0f, p50 %.0f, p90 %.0f us (n=%d)' % (x[n // 10], x[n // 2], x[9 * n // 10], n)
print('FSYNC submit -> complete:', q(dur))
print('complete -> next FSYNC submit:', q(gaps))
for a, b in marks[len(marks) // 2: len(marks) // 2 + 2]:
    t0 = ev[a][0]
    for t, c, tid, cpu, e, r in ev[a:b + 1]:
        r = re.sub(r'ring 0x\S+, (req|request) 0x\S+, |prev_prio=\d+ |next_prio=\d+|prio=\d+ ', '', r)
        print('%7.1f %-14s [%d] %-22s %s' % (t - t0, c[:14], cpu, e, r[:100]))
    print('-----')
PY
