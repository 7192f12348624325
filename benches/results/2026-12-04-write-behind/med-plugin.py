"""Medians of host-ab.sh output (modes local, base-pc, new-pc): one row per benchmark."""
import sys, statistics, collections
d = collections.defaultdict(lambda: collections.defaultdict(list))
for f in sys.argv[1:]:
    for line in open(f):
        p = line.split()
        if not p: continue
        for kv in p[1:]:
            k, v = kv.split('=')
            if v: d[p[0]][k].append(float(v))
benches = ['fillseq','fillrandom','overwrite','readrandom','readseq','readwhilewriting']
med = lambda t, b: statistics.median(d[t][b])
print(f"| benchmark | local | base | new | new / base | new / local | base / local |")
print('|---|---:|---:|---:|---:|---:|---:|')
for b in benches:
    print(f"| {b} | {med('local',b):,.0f} | {med('base-pc',b):,.0f} | {med('new-pc',b):,.0f} | "
          f"{med('new-pc',b)/med('base-pc',b):.2f} | {med('new-pc',b)/med('local',b):.2f} | {med('base-pc',b)/med('local',b):.2f} |")
print('rounds:', {t: len(d[t]['fillseq']) for t in d})
