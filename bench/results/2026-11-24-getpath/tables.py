#!/usr/bin/env python3
"""The tables of docs/engine_bench.md, "After the drain cut", from raw/.

    python3 tables.py [FINAL]   # FINAL: the binary compared with main (drain1)
"""
import csv, os, statistics
from collections import defaultdict
R = os.path.join(os.path.dirname(os.path.abspath(__file__)), "raw")
def rows(tag):
    out = defaultdict(dict)
    for r in csv.DictReader(open(f"{R}/{tag}.csv")):
        if r["run"] == "median": continue
        k = (r["workload"], int(r["threads"]), float(r["working_set_factor"]))
        out[(k, r["run"])][r["backend"]] = r
    return out
def cell_metrics(tag):
    """per cell: median over runs of F/absl ops/CPU-s, F/absl ops/s, F get p50, absl get p50, F set p50, absl set p50, F hit"""
    by = rows(tag); cells = defaultdict(lambda: defaultdict(list))
    for (k, run), b in by.items():
        f, a = b["furrball"], b["absl_mutex"]
        cpu = lambda x: float(x["ops_per_second"]) / max(float(x["run_cpu_share"]), 1e-9)
        c = cells[k]
        c["cpu"].append(cpu(f) / cpu(a)); c["ops"].append(float(f["ops_per_second"]) / float(a["ops_per_second"]))
        c["fg"].append(float(f["get_p50_ns"])); c["ag"].append(float(a["get_p50_ns"]))
        c["fs"].append(float(f["set_p50_ns"])); c["as"].append(float(a["set_p50_ns"]))
        c["hit"].append(float(f["hit_ratio"])); c["share"].append(float(f["run_cpu_share"]))
    return {k: {m: statistics.median(v) for m, v in d.items()} for k, d in cells.items()}
def sessions(bins, S):
    return [s for s in S if all(os.path.exists(f"{R}/rot_{b}_s{s}.csv") for b in bins)]
def pair_ratio(a, b, S, m="cpu"):
    S = sessions([a, b], S)
    da = [cell_metrics(f"rot_{a}_s{s}") for s in S]; db = [cell_metrics(f"rot_{b}_s{s}") for s in S]
    return {k: statistics.median(y[k][m] / x[k][m] for x, y in zip(da, db)) for k in da[0]}, len(S)
def med(b, S, m):
    S = sessions([b], S); d = [cell_metrics(f"rot_{b}_s{s}") for s in S]
    return {k: statistics.median(x[k][m] for x in d) for k in d[0]}
label = lambda k: f"{k[0]}, {k[1]} thread{'s' if k[1] > 1 else ''}, {k[2]:g}x"
ALL = range(1, 23)
changes = [("drain", "main", "drain1", list(range(1, 7)) + list(range(13, 23))),
           ("one-op Set", "drain1", "set", range(1, 13)),
           ("buffers (after Set)", "set", "shard", range(1, 13)),
           ("buffers alone", "drain1", "shardonly", range(13, 23)),
           ("entry prefetch", "shard", "pf", range(1, 7)),
           ("A/A", "main", "mainB", range(4, 7))]
res = [(n,) + pair_ratio(a, b, S) for n, a, b, S in changes]
resg = [(n,) + pair_ratio(a, b, S, "fg") for n, a, b, S in changes]
keys = sorted(res[0][1])
print("| cell (64 B, Zipfian) | " + " | ".join(f"{n} ({c} sessions)" for n, _, c in res) + " |")
print("| --- |" + " ---: |" * len(res))
for k in keys:
    print(f"| {label(k)} | " + " | ".join(f"{r[k]:.2f} ({g[k]:.2f})" for (_, r, _), (_, g, _) in zip(res, resg)) + " |")
print()
# final table: main vs FINAL over sessions 13-22
import sys
FINAL = sys.argv[1] if len(sys.argv) > 1 else "drain1"
S = list(range(13, 23))
mm = {m: med("main", S, m) for m in ("cpu", "ops", "fg", "ag", "fs", "as", "hit")}
ff = {m: med(FINAL, S, m) for m in ("cpu", "ops", "fg", "ag", "fs", "as", "hit")}
print(f"final={FINAL} sessions={len(sessions(['main', FINAL], S))}")
print("| cell (64 B, Zipfian) | ops/s F÷absl, main → now | ops/CPU-s F÷absl, main → now | FurrBall Get p50 ns, main → now (absl) | FurrBall Set p50 ns, main → now (absl) | FurrBall hit % |")
print("| --- | --- | --- | --- | --- | --- |")
for k in keys:
    sp = "-" if k[0] == "C" else f"{mm['fs'][k]:.0f} → {ff['fs'][k]:.0f} ({ff['as'][k]:.0f})"
    print(f"| {label(k)} | {mm['ops'][k]:.2f} → {ff['ops'][k]:.2f} | {mm['cpu'][k]:.2f} → {ff['cpu'][k]:.2f} | {mm['fg'][k]:.0f} → {ff['fg'][k]:.0f} ({ff['ag'][k]:.0f}) | {sp} | {100*ff['hit'][k]:.1f} |")
print()
S2 = sessions(["main", FINAL], list(range(13, 23)))
dm = [cell_metrics(f"rot_main_s{s}") for s in S2]; dn = [cell_metrics(f"rot_{FINAL}_s{s}") for s in S2]
def rng(d, k, m): v = sorted(x[k][m] for x in d); return f"{statistics.median(v):.2f} [{v[0]:.2f}–{v[-1]:.2f}]"
print("| cell | ops/s F÷absl main | now | ops/CPU-s F÷absl main | now | paired now÷main ops/CPU-s |")
for k in keys:
    pr = statistics.median(y[k]['cpu'] / x[k]['cpu'] for x, y in zip(dm, dn))
    print(f"| {label(k)} | {rng(dm,k,'ops')} | {rng(dn,k,'ops')} | {rng(dm,k,'cpu')} | {rng(dn,k,'cpu')} | {pr:.2f} |")
