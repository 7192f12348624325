"""Medians (min-max) of kv-ab.sh output: one row per benchmark, base, new, new/base."""
import sys, statistics, collections
d = collections.defaultdict(lambda: collections.defaultdict(list))
for f in sys.argv[1:]:
    for line in open(f):
        p = line.split()
        if not p: continue
        for kv in p[1:]:
            k, v = kv.split('=')
            if v: d[p[0]][k].append(float(v))
benches = ['fillseq','fillrandom','overwrite','readrandom','readseq','readwhilewriting','seekrandom','deleterandom']
cell = lambda xs: f"{statistics.median(xs):,.0f} ({min(xs):,.0f}–{max(xs):,.0f})"
a, z = list(d)[:2]  # the pair, in the file's order
rounds = lambda t: max(len(v) for v in d[t].values())
print(f"| benchmark | {a} ({rounds(a)}) | {z} ({rounds(z)}) | {z} / {a} |")
print('|---|---:|---:|---:|')
for b in benches:
    if not d[a][b] or not d[z][b]: continue
    r = statistics.median(d[z][b]) / statistics.median(d[a][b])
    print(f"| {b} | {cell(d[a][b])} | {cell(d[z][b])} | {r:.2f} |")
