#!/usr/bin/env python3
"""Medians (min-max) per variant over A/B files with lines `round N VARIANT: bench ops ...`
(or `roundN-VARIANT bench=ops ...`), and the ratio of the second variant to the first."""
import sys, statistics, collections, re
vals = collections.defaultdict(lambda: collections.defaultdict(list)); order = []; labels = []
for f in sys.argv[1:]:
    for line in open(f):
        m = re.match(r'round ?\d+[ -](\w+):? (.*)', line.strip())
        if not m: continue
        v, rest = m.groups()
        if v not in labels: labels.append(v)
        toks = rest.replace('=', ' ').split()
        i = 0
        while i + 1 < len(toks):
            k, x = toks[i], toks[i+1]
            if k == 'cpu_s': break
            try: val = float(x)
            except ValueError: i += 1; continue
            if k not in order: order.append(k)
            vals[v][k].append(val); i += 2
a, b = labels[0], labels[1]
print(f'| benchmark | {a} | {b} | {b} / {a} |'); print('|---|---:|---:|---:|')
for k in order:
    xa, xb = vals[a][k], vals[b][k]
    if not xa or not xb: continue
    fmt = lambda xs: f"{statistics.median(xs):,.0f} ({min(xs):,.0f}–{max(xs):,.0f})"
    print(f'| {k} | {fmt(xa)} | {fmt(xb)} | {statistics.median(xb)/statistics.median(xa):.2f} |')
