"""Per-round new/main ratios of cpu_ab's two runs pooled: CPU per op and per message."""
import json, statistics, collections, sys
ratios = collections.defaultdict(lambda: collections.defaultdict(list))
for i, f in enumerate(sys.argv[1:]):
    rows = collections.defaultdict(dict)
    for line in open(f):
        r = json.loads(line)
        rows[(r["round"], r["cell"])][r["config"]] = r
    for (rnd, cell), c in rows.items():
        if "main" in c and "new" in c:
            ratios[cell]["op"].append(c["new"]["us_per_op"] / c["main"]["us_per_op"])
            if c["main"].get("us_per_msg"):
                ratios[cell]["msg"].append(c["new"]["us_per_msg"] / c["main"]["us_per_msg"])
for cell, d in sorted(ratios.items()):
    for k, v in d.items():
        print("%-20s per %-3s rounds %2d  median ratio %.2f  [%.2f-%.2f]"
              % (cell, k, len(v), statistics.median(v), min(v), max(v)))
