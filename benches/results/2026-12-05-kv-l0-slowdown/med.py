#!/usr/bin/env python3
"""Medians per mode and benchmark of an A/B file ("round mode benchmark ops/s" lines, as
host-ab.sh prints; guest-ab.sh's "roundN mode: bench ops bench ops ..." lines too)."""
import re, statistics, sys
from collections import defaultdict
runs = defaultdict(list)
order = []
for line in open(sys.argv[1]):
    m = re.match(r"^(\d+) (\S+) (\S+) (\d+)$", line.strip())
    if m:
        _, mode, bench, ops = m.groups()
        runs[(mode, bench)].append(int(ops))
        order.append(bench)
        continue
    m = re.match(r"^round\d+ (\S+?):\s+(?:Read\s+)?(.*)$", line.strip())
    if m:
        mode, rest = m.groups()
        f = rest.split()
        for b, o in zip(f[::2], f[1::2]):
            runs[(mode, b)].append(int(o))
            order.append(b)
modes = sorted({k[0] for k in runs})
benches = list(dict.fromkeys(order))
print("| benchmark | " + " | ".join(modes) + " |")
print("|---|" + "---:|" * len(modes))
for b in benches:
    cells = []
    for m in modes:
        v = runs.get((m, b), [])
        cells.append(f"{statistics.median(v):,.0f} ({' / '.join(f'{x:,}' for x in v)})" if v else "")
    print(f"| {b} | " + " | ".join(cells) + " |")
