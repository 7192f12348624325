#!/usr/bin/env python3
"""Medians per mode of an `ab.sh` output (../2026-12-05-rww-writer-rate/ab.sh), ratio to `local`:
fillrandom, readwhilewriting's reads/s (and range), its writer's keys/s, and the tables ruled
out by their filter per get (the tree's depth as the reader meets it).

Usage: python3 host.py AB_OUTPUT
"""
import re
import statistics as st
import sys

LINE = re.compile(
    r"^\d+ (\S+)\s+fillrandom=\s*(\d+) reads/s=\s*(\d+) writer_keys/s=\s*(\d+) probes/get=([\d.]+)"
)
runs = {}  # mode -> [(fillrandom, reads/s, writer keys/s, probes/get)]
for line in open(sys.argv[1]):
    m = LINE.match(line)
    if m:
        runs.setdefault(m.group(1), []).append(tuple(float(x) for x in m.groups()[1:]))

base_fill = st.median(r[0] for r in runs["local"])
base_reads = st.median(r[1] for r in runs["local"])
for mode, rs in runs.items():
    fill, reads, writer, probes = ([r[i] for r in rs] for i in range(4))
    print(
        f"{mode:8} fillrandom {st.median(fill):7.0f} ({st.median(fill) / base_fill:.2f})"
        f"  reads/s {st.median(reads):7.0f} ({st.median(reads) / base_reads:.3f}) {min(reads):.0f}-{max(reads):.0f}"
        f"  writer keys/s {st.median(writer):7.0f} {min(writer):.0f}-{max(writer):.0f}"
        f"  filters/get {st.median(probes):.2f}"
    )
