import sys, statistics, collections
d = collections.defaultdict(lambda: collections.defaultdict(list)); order=[]; benches=[]
for f in sys.argv[1:]:
    for line in open(f):
        p=line.split()
        if not p or '=' not in line: continue
        if p[0] not in order: order.append(p[0])
        for kv in p[1:]:
            k,v=kv.split('=')
            if k not in benches: benches.append(k)
            if v: d[p[0]][k].append(float(v))
a,b=order[0],order[1]
print(f'| benchmark | {a} | {b} | {b} / {a} |'); print('|---|---:|---:|---:|')
for k in benches:
    ma=statistics.median(d[a][k]); mb=statistics.median(d[b][k])
    print(f'| {k} | {ma:,.0f} ({min(d[a][k]):,.0f}–{max(d[a][k]):,.0f}) | {mb:,.0f} ({min(d[b][k]):,.0f}–{max(d[b][k]):,.0f}) | {mb/ma:.2f} |')
print('runs', {t: len(d[t][benches[0]]) for t in order})
