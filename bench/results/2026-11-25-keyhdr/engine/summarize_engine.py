"""Criterion 4 of the README: per cell, the median over sessions of each
session's median (over its 3 runs) ops per run-thread CPU second, keyhdr / main."""
import csv, glob, os, statistics, sys
root = sys.argv[1] if len(sys.argv) > 1 else '/work/keyhdr-fills/engine/raw'
sess = {}
for f in sorted(glob.glob(os.path.join(root, '*_s*.csv'))):
    b, s = os.path.basename(f)[:-4].rsplit('_s', 1)
    per = {}
    for r in csv.DictReader(open(f)):
        if r['error'] or r['run'] == 'median':
            continue
        cell = (r['workload'], int(r['value_bytes']), float(r['working_set_factor']))
        cpu = float(r['run_cpu_share']) * int(r['threads'])
        per.setdefault(cell, []).append((float(r['ops_per_second']) / cpu, float(r['hit_ratio']),
                                         float(r['ops_per_second']), int(r['bad_values'])))
    for cell, v in per.items():
        sess.setdefault((b, cell), []).append((int(s), statistics.median(x[0] for x in v),
                                               statistics.median(x[1] for x in v),
                                               statistics.median(x[2] for x in v), sum(x[3] for x in v)))
cells = sorted({c for (_, c) in sess})
print('| cell (workload, value B, working set) | main ops/CPU-s (sessions) | keyhdr ops/CPU-s (sessions) | keyhdr / main | hit ratio main / keyhdr | bad values |')
print('| --- | --- | --- | ---: | --- | ---: |')
for c in cells:
    m, k = sess.get(('main', c), []), sess.get(('keyhdr', c), [])
    if not m or not k:
        continue
    mm, km = statistics.median(x[1] for x in m), statistics.median(x[1] for x in k)
    fmt = lambda v: ', '.join('%.0fk' % (x[1] / 1e3) for x in sorted(v))
    print('| %s %d B %.1fx | %.0fk (%s) | %.0fk (%s) | %.3f | %.3f / %.3f | %d |' % (
        c[0], c[1], c[2], mm / 1e3, fmt(m), km / 1e3, fmt(k), km / mm,
        statistics.median(x[2] for x in m), statistics.median(x[2] for x in k),
        sum(x[4] for x in m + k)))
