import sys, statistics, collections
d = collections.defaultdict(lambda: collections.defaultdict(list))
order = []
for f in sys.argv[1:]:
    for line in open(f):
        p = line.split()
        if not p or p[0] == 'done': continue
        if p[0] not in order: order.append(p[0])
        for kv in p[1:]:
            k, v = kv.split('=')
            if v: d[p[0]][k].append(float(v))
benches = ['fillrandom','overwrite','readrandom','readseq','readwhilewriting']
print('| benchmark | ' + ' | '.join(order) + ' | new-pc/base-pc | new-pc/local | base-pc/local | new-direct/base-direct |')
print('|---|' + '---:|'*(len(order)+4))
for b in benches:
    m = {t: statistics.median(d[t][b]) for t in order if d[t][b]}
    cells = [f"{m[t]:,.0f}" for t in order]
    r = lambda a, c: f"{m[a]/m[c]:.2f}" if a in m and c in m else '-'
    print(f"| {b} | " + ' | '.join(cells) + f" | {r('new-pc','base-pc')} | {r('new-pc','local')} | {r('base-pc','local')} | {r('new-direct','base-direct')} |")
n = {t: len(d[t]['readrandom']) for t in order}
print('runs:', n)
