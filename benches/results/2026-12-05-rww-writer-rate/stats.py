# stats.py DIR [VALUE_SIZE]: per readwhilewriting process of a rocksdb-bench --out DIR (VALUE_SIZE default 1024, 100,000 reads),
# reads/s, the writer's keys/s, SST filters consulted and skipped per get, writer stall, compaction
# MB/s and CPU per MB, time per memtable flush, table and MANIFEST sync P50/P95; then per target the
# correlation of reads/s with the filters per get. (raw.tar.xz holds the bench-*/ .out files.)
import glob, re, statistics, sys, collections
rows = collections.defaultdict(list)
vs = sys.argv[2] if len(sys.argv) > 2 else "1024"
for f in sorted(glob.glob(f"{sys.argv[1]}/*-v{vs}-r*-readwhilewriting.out")):
    s = open(f).read()
    def c(n):
        m = re.search(re.escape(n) + r' COUNT : (\d+)', s); return int(m.group(1)) if m else 0
    def h(n):
        m = re.search(re.escape(n) + r' P50 : ([\d.]+) P95 : ([\d.]+) P99 : [\d.]+ P100 : [\d.]+ COUNT : (\d+) SUM : (\d+)', s)
        return tuple(float(x) for x in m.groups()) if m else (0, 0, 0, 0)
    target = re.sub(r'-v\d+-r\d+-readwhilewriting.out$', '', f.split('/')[-1])
    ops = float(re.search(r'^readwhilewriting\s*:\s*[\d.]+ micros/op (\d+)', s, re.M).group(1))
    probes = c('rocksdb.bloom.filter.useful') / 1e5
    ct, cc, fl, ts, ms = (h('rocksdb.compaction.times.micros'), h('rocksdb.compaction.times.cpu_micros'),
                          h('rocksdb.db.flush.micros'), h('rocksdb.table.sync.micros'), h('rocksdb.manifest.file.sync.micros'))
    wmb = c('rocksdb.compact.write.bytes') / 1e6
    bcmiss = c('rocksdb.block.cache.data.miss')
    rows[target].append((ops, probes))
    print(f"{f.split('/')[-1]:45s} reads/s {ops:7.0f} writer keys/s {c('rocksdb.number.keys.written')*ops/1e5:7.0f} "
          f"filters/get {probes:.2f} block-cache data misses {bcmiss} stall {c('rocksdb.stall.micros')/1e3:4.0f} ms | compaction {wmb/(ct[3]/1e6 or 1):4.0f} MB/s "
          f"{cc[3]/1e3/(wmb or 1):.2f} ms CPU/MB | flush {fl[3]/1e3/(fl[2] or 1):4.1f} ms each | "
          f"table sync {ts[0]/1e3:.1f}/{ts[1]/1e3:.1f} ms | MANIFEST sync {ms[0]/1e3:.2f}/{ms[1]/1e3:.2f} ms")
for t, v in rows.items():
    if len(v) > 2:
        print(f"{t}: correlation of reads/s with filters per get {statistics.correlation([a for a, _ in v], [b for _, b in v]):.2f}")
