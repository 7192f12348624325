import re,collections,statistics,sys
d=collections.defaultdict(list); cur=None
for line in open(sys.argv[1]):
    m=re.match(r'== round (\d+) (\w+)',line)
    if m: cur=m.group(2); continue
    m=re.match(r'\[1/1\] (\w+)\s+(qd\d+)\s+ziob\s+([\d.]+)k IOPS',line)
    if m: d[(cur,m.group(1),m.group(2))].append(float(m.group(3)))
for w in ['nop','yield']:
    for q in ['qd1','qd32']:
        b=sorted(d[('base',w,q)]); f=sorted(d[('final',w,q)])
        print(w,q,'base',b,'final',f,'median ratio %.3f'%(statistics.median(f)/statistics.median(b)))
