#!/usr/bin/env python3
"""Runs cmap_bench several times and prints the tables of docs/cmap.md.

Each run is one process with all competitors in it; the table reports, per
benchmark, the median over the runs of Google Benchmark's real time per
operation (all threads together), and the ratios peer / CMap (> 1: CMap is
faster).

Usage:
  engine/cmap/bench_report.py BENCH_BINARY [--runs 3] [--min_time 0.5]
      [--design | --resizable]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
from collections import defaultdict

COMPARISON = r"^(Find|Set|Mixed90_10)/"
DESIGN = r"^(GroupLoad|ChurnedMiss)/"
RESIZABLE = r"^Resizable/"
PEERS = ("absl_mutex", "tbb")


def run(binary, pattern, min_time):
    load_before = os.getloadavg()[0]
    out = subprocess.run(
        [binary, f"--benchmark_filter={pattern}",
         f"--benchmark_min_time={min_time}", "--benchmark_format=json"],
        check=True, capture_output=True, text=True).stdout
    load_after = os.getloadavg()[0]
    data = json.loads(out)
    times = {}
    for b in data["benchmarks"]:
        if b.get("error_occurred"):
            sys.exit(f"{b['name']}: {b.get('error_message')}")
        assert b["time_unit"] == "ns", b
        times[b["name"]] = b["real_time"]
        for counter, value in b.items():
            if counter.endswith("_ns"):  # per-variant times (GroupLoad)
                times[f"{b['name']} {counter}"] = value
    return times, data["context"], (load_before, load_after)


def medians(binary, pattern, runs, min_time):
    samples = defaultdict(list)
    loads = []
    context = None
    for i in range(runs):
        times, context, load = run(binary, pattern, min_time)
        loads.append(load)
        print(f"run {i + 1}/{runs}: {len(times)} benchmarks, load average "
              f"{load[0]:.1f} -> {load[1]:.1f}", file=sys.stderr)
        for name, t in times.items():
            samples[name].append(t)
    return {n: statistics.median(v) for n, v in samples.items()}, context, loads


def comparison_table(med):
    # Name: Op/map/keys/dist/real_time/threads:N
    rows = {}
    for name, t in med.items():
        op, m, keys, dist, _, threads = name.split("/")
        rows.setdefault((op, keys, dist, threads.split(":")[1]), {})[m] = t
    order = {"Find": 0, "Set": 1, "Mixed90_10": 2}
    lines = [
        "| op | keys | dist | threads | CMap ns/op | absl+Mutex ns/op | TBB ns/op "
        "| absl / CMap | TBB / CMap |",
        "|---|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for key in sorted(rows, key=lambda k: (order[k[0]], k[1] != "100k",
                                           k[2], k[3])):
        r = rows[key]
        c = r["cmap"]
        lines.append(
            f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | {c:.1f} | "
            f"{r['absl_mutex']:.1f} | {r['tbb']:.1f} | "
            f"{r['absl_mutex'] / c:.2f}x | {r['tbb'] / c:.2f}x |")
    return "\n".join(lines)


def design_table(med):
    lines = ["| benchmark | ns/op |", "|---|---:|"]
    for name in sorted(med):
        if name.startswith("GroupLoad/") and " " not in name:
            continue  # the sum of the three variants below it
        lines.append(f"| {name} | {med[name]:.1f} |")
    return "\n".join(lines)


def resizable_table(med):
    lines = ["| benchmark | CMap ns/op | ResizableCMap ns/op | growing ns/op "
             "| Resizable / CMap | growing / CMap |",
             "|---|---:|---:|---:|---:|---:|"]
    for name in sorted(n for n in med if " " not in n):
        if f"{name} cmap_ns" not in med:  # a plain timing (migrate_some_64)
            lines.append(f"| {name} | | | {med[name]:.1f} | | |")
            continue
        c = med[f"{name} cmap_ns"]
        r = med[f"{name} resizable_ns"]
        g = med[f"{name} growing_ns"]
        lines.append(f"| {name} | {c:.1f} | {r:.1f} | {g:.1f} | {r / c:.3f}x "
                     f"| {g / c:.3f}x |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("binary")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--min_time", type=float, default=0.5)
    parser.add_argument("--design", action="store_true",
                        help="the design checks instead of the comparison")
    parser.add_argument("--resizable", action="store_true",
                        help="ResizableCMap against CMap instead")
    args = parser.parse_args()

    pattern = (RESIZABLE if args.resizable else
               DESIGN if args.design else COMPARISON)
    med, context, loads = medians(args.binary, pattern, args.runs,
                                  args.min_time)
    print(f"Median of {args.runs} runs, --benchmark_min_time={args.min_time}; "
          f"{context['num_cpus']} CPUs at {context['mhz_per_cpu']} MHz; "
          f"load average before/after each run: " +
          ", ".join(f"{a:.1f}/{b:.1f}" for a, b in loads) + ".\n")
    if args.resizable:
        print(resizable_table(med))
    else:
        print(design_table(med) if args.design else comparison_table(med))


if __name__ == "__main__":
    main()
