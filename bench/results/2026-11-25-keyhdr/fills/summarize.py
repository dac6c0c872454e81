import json, glob, statistics, sys, os
root = sys.argv[1] if len(sys.argv) > 1 else '/work/keyhdr-fills'
rows = {}
for f in sorted(glob.glob(os.path.join(root, '*-r*/results.json'))):
    name = os.path.basename(os.path.dirname(f))
    b, r = name.rsplit('-r', 1)
    d = json.load(open(f))
    for fill in d['fills']:
        res = fill['result']
        a = res['after_fill']
        kpm = a['resident'] / (a['rss_bytes'] / 2**20)
        maxrss = max(s['rss_bytes'] for s in res['samples'])
        rows.setdefault((fill['system'], fill['value_bytes'], b), []).append(
            (int(r), a['resident'], a['rss_bytes'] / 2**20, kpm, maxrss / 2**20,
             a.get('live_bytes', 0) / max(a['resident'], 1), a.get('memory_limit_bytes', 0) / 2**20,
             res['read_back']['wrong']))
print('| system | value B | build | round | resident | RSS MiB | keys/MiB RSS | max RSS MiB | live B/key | pages in service MiB | wrong |')
print('| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |')
for (sysname, v, b), rs in sorted(rows.items()):
    for r in sorted(rs):
        print('| %s | %d | %s | %d | %d | %.1f | %.0f | %.1f | %.1f | %.1f | %d |' % ((sysname, v, b) + r))
print()
print('| system | value B | build | fills | median keys/MiB RSS | median resident | median RSS MiB |')
print('| --- | ---: | --- | ---: | ---: | ---: | ---: |')
med = {}
for (sysname, v, b), rs in sorted(rows.items()):
    m = statistics.median(x[3] for x in rs)
    med[(sysname, v, b)] = m
    print('| %s | %d | %s | %d | %.0f | %.0f | %.1f |' % (sysname, v, b, len(rs), m,
          statistics.median(x[1] for x in rs), statistics.median(x[2] for x in rs)))
print()
for v in sorted({k[1] for k in med}):
    m, k = med.get(('furrballs', v, 'main')), med.get(('furrballs', v, 'keyhdr'))
    mc = statistics.median([med[x] for x in med if x[0] == 'memcached' and x[1] == v])
    if m and k:
        print('%d B: keyhdr / main = %.3f (%.0f / %.0f); vs memcached (%.0f): main %.3fx, keyhdr %.3fx' % (v, k / m, k, m, mc, m / mc, k / mc))
