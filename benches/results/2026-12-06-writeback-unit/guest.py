#!/usr/bin/env python3
"""Summarises guest-ab.txt (guest-ab.sh's lines `round mode benchmark ops/s keys N`): per
benchmark and mode the median ops/s and keys written, the geometric mean of the per-round
ratios to ext4, and of 4M's to 512K's on each device (z4m/z512, n4m/n512) with the rounds
ahead. Usage: python3 guest.py guest-ab.txt"""
import collections
import math
import re
import statistics as st
import sys

runs = collections.defaultdict(lambda: collections.defaultdict(dict))
for line in open(sys.argv[1]):
    m = re.match(r"(\d+) (\S+) (\S+) (\d+) keys (\d+)", line)
    if m:
        runs[m.group(3)][m.group(2)][int(m.group(1))] = (int(m.group(4)), int(m.group(5)))


def geo(a, b):
    r = [a[k][0] / b[k][0] for k in a if k in b]
    return math.exp(st.mean(math.log(x) for x in r)), sum(x > 1 for x in r), len(r)


for bench, modes in runs.items():
    for mode, v in modes.items():
        g, _, n = geo(v, modes["ext4"])
        print(f"{bench} {mode}: median {st.median(x[0] for x in v.values()):.0f} ops/s, "
              f"keys {st.median(x[1] for x in v.values()):.0f}, {g:.3f}x ext4 ({n} rounds)")
    for a, b in (("z4m", "z512"), ("n4m", "n512")):
        g, ahead, n = geo(modes[a], modes[b])
        print(f"  {bench} {a} / {b}: {g:.3f}, ahead in {ahead}/{n}")
