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
# Residual spread, and Student's t at 97.5 % for the line's n - 2 degrees of freedom.
resid = (syy - sxy * sxy / sxx) / (len(xs) - 2)
T975 = {6: 2.447, 8: 2.306, 10: 2.228, 12: 2.179, 14: 2.145, 16: 2.120, 18: 2.101, 20: 2.086}
t = T975.get(len(xs) - 2, 2.0)
for mode, s in samples.items():
    if mode in KERNEL:
        continue
    q = [r / (icpt + slope * w) for r, w in s]
    print(f"{mode:6} measured / line at its writer's rate: median {st.median(q):.2f}, samples "
          + " ".join(f"{x:.2f}" for x in q))
    x0 = st.median(w for _, w in s)
    y0 = icpt + slope * x0
    lev = 1 / len(xs) + (x0 - mx) ** 2 / sxx
    ci = t * (resid * lev) ** 0.5
    pi = t * (resid * (1 + lev)) ** 0.5
    print(
        f"{mode:6} the line at its median writer rate ({x0:.0f} keys/s): {y0:.0f} reads/s = {y0 / base:.2f}x ext4;"
        f" 95 % confidence interval of the line {(y0 - ci) / base:.2f}-{(y0 + ci) / base:.2f}x,"
        f" prediction interval of one run {(y0 - pi) / base:.2f}-{(y0 + pi) / base:.2f}x"
    )
