#!/usr/bin/env python3
"""Paired ratios of an `ab.sh` output (../2026-12-05-rww-writer-rate/ab.sh): in each round, a
mode's readwhilewriting reads/s (and fillrandom ops/s) divided by `local`'s in the same round;
the geometric mean of those ratios with a 95 % bootstrap interval (10,000 resamples of the
rounds, seed 1), the median ratio, the rounds ahead, and the medians of the raw numbers; and
a least-squares line of the log read ratio over the log writer ratio across the rounds and its
value at equal writer rates (log ratio 0). That value is an association across rounds, not a
run with the writers held level: the writer's rate is measured in the same run as the reads.
The line is left out when the writers' ratios barely vary (writers held to one rate).

Usage: python3 paired.py AB_OUTPUT [BASE]   (BASE: the mode divided by, `local` by default)
"""
import math
import random
import re
import statistics as st
import sys

LINE = re.compile(r"^(\d+) (\S+)\s+fillrandom=\s*(\d+) reads/s=\s*(\d+) writer_keys/s=\s*(\d+)")
rounds = {}  # round -> mode -> (fillrandom, reads/s, writer keys/s)
for line in open(sys.argv[1]):
    m = LINE.match(line)
    if m:
        rounds.setdefault(int(m.group(1)), {})[m.group(2)] = tuple(float(x) for x in m.groups()[2:])

BASE = sys.argv[2] if len(sys.argv) > 2 else "local"
modes = sorted({k for r in rounds.values() for k in r if k != BASE})


def summary(logs):
    """Geometric mean of ratios given as logs, with a bootstrap 95 % interval."""
    rng = random.Random(1)
    means = sorted(
        st.mean(rng.choice(logs) for _ in logs) for _ in range(10_000)
    )
    return math.exp(st.mean(logs)), math.exp(means[250]), math.exp(means[9_749])


for mode in modes:
    pairs = [(r[BASE], r[mode]) for r in rounds.values() if BASE in r and mode in r]
    print(f"{mode}: {len(pairs)} rounds")
    for i, what in ((1, "readwhilewriting reads/s"), (0, "fillrandom ops/s")):
        logs = [math.log(b[i] / a[i]) for a, b in pairs]
        gm, lo, hi = summary(logs)
        ahead = sum(x > 0 for x in logs)
        print(
            f"  {what}: geometric mean of paired ratios {gm:.3f} (95 % {lo:.3f}-{hi:.3f}),"
            f" median ratio {math.exp(st.median(logs)):.3f}, ahead in {ahead}/{len(logs)};"
            f" medians {st.median(a[i] for a, _ in pairs):.0f} vs {st.median(b[i] for _, b in pairs):.0f}"
        )
    wx = [math.log(b[2] / a[2]) for a, b in pairs]
    ry = [math.log(b[1] / a[1]) for a, b in pairs]

    def level(idx):
        """The line's read ratio at equal writer rates, over the rounds idx."""
        x = [wx[i] for i in idx]
        y = [ry[i] for i in idx]
        mx, my = st.mean(x), st.mean(y)
        sxx = sum((v - mx) ** 2 for v in x)
        slope = sum((u - mx) * (v - my) for u, v in zip(x, y)) / sxx if sxx else 0.0
        return math.exp(my - slope * mx), slope

    if st.pstdev(wx) >= 0.08:  # held-rate sets spread 0.04-0.05 (measurement), unlimited 0.09-0.18
        at_level, slope = level(range(len(pairs)))
        rng = random.Random(1)
        boot = sorted(
            level([rng.randrange(len(pairs)) for _ in pairs])[0] for _ in range(10_000)
        )
        print(
            f"  the line's read ratio at equal writer rates (an association; {len(pairs)} rounds,"
            f" slope {slope:.2f}, {sum(x <= 0 for x in wx)} rounds with the writer at or below"
            f" {BASE}'s): {at_level:.3f} (95 % {boot[250]:.3f}-{boot[9_749]:.3f})"
        )
    print(
        f"  writer keys/s medians: {BASE} {st.median(a[2] for a, _ in pairs):.0f},"
        f" {mode} {st.median(b[2] for _, b in pairs):.0f}"
    )
