#!/usr/bin/env python3
"""arc_bench A/B of this directory: per benchmark, items per CPU-second (the
median of 3 repetitions in each run), the median over the runs of each build,
and the hits each build printed."""
import glob, json, os, re, statistics
here = os.path.dirname(os.path.abspath(__file__))
ops, hits = {}, {}
for path in sorted(glob.glob(os.path.join(here, "arc-*-r*.json"))):
    build = re.search(r"arc-(main|new)-r", path).group(1)
    try:
        runs = json.load(open(path))["benchmarks"]
    except ValueError:  # a run still writing
        continue
    for b in runs:
        if b.get("aggregate_name") != "median":
            continue
        name = b["run_name"] + " " + b.get("label", "")
        ops.setdefault((name, build), []).append(b["items_per_second"])
        hits.setdefault((name, build), set()).add(int(b["hits"]))
print("| benchmark | main M items/CPU-s | arcrec | arcrec / main | runs | hits main | hits arcrec |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
for name in sorted({k[0] for k in ops}):
    a, b = statistics.median(ops[(name, "main")]), statistics.median(ops[(name, "new")])
    print("| %s | %.1f | %.1f | %.3f | %d+%d | %s | %s |" % (
        name, a / 1e6, b / 1e6, b / a, len(ops[(name, "main")]), len(ops[(name, "new")]),
        ",".join(map(str, sorted(hits[(name, "main")]))), ",".join(map(str, sorted(hits[(name, "new")])))))
