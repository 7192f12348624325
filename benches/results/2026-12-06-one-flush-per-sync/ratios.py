#!/usr/bin/env python3
"""Paired ratios of a synced_ab.sh output: per round, a mode's ops/s over BASE's in the same
round; geometric mean with a 95 % bootstrap interval (10,000 resamples of the rounds, seed 1),
the rounds ahead and the medians. Usage: python3 ratios.py FILE [BASE]  (BASE: local)"""
import math, random, re, statistics as st, sys
rounds = {}
for line in open(sys.argv[1]):
    m = re.match(r"^(\d+) (\S+) (\d+) ops/s", line)
    if m:
        rounds.setdefault(int(m.group(1)), {})[m.group(2)] = float(m.group(3))
base = sys.argv[2] if len(sys.argv) > 2 else "local"
modes = sorted({k for r in rounds.values() for k in r if k != base})
rng = random.Random(1)
for mode in modes:
    logs = [math.log(r[mode] / r[base]) for r in rounds.values() if mode in r and base in r]
    boot = sorted(st.mean(rng.choices(logs, k=len(logs))) for _ in range(10000))
    print("%s / %s: %d rounds, geometric mean %.3f (95 %% %.3f-%.3f), ahead in %d; medians %.0f vs %.0f ops/s" % (
        mode, base, len(logs), math.exp(st.mean(logs)), math.exp(boot[250]), math.exp(boot[9749]),
        sum(l > 0 for l in logs), st.median(r[mode] for r in rounds.values() if mode in r),
        st.median(r[base] for r in rounds.values() if base in r)))
