#!/usr/bin/env python3
"""Turns ycsb_bench's CSV into the Results tables of docs/engine_bench.md.

    python3 bench/engine/summarize.py engine_bench.csv [--reference=furrball]

Reads the CSV's median rows (one per backend and configuration) and prints
markdown: per workload, every backend's medians; then, per metric, the
reference backend's value divided by each peer's, one row per configuration;
then the geometric mean of each ratio over groups of cells. Every ratio is
reference / peer as measured, so above 1 means the reference has more of it:
better for ops/s, hit ratio and memory efficiency, worse for latencies.
"""
import argparse
import csv
import math
import sys
from collections import defaultdict

WORKLOAD_TITLES = {
    "A": "YCSB-A (50% read, 50% update)",
    "B": "YCSB-B (95% read, 5% update)",
    "C": "YCSB-C (100% read, read-through fill on a miss)",
    "F": "YCSB-F (50% read, 50% read-modify-write)",
}

# (column, title, higher_is_better)
RATIO_METRICS = [
    ("ops_per_second", "throughput (ops/s)", True),
    ("ops_per_cpu_second", "CPU-normalized throughput (ops per run-thread CPU second)", True),
    ("get_p50_ns", "Get p50", False),
    ("get_p99_ns", "Get p99", False),
    ("set_p50_ns", "Set p50", False),
    ("set_p99_ns", "Set p99", False),
    ("hit_ratio", "hit ratio", True),
    ("memory_efficiency", "memory efficiency (live value bytes / RSS growth)", True),
]


def config_key(row):
    return (row["distribution"], int(row["value_bytes"]), int(row["threads"]),
            float(row["working_set_factor"]))


def config_label(key):
    dist, value, threads, ws = key
    return f"{'zipf' if dist == 'zipfian' else 'unif'} {value} B {threads}t {ws:g}x"


def ops(v):
    return f"{v / 1e6:.2f}M" if v >= 1e6 else f"{v / 1e3:.0f}K"


def num(v):
    return f"{int(v):,}"


def ratio_value(ref, peer, column):
    a, b = float(ref[column]), float(peer[column])
    if column.startswith("set_") and (int(ref["sets"]) == 0 or int(peer["sets"]) == 0):
        return None  # no timed Sets (C on an unbounded map)
    if a <= 0 or b <= 0:
        return None
    return a / b


def fmt_ratio(r):
    return "-" if r is None else f"{r:.2f}"


def geomean(values):
    values = [v for v in values if v is not None]
    if not values:
        return None
    return math.exp(sum(math.log(v) for v in values) / len(values))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv")
    parser.add_argument("--reference", default="furrball")
    args = parser.parse_args()

    medians = {}  # (workload, config) -> backend -> row
    per_cpu = defaultdict(list)  # (workload, config, backend) -> [ops/CPU-s]
    backends = []
    failed = []
    with open(args.csv, newline="") as f:
        for row in csv.DictReader(f):
            if row["error"]:
                failed.append(row)
            if row["run"] != "median":
                if not row["error"] and float(row["run_cpu_share"]) > 0:
                    per_cpu[(row["workload"], config_key(row), row["backend"])].append(
                        float(row["ops_per_second"]) / float(row["run_cpu_share"]))
                continue
            if row["backend"] not in backends:
                backends.append(row["backend"])
            medians.setdefault((row["workload"], config_key(row)), {})[row["backend"]] = row
    for (w, c), cell in medians.items():
        for b, row in cell.items():
            values = sorted(per_cpu[(w, c, b)])
            n = len(values)
            row["ops_per_cpu_second"] = (
                0 if n == 0 else values[n // 2] if n % 2 else (values[n // 2 - 1] + values[n // 2]) / 2)
    if args.reference not in backends:
        sys.exit(f"no median rows for {args.reference}")
    peers = [b for b in backends if b != args.reference]
    workloads = sorted({w for w, _ in medians})
    configs = sorted({c for _, c in medians}, key=lambda k: (k[0] != "zipfian", k[1], k[2], k[3]))
    out = []

    out.append("### Medians\n")
    out.append("Configuration = distribution, value size, client threads, working set "
               "over the budget. ops/CPU-s = each run's ops/s divided by its cpu share "
               "(the run threads' CPU time / (threads × wall)), median over runs: the "
               "throughput per CPU second the client threads actually got. RSS Δ = VmRSS "
               "growth of the cell's process; mem eff = live value bytes / RSS Δ.\n")
    for w in workloads:
        out.append(f"#### {WORKLOAD_TITLES.get(w, w)}\n")
        out.append("| configuration | backend | ops/s | ops/CPU-s | get p50 | get p99 | set p50 "
                   "| set p99 | hit % | RSS Δ MiB | mem eff | cpu % |")
        out.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for c in configs:
            cell = medians.get((w, c), {})
            for b in backends:
                r = cell.get(b)
                if r is None:
                    continue
                has_sets = int(r["sets"]) > 0
                out.append("| {} | {} | {} | {} | {} | {} | {} | {} | {:.1f} | {:.1f} | {:.2f} | {:.0f} |".format(
                    config_label(c), b, ops(float(r["ops_per_second"])),
                    ops(float(r["ops_per_cpu_second"])),
                    num(r["get_p50_ns"]), num(r["get_p99_ns"]),
                    num(r["set_p50_ns"]) if has_sets else "-",
                    num(r["set_p99_ns"]) if has_sets else "-",
                    100 * float(r["hit_ratio"]),
                    int(r["rss_growth_bytes"]) / (1 << 20),
                    float(r["memory_efficiency"]),
                    100 * float(r["run_cpu_share"])))
        out.append("")

    out.append(f"### Ratios {args.reference} / peer, per cell\n")
    out.append("Columns are workload:peer (lru = rocksdb_lru, hcc = rocksdb_hcc, absl = "
               "absl_mutex). A ratio above 1 means FurrBall has more of the metric.\n")
    short = {"absl_mutex": "absl", "rocksdb_lru": "lru", "rocksdb_hcc": "hcc"}
    ratios = defaultdict(list)  # (column, peer, bucket) -> [ratio]
    for column, title, better_high in RATIO_METRICS:
        out.append(f"#### {title}: {args.reference} / peer "
                   f"({'above' if better_high else 'below'} 1 = {args.reference} better)\n")
        head = ["configuration"] + [f"{w}:{short.get(p, p)}" for w in workloads for p in peers]
        out.append("| " + " | ".join(head) + " |")
        out.append("|---|" + "---:|" * (len(head) - 1))
        for c in configs:
            cells = [config_label(c)]
            for w in workloads:
                cell = medians.get((w, c), {})
                for p in peers:
                    r = None
                    if args.reference in cell and p in cell:
                        r = ratio_value(cell[args.reference], cell[p], column)
                    cells.append(fmt_ratio(r))
                    bucket = "fits" if c[3] <= 1 else "over"
                    ratios[(column, p, bucket)].append(r)
                    ratios[(column, p, "all")].append(r)
            out.append("| " + " | ".join(cells) + " |")
        out.append("")

    out.append(f"### Geometric means of {args.reference} / peer\n")
    out.append(f"Over the {len(configs)} configurations × {len(workloads)} workloads, "
               "\"fits\" = working sets within the budget, \"over\" = those over it; "
               "cells without a value (no timed Sets) left out.\n")
    head = ["metric"] + [f"{short.get(p, p)} {b}" for p in peers for b in ("all", "fits", "over")]
    out.append("| " + " | ".join(head) + " |")
    out.append("|---|" + "---:|" * (len(head) - 1))
    for column, title, _ in RATIO_METRICS:
        cells = [title.split(" (")[0]]
        for p in peers:
            for b in ("all", "fits", "over"):
                cells.append(fmt_ratio(geomean(ratios[(column, p, b)])))
        out.append("| " + " | ".join(cells) + " |")
    out.append("")
    if failed:
        out.append("Failed runs: " + ", ".join(
            f"{r['backend']}:{r['workload']}:{config_label(config_key(r))} run {r['run']}"
            for r in failed) + "\n")
    print("\n".join(out))


if __name__ == "__main__":
    main()
