# estimate.py: per-key CPU of the guest's 1 KiB readwhilewriting threads by object (the guest profiles
# of ROCKSDB-BENCH §3o, plugin f256129: r1, r2), and a rough fair-share estimate of the reader's
# ratio to ext4's, also with parts of the plugin's cost taken away.
# Run in the directory guest-profile.sh wrote (../2026-12-05-plugin-warm-first/guest-profile.sh: r1/,
# r2/ with T.script = perf script -F tid,time,comm and T.syms = -F tid,time,ip,sym,dso); the perf
# data is not committed. 1 sample = 1 ms of CPU.
import re, collections, sys
runs = {  # (dir, target): (window start, end, keys written, reads/s)
 ('r1','ext4'):(7.58,12.34,36120,6301), ('r1','zbd'):(21.03,25.29,45192,7030),
 ('r2','zbd'):(11.91,17.29,59390,5577), ('r2','ext4'):(23.04,26.97,29609,7626)}
def load(d,t,s,e):
    comm={}
    for line in open(f'{d}/{t}.script'):
        p=line.split()
        if len(p)>=3: comm[p[-2]]=' '.join(p[:-2])
    c=collections.defaultdict(collections.Counter)
    for line in open(f'{d}/{t}.syms'):
        m=re.match(r"\s*(\d+)\s+([\d.]+):\s+[0-9a-f]+\s+(.*?)\s+\((.*)\)\s*$",line)
        if not m or not (s<=float(m.group(2))<=e): continue
        dso=m.group(4).split('/')[-1]
        dso='kernel' if dso.startswith('[') else ('plugin' if 'plugin' in dso or 'ziob' in dso else dso)
        c[m.group(1)][dso]+=1
    th=collections.defaultdict(collections.Counter)
    for tid,cc in c.items(): th[(comm.get(tid,'?'),tid)]+=cc
    return th
# Model: on two CPUs kept busy, the reader and the writer get equal CPU (checked below: reader vs
# writer samples), and the background threads (compaction, flush, the ZIOB core) the rest, B per
# key. With the writer at P per put: 2 = R + W + B*W/P and R = W, so the reader's share is
# 2 / (2 + B/P); at equal CPU per get the reader's ratio to ext4's is (2 + B_e/P_e) / (2 + B/P).
res = {}
for (d,t),(s,e,keys,rps) in runs.items():
    th=load(d,t,s,e)
    dbb=sorted([k for k in th if k[0].startswith('db_bench')], key=lambda k:-sum(th[k].values()))[:2]
    # writer = the db_bench thread with fewer kernel+librocksdb... identify by per-op: the writer is the one named in guest-profile.txt; take the one whose tid is smaller
    w,r = sorted(dbb, key=lambda k:int(k[1]))
    bg=[k for k in th if k[0].startswith('rocksdb:') or k[0].startswith('ziob-core')]
    def us(cnt): return 1000.0*cnt/keys
    W=sum(th[w].values()); B=sum(sum(th[k].values()) for k in bg)
    core=sum(sum(th[k].values()) for k in bg if k[0].startswith('ziob-core'))
    bgrocks=sum(th[k][o] for k in bg if not k[0].startswith('ziob-core') for o in th[k] if o not in ('kernel','plugin'))
    bgfs=B-core-bgrocks
    wrocks=sum(v for o,v in th[w].items() if o not in ('kernel','plugin'))
    R=sum(th[r].values())
    get_us = 1000.0 * R / (rps * (e - s))   # reader CPU per get over the window
    res[(d,t)] = dict(P=us(W), B=us(B), Pr=us(wrocks), Br=us(bgrocks), core=us(core), R=R, W=W, get=get_us)
    print(f"{d} {t:4s} reader {R} / writer {W} samples ({R/W:.2f}), {get_us:.0f} us per get; reads/s {rps} keys {keys}: writer {us(W):.1f} us/put (RocksDB+libc {us(wrocks):.1f}); background {us(B):.1f} us/key = RocksDB+libc {us(bgrocks):.1f} + kernel/plugin {us(bgfs):.1f} + ZIOB core {us(core):.1f}; B/P {B/W:.3f}")

# The estimate assumes reader CPU = writer CPU (measured: the ratio above) and leaves out sleeps,
# stalls and idle time. "Costing nothing" takes away the kernel's and the plugin's samples on the
# writer and background threads and the ZIOB core; the plugin's copies through libc's memcpy stay.
for d in ('r1','r2'):
    e, z = res[(d,'ext4')], res[(d,'zbd')]
    base = 2 + e['B']/e['P']
    per_get = e['get'] / z['get']
    def est(share): return f"{share:.2f} x per-get {per_get:.2f} = {share*per_get:.2f}"
    print(f"{d}: measured zbd/ext4 {runs[(d,'zbd')][3]/runs[(d,'ext4')][3]:.2f}; estimate: CPU share {est(base/(2+z['B']/z['P']))};"
          f" without the ZIOB core {est(base/(2+(z['B']-z['core'])/z['P']))};"
          f" the file system costing nothing {est(base/(2+z['Br']/z['Pr']))}")
