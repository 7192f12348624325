import collections,statistics,sys
d=collections.defaultdict(lambda: collections.defaultdict(list))
order=[]
for line in open(sys.argv[1]):
    if not line.startswith('round'): continue
    head,rest=line.split(':',1); b=head.split()[2]
    if b not in order: order.append(b)
    t=rest.split()
    for i in range(0,len(t),2): d[b][t[i]].append(int(t[i+1]))
print('| benchmark | ' + ' | '.join(order) + ' | ' + ' / '.join(order[::-1]) + ' |')
print('|---|' + '---:|'*(len(order)+1))
for k in d[order[0]]:
    m=[statistics.median(d[b][k]) for b in order]
    rng=['%d (%d–%d)'%(statistics.median(d[b][k]),min(d[b][k]),max(d[b][k])) for b in order]
    print('| %s | %s | %.2f |'%(k,' | '.join(rng), m[-1]/m[0]))
