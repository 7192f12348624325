#!/usr/bin/env python3
"""Medians of an alternated kv-bench A/B (kvb-whole.sh): per label, kv-demo's ops/s and its ratio
to the peer of the same run. Usage: whole-med.py DIR LABEL..."""
import json, glob, statistics as st, sys
d = sys.argv[1]
labels = sys.argv[2:]
benches = ["fillseq","fillrandom","overwrite","readrandom","readseq","readwhilewriting","seekrandom","deleterandom"]
pairs = [("kv-demo","rocksdb-direct"),("kv-demo-pagecache","rocksdb"),("kv-demo-pagecache","fjall")]
rows = {}
for l in labels:
    for f in sorted(glob.glob(f"{d}/{l}-*/results.json")):
        r = json.load(open(f))
        v = {(s["mode"], s["bench"]): s["ops_per_sec"] for s in r["samples"]}
        for b in benches:
            for a, p in pairs:
                if (a, b) in v and (p, b) in v:
                    rows.setdefault((l, b, a, p), []).append((v[(a, b)], v[(a, b)] / v[(p, b)]))
print("| benchmark | pairing | " + " | ".join(f"{l} ratio (min–max)" for l in labels) + " | " + " / ".join(reversed(labels[:2])) + " (the store's ops/s, medians) |")
print("|---|---|" + "---:|" * (len(labels) + 1))
for b in benches:
    for a, p in pairs:
        cells = []
        meds = []
        for l in labels:
            x = rows.get((l, b, a, p), [])
            if not x:
                cells.append("–"); meds.append(None); continue
            rs = [y[1] for y in x]
            cells.append(f"{st.median(rs):.2f} ({min(rs):.2f}–{max(rs):.2f})")
            meds.append(st.median([y[0] for y in x]))
        q = f"{meds[1]/meds[0]:.2f}" if len(meds) > 1 and meds[0] and meds[1] else "–"
        print(f"| {b} | {a} / {p} | " + " | ".join(cells) + f" | {q} |")
