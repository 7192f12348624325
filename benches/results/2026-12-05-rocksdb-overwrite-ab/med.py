#!/usr/bin/env python3
"""Medians per target and benchmark of guest-ab*.txt ("round target benchmark ops/s"), ratios to
the reference target REF (e.g. ext4 or zenfs), and round-by-round ratios. Usage: med.py FILE REF"""
import statistics, sys
from collections import defaultdict
d=defaultdict(dict)
for l in open(sys.argv[1]):
    f=l.split()
    if len(f)==4 and f[0].isdigit() and f[3].isdigit(): d[(f[1],f[2])][int(f[0])]=int(f[3])
ref=sys.argv[2]
for b in ['fillrandom','overwrite','readseq','readwhilewriting']:
    z=d[(ref,b)]
    for t in [ref,'zbd','nvme']:
        v=d[(t,b)]
        if not v: continue
        m=statistics.median(v.values())
        print(f"{b:17s} {t:5s} median {m:9,.0f} ({min(v.values()):,}-{max(v.values()):,}) ratio {m/statistics.median(z.values()):.2f}", '' if t==ref else 'rounds '+' / '.join(f"{v[r]/z[r]:.2f}" for r in sorted(z) if r in v))
