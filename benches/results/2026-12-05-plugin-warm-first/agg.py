import sys, collections, re
# agg.py SYMS START END TID [TOP]: samples by dso and by symbol for one thread in a time window
f, s, e, tid = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
top = int(sys.argv[5]) if len(sys.argv) > 5 else 25
d = collections.Counter(); sy = collections.Counter(); n = 0
for line in open(f):
    m = re.match(r"\s*(\d+)\s+([\d.]+):\s+[0-9a-f]+\s+(.*?)\s+\((.*)\)\s*$", line)
    if not m: continue
    if m.group(1) != tid: continue
    t = float(m.group(2))
    if not (s <= t <= e): continue
    dso = m.group(4).split('/')[-1]; sym = m.group(3)
    if dso.startswith('[kernel') or dso.startswith('['): sym = '[k]'
    sym = re.sub(r'\+0x[0-9a-f]+$', '', sym)
    n += 1; d[dso] += 1; sy[(dso, sym[:90])] += 1
print(f"tid {tid}: {n} samples")
for k, v in d.most_common(8): print(f"   {v:6d} {100*v/n:5.1f}% {k}")
for (k, sm), v in sy.most_common(top): print(f"   {v:6d} {100*v/n:5.1f}% {k[:20]:20s} {sm}")
