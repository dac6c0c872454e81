#!/usr/bin/env python3
"""Summary tables of topology_bench's CSV (docs/topology.md): per cell, the
median over runs of each row's Get p50, trimmed mean, throughput, CPU per op
and local-hit share, and the per-run ratios against round-robin (median and
range), so that every ratio compares rows of the same run.
  tables.py engine.csv > summary.md"""
import csv
import statistics
import sys
from collections import defaultdict

ROWS = [
    ("hash", "hash"),
    ("round_robin", "round-robin"),
    ("thread_local", "thread-local"),
    ("thread_local_migrate", "thread-local + migration"),
    ("round_robin_migrate", "round-robin + migration"),
    ("round_robin_defaults", "round-robin defaults (cache, auto)"),
    ("race", "thread-local + race"),
    ("race_location_cache", "thread-local + race + cache"),
]

runs = defaultdict(dict)  # (nodes, delay, workload) -> run -> row -> record
for r in csv.DictReader(open(sys.argv[1])):
    runs[(int(r["nodes"]), int(r["delay_ns"]), r["workload"])].setdefault(
        int(r["run"]), {})[r["row"]] = r


def med(cell, row, field):
    v = [float(rs[row][field]) for rs in runs[cell].values() if row in rs]
    return statistics.median(v) if v else None


def ratio(cell, num, den, field):
    v = [float(rs[num][field]) / float(rs[den][field])
         for rs in runs[cell].values() if num in rs and den in rs]
    return (statistics.median(v), min(v), max(v)) if v else None


def local(cell, row):
    v = [int(rs[row]["hits_local"]) /
         max(1, int(rs[row]["hits_local"]) + int(rs[row]["hits_remote"]))
         for rs in runs[cell].values() if row in rs]
    return statistics.median(v)


for workload in ("placement", "uniform"):
    for cell in sorted(c for c in runs if c[2] == workload):
        nodes, delay, _ = cell
        n = len(runs[cell])
        print(f"\n### {nodes} nodes, {delay} ns, {workload} ({n} runs)\n")
        print("| row | Get p50 ns | p99 ns | mean p1-p99 ns | Mops/s | CPU ns/op "
              "| local hits | RR/row p50 (range) | RR/row CPU/op | moved |")
        print("|---|---:|---:|---:|---:|---:|---:|---|---:|---:|")
        for name, label in ROWS:
            if not any(name in rs for rs in runs[cell].values()):
                continue
            p = ratio(cell, "round_robin", name, "get_p50_ns")
            c = ratio(cell, "round_robin", name, "cpu_ns_per_op")
            moved = med(cell, name, "migrations_warmup") + med(
                cell, name, "migrations_run")
            print(f"| {label} | {med(cell, name, 'get_p50_ns'):.0f} | "
                  f"{med(cell, name, 'get_p99_ns'):.0f} | "
                  f"{med(cell, name, 'get_trimmed_mean_ns'):.0f} | "
                  f"{med(cell, name, 'ops_per_s') / 1e6:.2f} | "
                  f"{med(cell, name, 'cpu_ns_per_op'):.0f} | "
                  f"{100 * local(cell, name):.0f}% | "
                  f"{p[0]:.2f} ({p[1]:.2f}-{p[2]:.2f}) | {c[0]:.2f} | "
                  f"{moved:.0f} |")
        print(f"\ncpu share (median over rows and runs): "
              f"{statistics.median(float(rec['cpu_share']) for rs in runs[cell].values() for rec in rs.values()):.2f}")

print("\n### The report's bar per cell: RR p50 / TL p50 >= 1.26\n")
print("| nodes | delay ns | RR p50 | TL p50 | RR/TL (median of medians) "
      "| per-run RR/TL | bar | control (uniform) RR/TL | RR/TL CPU per op |")
print("|---:|---:|---:|---:|---:|---|---|---:|---:|")
for cell in sorted(c for c in runs if c[2] == "placement"):
    rr = med(cell, "round_robin", "get_p50_ns")
    tl = med(cell, "thread_local", "get_p50_ns")
    per = [float(rs["round_robin"]["get_p50_ns"]) /
           float(rs["thread_local"]["get_p50_ns"])
           for _, rs in sorted(runs[cell].items())]
    uni = (cell[0], cell[1], "uniform")
    u = med(uni, "round_robin", "get_p50_ns") / med(
        uni, "thread_local", "get_p50_ns") if uni in runs else float("nan")
    c = ratio(cell, "round_robin", "thread_local", "cpu_ns_per_op")
    print(f"| {cell[0]} | {cell[1]} | {rr:.0f} | {tl:.0f} | {rr / tl:.2f} | "
          f"{' '.join(f'{x:.2f}' for x in per)} | "
          f"{'met' if rr / tl >= 1.26 else 'not met'} | {u:.2f} | {c[0]:.2f} |")
