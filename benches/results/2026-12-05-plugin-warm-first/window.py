import sys, collections
# usage: window.py SCRIPT PHASE_SECONDS  -> per-thread sample counts within the last PHASE_SECONDS before the last db_bench sample
f, phase = sys.argv[1], float(sys.argv[2])
rows = []
for line in open(f):
    p = line.split()
    if len(p) < 3: continue
    t = float(p[-1].rstrip(':')); tid = p[-2]; comm = ' '.join(p[:-2])
    rows.append((t, tid, comm))
end = max(t for t, tid, c in rows if c.startswith('db_bench') or c.startswith('rocksdb'))
start = end - phase
c = collections.Counter((comm, tid) for t, tid, comm in rows if start <= t <= end)
tot = sum(c.values())
print(f"window {start:.2f}-{end:.2f}, {tot} samples")
for (comm, tid), n in c.most_common(12):
    print(f"  {comm:18s} {tid:>5s} {n:6d} {100*n/tot:5.1f}%")
