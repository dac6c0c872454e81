import glob, importlib.util, os, re, statistics
spec = importlib.util.spec_from_file_location("hp", "/work/main/bench/results/2026-11-24-hugepages/tables.py")
hp = importlib.util.module_from_spec(spec); spec.loader.exec_module(hp)
data = {}
for p in glob.glob("bench/results/2026-11-25-slimentry/g7-extra/raw/rot_*_s*.csv"):
    m = re.match(r"rot_(.+)_s(\d+)\.csv$", os.path.basename(p))
    data.setdefault(m.group(1), {})[int(m.group(2))] = hp.session_figures(p)
common = sorted(set(data["main"]) & set(data["slim"]))
cell = ("C", 1, 0.1)
for metric in ("cpu", "ops", "get"):
    r = [data["slim"][s][cell][metric] / data["main"][s][cell][metric] for s in common]
    print(metric, len(common), "sessions, slim/main median", round(statistics.median(r), 3), "range", round(min(r), 3), round(max(r), 3))
print("F/absl cpu main", round(statistics.median(data["main"][s][cell]["cpu"] for s in common), 3), "slim", round(statistics.median(data["slim"][s][cell]["cpu"] for s in common), 3))
