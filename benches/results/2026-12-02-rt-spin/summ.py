import sys, statistics, collections
d=collections.defaultdict(lambda: collections.defaultdict(list))
order=[]
for f in sys.argv[1:]:
    for line in open(f):
        p=line.split()
        if not p or p[0].startswith('=='): continue
        v=p[0]
        if v not in order: order.append(v)
        for k,x in zip(p[1::2],p[2::2]): d[v][k].append(float(x))
keys=['fillseq','fillrandom','overwrite','readrandom','readseq','readwhilewriting','seekrandom','deleterandom']
print('%-8s'%'variant'+''.join('%13s'%k[:12] for k in keys)+'  n')
for v in order:
    print('%-8s'%v+''.join('%13.0f'%statistics.median(d[v][k]) if d[v][k] else '%13s'%'-' for k in keys)+'  %d'%len(d[v]['fillseq']))
