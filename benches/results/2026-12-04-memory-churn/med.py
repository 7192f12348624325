import re,statistics,collections,sys
d=collections.OrderedDict()
for l in open(sys.argv[1]):
    m=re.match(r'round \d+ (\S+): (.*)',l)
    if not m: continue
    k=m.group(1); t=m.group(2).split(); d.setdefault(k,collections.OrderedDict())
    for i in range(0,len(t)-1,2):
        v=t[i+1]; v=sum(map(float,v.split('+'))) if '+' in v else float(v)
        d[k].setdefault(t[i],[]).append(v)
names=list(d); base=names[0]
print('%-17s'%'bench'+''.join('%22s'%n for n in names)+''.join('%9s'%(n+'/'+base)[:9] for n in names[1:]))
for b in d[base]:
    meds=[statistics.median(d[n][b]) for n in names]
    rng=[(min(d[n][b]),max(d[n][b])) for n in names]
    print('%-17s'%b+''.join('%22s'%('%.0f (%.0f-%.0f)'%(m,r[0],r[1]) if m>100 else '%.2f'%m) for m,r in zip(meds,rng))+''.join('%9.2f'%(m/meds[0]) for m in meds[1:]))
