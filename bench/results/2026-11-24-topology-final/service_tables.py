#!/usr/bin/env python3
"""One table of service_bench's topology configurations (docs/topology.md):
per route and cell, the median over runs of server CPU per key op, client
p50 and local-hit share, and the per-run ratio of server CPU per op to
`direct` (hash routing, the remote read in the gRPC thread) in the same
run: median and range.
  service_tables.py service-140.csv service-0.csv > service-summary.md"""
import csv
import statistics
import sys
from collections import defaultdict

ROUTES = [
    ("nodejob64", "hop to the owner's worker (nodejob, hash)"),
    ("direct", "remote read in the gRPC thread (direct, hash)"),
    ("direct_thread_local", "none: written on the reader's node (direct, thread-local)"),
    ("direct_round_robin", "remote read, keys spread (direct, round-robin; cache, auto)"),
    ("direct_round_robin_migrate", "migration to the reader (direct, round-robin + migrate)"),
]

for path in sys.argv[1:]:
    runs = defaultdict(dict)  # (cell, run) -> server -> record
    for r in csv.DictReader(open(path)):
        runs[(r["cell"], int(r["run"]))][r["server"]] = r
    cells = sorted({c for c, _ in runs}, key=["get", "multiget", "pipeline"].index)
    print(f"\n### {path}\n")
    print("| route | cell | server CPU µs/op | CPU/op vs direct (per-run range) "
          "| client p50 µs | p50 vs direct | local hits | runs |")
    print("|---|---|---:|---|---:|---:|---:|---:|")
    for cell in cells:
        by_run = [v for (c, _), v in sorted(runs.items()) if c == cell]
        for name, label in ROUTES:
            recs = [rs[name] for rs in by_run if name in rs]
            if not recs:
                continue
            cpu = statistics.median(float(r["server_cpu_us_per_op"]) for r in recs)
            p50 = statistics.median(float(r["p50_us"]) for r in recs)
            loc = statistics.median(float(r["local_hit_share"]) for r in recs)
            rc = [float(rs[name]["server_cpu_us_per_op"]) /
                  float(rs["direct"]["server_cpu_us_per_op"])
                  for rs in by_run if name in rs and "direct" in rs]
            rp = [float(rs[name]["p50_us"]) / float(rs["direct"]["p50_us"])
                  for rs in by_run if name in rs and "direct" in rs]
            print(f"| {label} | {cell} | {cpu:.1f} | {statistics.median(rc):.2f} "
                  f"({min(rc):.2f}-{max(rc):.2f}) | {p50:.0f} | "
                  f"{statistics.median(rp):.2f} | {100 * loc:.0f}% | {len(recs)} |")
