#!/usr/bin/env python3
"""Medians (min-max) per variant over guest-ab files; ratio on/off. Lines: LABEL name=v ..."""
import sys, statistics, collections
vals = collections.defaultdict(lambda: collections.defaultdict(list))
order = []
for f in sys.argv[1:]:
    for line in open(f):
        parts = line.split()
        if not parts or '=' not in line or parts[0].startswith('['):
            continue
        label = parts[0].split('-')[-1]
        for kv in parts[1:]:
            k, v = kv.split('=')
            if v:
                if k not in order: order.append(k)
                vals[label][k].append(float(v))
labels = list(vals)
print('| benchmark | ' + ' | '.join(labels) + ' | on / off |')
print('|---|' + '---:|' * (len(labels) + 1))
for k in order:
    cells = []
    for l in labels:
        xs = vals[l][k]
        cells.append(f"{statistics.median(xs):,.0f} ({min(xs):,.0f}–{max(xs):,.0f})" if len(xs) > 1 else f"{xs[0]:,.0f}" if xs else "")
    r = statistics.median(vals['on'][k]) / statistics.median(vals['off'][k]) if vals['on'][k] and vals['off'][k] else float('nan')
    print(f"| {k} | " + ' | '.join(cells) + f" | {r:.2f} |")
