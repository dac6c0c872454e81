#!/usr/bin/env python3
"""From the malloc_info a fill's server wrote at its end (server.log of
starve_fill.py --gdb), the largest thread arena: bytes mapped (current),
its peak (max) and how much of it is free; per build, how many fills ended
with an arena above 1 MiB."""
import glob, re, sys, statistics
rows = {}
for log in sorted(glob.glob(sys.argv[1] + "/**/server.log", recursive=True)):
    text = open(log).read()
    m = text.rfind("<malloc")
    if m < 0:
        continue
    best = None
    for heap in re.finditer(r'<heap nr="(\d+)">(.*?)</heap>', text[m:], re.S):
        body = heap.group(2)
        cur = int(re.search(r'<system type="current" size="(\d+)"', body).group(1))
        mx = int(re.search(r'<system type="max" size="(\d+)"', body).group(1))
        free = sum(int(x) for x in re.findall(r'<total type="(?:fast|rest)" count="\d+" size="(\d+)"', body))
        if best is None or cur > best[1]:
            best = (int(heap.group(1)), cur, mx, free)
    m = re.search(r"/(\w+)-r\d+/server.log$", log)
    build = m.group(1) if m else "?"
    rows.setdefault(build, []).append(best)
    print("%-50s arena %2d: %5.2f MiB mapped (peak %5.2f), %5.2f free" % (
        log, best[0], best[1] / 2**20, best[2] / 2**20, best[3] / 2**20))
for b, v in sorted(rows.items()):
    print("%-10s fills %3d, largest arena > 1 MiB at the end: %d, peak > 1 MiB: %d, median peak %.2f MiB" % (
        b, len(v), sum(x[1] > 2**20 for x in v), sum(x[2] > 2**20 for x in v),
        statistics.median(x[2] / 2**20 for x in v)))
