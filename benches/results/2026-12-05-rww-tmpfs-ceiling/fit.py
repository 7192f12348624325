#!/usr/bin/env python3
"""Medians of a guest-ab.sh output (readwhilewriting at 30,000 gets), ratio to ext4, each
writer's keys per second, and a least-squares line of reads/s over the writer's keys/s fitted
on the kernel's file systems (ext4, tmpfs), with each plugin sample's reads/s divided by the
line's value at its own writer's rate.

Usage: python3 fit.py GUEST_AB_OUTPUT [--fit]
(--fit: the line; only meaningful when the writers ran unlimited, at rates that differ.)
"""
import re
import statistics as st
import sys

GETS = 30000  # the reader's gets per readwhilewriting (guest-ab.sh's --num)
KERNEL = ("ext4", "tmpfs")

samples = {}  # mode -> [(reads/s, writer keys/s)]
fills = {}  # mode -> [fillrandom ops/s]
for line in open(sys.argv[1]):
    f = line.split()
    if not f or not re.fullmatch(r"\d+", f[0]):
        continue
    _, mode, bench, ops, _, keys = f
    if bench == "fillrandom":
        fills.setdefault(mode, []).append(float(ops))
    elif bench == "readwhilewriting":
        reads = float(ops)
        # The writer runs while the reader does its GETS gets: keys / (GETS / reads).
        samples.setdefault(mode, []).append((reads, int(keys) * reads / GETS))

base = st.median(r for r, _ in samples["ext4"])
base_fill = st.median(fills["ext4"])
print("mode    fillrandom (x ext4)   reads/s median (x ext4)  range           writer keys/s median, range")
for mode, s in samples.items():
    reads = [r for r, _ in s]
    wr = [w for _, w in s]
    fill = st.median(fills[mode])
    print(
        f"{mode:6} {fill:8.0f} ({fill / base_fill:.2f})     {st.median(reads):8.0f} ({st.median(reads) / base:.3f})"
        f"         {min(reads):6.0f}-{max(reads):6.0f}   {st.median(wr):6.0f}, {min(wr):.0f}-{max(wr):.0f}"
    )

if "--fit" not in sys.argv[2:]:
    sys.exit(0)
pts = [p for m in KERNEL if m in samples for p in samples[m]]
xs = [w for _, w in pts]
ys = [r for r, _ in pts]
mx, my = st.mean(xs), st.mean(ys)
sxx = sum((x - mx) ** 2 for x in xs)
sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
syy = sum((y - my) ** 2 for y in ys)
slope = sxy / sxx
icpt = my - slope * mx
print(
    f"\nline over {'+'.join(KERNEL)} ({len(pts)} samples, writers {min(xs):.0f}-{max(xs):.0f} keys/s):"
    f" reads/s = {icpt:.0f} {slope:+.3f} x writer keys/s, r = {sxy / (sxx * syy) ** 0.5:.2f}"
)
for mode, s in samples.items():
    if mode in KERNEL:
        continue
    q = [r / (icpt + slope * w) for r, w in s]
    print(f"{mode:6} measured / line at its writer's rate: median {st.median(q):.2f}, samples "
          + " ".join(f"{x:.2f}" for x in q))
