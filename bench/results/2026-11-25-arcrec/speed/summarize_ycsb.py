#!/usr/bin/env python3
"""ycsb_bench A/B of this directory (the --csv runs): per cell, ops per
run-thread CPU second (ops_per_second / run_cpu_share) of each of the 3
runs of a session, the session's median, then the median over the sessions
of each build; also hit ratios."""
import csv, glob, os, re, statistics
here = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) if False else os.path.dirname(os.path.abspath(__file__))
sessions = {}
hits = {}
for path in sorted(glob.glob(os.path.join(here, "ycsbcsv-*-r*.csv"))):
    build = re.search(r"ycsbcsv-(main|new)-r", path).group(1)
    per = {}
    for row in csv.DictReader(open(path)):
        if row["run"] == "median" or row["error"]:
            continue
        cell = (row["backend"], row["workload"], row["working_set_factor"])
        per.setdefault(cell, []).append(float(row["ops_per_second"]) / float(row["run_cpu_share"]))
        hits.setdefault((cell, build), set()).add(row["hit_ratio"])
    for cell, v in per.items():
        sessions.setdefault((cell, build), []).append(statistics.median(v))
print("| backend | workload | working set | main M ops/CPU-s | arcrec | arcrec / main | sessions | hit ratio main | arcrec |")
print("| --- | --- | ---: | ---: | ---: | ---: | ---: | --- | --- |")
for cell in sorted({k[0] for k in sessions}):
    a, b = statistics.median(sessions[(cell, "main")]), statistics.median(sessions[(cell, "new")])
    print("| %s | %s | %s | %.2f | %.2f | %.3f | %d+%d | %s | %s |" % (cell[0], cell[1], cell[2], a / 1e6, b / 1e6, b / a,
          len(sessions[(cell, "main")]), len(sessions[(cell, "new")]),
          ",".join(sorted(hits[(cell, "main")])), ",".join(sorted(hits[(cell, "new")]))))
