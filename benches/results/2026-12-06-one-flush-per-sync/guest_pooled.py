#!/usr/bin/env python3
"""Summarises guest-ab.sh outputs (lines `round mode benchmark ops/s keys N`; guest-ab.txt's 5
rounds with ext4, guest-ab2.txt's 10 without, guest-ab3.txt's 16 of nvme: alone), pooling
their rounds: per benchmark and mode the
median ops/s and keys written and, in the rounds that ran ext4, the geometric mean of the
ratios to it; per device, this change over a56c1bc (zfinal/zbase, nfinal/nbase) in each round:
the geometric mean with a 95 % bootstrap interval (10,000 resamples of the rounds, seed 1),
the rounds ahead and the medians. Usage: python3 guest_pooled.py FILE..."""
import collections
import math
import random
import re
import statistics as st
import sys

runs = collections.defaultdict(lambda: collections.defaultdict(dict))
keys = collections.defaultdict(lambda: collections.defaultdict(dict))
for n, f in enumerate(sys.argv[1:]):
    for line in open(f):
        m = re.match(r"(\d+) (\S+) (\S+) (\d+) keys (\d+)", line)
        if m:
            runs[m.group(3)][m.group(2)][(n, int(m.group(1)))] = int(m.group(4))
            keys[m.group(3)][m.group(2)][(n, int(m.group(1)))] = int(m.group(5))
rng = random.Random(1)
for bench, modes in runs.items():
    ext4 = modes.get("ext4", {})
    for mode, v in modes.items():
        r = [v[k] / ext4[k] for k in v if k in ext4]
        vs = f", {math.exp(st.mean(math.log(x) for x in r)):.3f}x ext4 ({len(r)} rounds)" if r else ""
        print(f"{bench} {mode}: median {st.median(v.values()):.0f} ops/s, keys "
              f"{st.median(keys[bench][mode].values()):.0f} ({len(v)} rounds){vs}")
    for a, b in (("zfinal", "zbase"), ("nfinal", "nbase")):
        if a not in modes or b not in modes:
            continue
        logs = [math.log(modes[a][k] / modes[b][k]) for k in modes[a] if k in modes[b]]
        boot = sorted(st.mean(rng.choices(logs, k=len(logs))) for _ in range(10000))
        print(f"{bench} {a}/{b}: {len(logs)} rounds, {math.exp(st.mean(logs)):.3f} "
              f"(95 % {math.exp(boot[250]):.3f}-{math.exp(boot[9749]):.3f}), ahead in "
              f"{sum(x > 0 for x in logs)}, medians {st.median(modes[a].values()):.0f} vs "
              f"{st.median(modes[b].values()):.0f} ops/s")
