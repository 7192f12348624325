import sys,statistics as st,collections
d=collections.defaultdict(lambda: collections.defaultdict(list)); order=[]
for l in open(sys.argv[1]):
    f=l.split();
    if not f or f[0].startswith("#"): continue
    if f[0] not in order: order.append(f[0])
    for kv in f[1:]:
        k,v=kv.split('=')
        if v: d[f[0]][k].append(float(v))
benches=list(d[order[0]].keys())
ref=sys.argv[2] if len(sys.argv)>2 else order[0]
print("%-12s"%"mode"+"".join("%24s"%b for b in benches))
for m in order:
    row="%-12s"%m
    for b in benches:
        x=d[m][b]; md=st.median(x) if x else 0; r=md/st.median(d[ref][b]) if d[ref][b] else 0
        row+="%24s"%("%d(%.2f)n%d"%(md,r,len(x)))
    print(row)
