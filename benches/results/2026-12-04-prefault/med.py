#!/usr/bin/env python3
"""Medians (min-max) per variant over the given A/B files (lines `round N VARIANT: name value ...`)."""
import re, statistics as st, sys
d = {}
for f in sys.argv[1:]:
    for line in open(f):
        m = re.match(r'round \d+ (\S+): (.*)', line)
        if not m:
            continue
        v, toks = m.group(1), m.group(2).split()
        for k, x in zip(toks[0::2], toks[1::2]):
            if k == 'cpu_s':
                continue
            try:
                d.setdefault(v, {}).setdefault(k, []).append(float(x))
            except ValueError:
                pass
vs = list(d)
print('| benchmark | ' + ' | '.join(vs) + ' | ' + ' | '.join(f'{v} / {vs[0]}' for v in vs[1:]) + ' |')
print('|---|' + '---:|' * (2 * len(vs) - 1))
for k in d[vs[0]]:
    meds = [st.median(d[v][k]) for v in vs]
    cells = [f'{st.median(d[v][k]):,.0f} ({min(d[v][k]):,.0f}–{max(d[v][k]):,.0f})' for v in vs]
    print(f'| {k} | ' + ' | '.join(cells) + ' | ' + ' | '.join(f'{m / meds[0]:.2f}' for m in meds[1:]) + ' |')
print('rounds:', {v: len(d[v]['fillseq']) for v in vs})
