#!/usr/bin/env python3
"""The tables of docs/engine_bench.md, "A cheaper hit, 2026-11-25" (a copy of
bench/results/2026-11-24-hugepages/tables.py with this directory's pairs).

    python3 tables.py            # every comparison over the sessions that have both
    python3 tables.py FINAL      # and the goal-7 table of FINAL against main
    python3 tables.py FINAL 21-30   # the same over sessions 21-30 only

raw/rot_<binary>_s<session>.csv is one ycsb_bench run (run_sessions.sh). A
run's figure for a cell is FurrBall / absl over the same run; a binary's
figure in a session is its median over the run's 3 repetitions; a
comparison is the median over sessions of new / old, paired by session.
"""
import csv
import glob
import os
import re
import statistics
import sys
from collections import defaultdict

RAW = os.path.join(os.path.dirname(os.path.abspath(__file__)), "raw")
# The comparisons printed, (old, new) binary names; a results directory that
# reuses this script sets its own.
PAIRS = [("main", "stats"), ("stats", "copy"), ("main", "copy"),
         ("main", "copyonly"), ("copyonly", "rings"), ("main", "rings"),
         ("main", "mainB")]


def per_cpu_second(row):
    return float(row["ops_per_second"]) / max(float(row["run_cpu_share"]), 1e-9)


def session_figures(path):
    """{cell: {metric: median over the file's runs}}."""
    runs = defaultdict(dict)
    for row in csv.DictReader(open(path)):
        if row["run"] == "median":
            continue
        cell = (row["workload"], int(row["threads"]),
                float(row["working_set_factor"]))
        runs[(cell, row["run"])][row["backend"]] = row
    values = defaultdict(lambda: defaultdict(list))
    for (cell, _), by in runs.items():
        f, a = by["furrball"], by["absl_mutex"]
        v = values[cell]
        v["cpu"].append(per_cpu_second(f) / per_cpu_second(a))
        v["ops"].append(float(f["ops_per_second"]) / float(a["ops_per_second"]))
        v["get"].append(float(f["get_p50_ns"]))
        v["absl_get"].append(float(a["get_p50_ns"]))
        v["set"].append(float(f["set_p50_ns"]))
        v["absl_set"].append(float(a["set_p50_ns"]))
    return {c: {m: statistics.median(x) for m, x in v.items()}
            for c, v in values.items()}


def load():
    """{binary: {session: figures}} of the complete runs."""
    out = defaultdict(dict)
    for path in glob.glob(os.path.join(RAW, "rot_*_s*.csv")):
        m = re.match(r"rot_(.+)_s(\d+)\.csv$", os.path.basename(path))
        figures = session_figures(path)
        if len(figures) == 8:  # a run still being written has fewer cells
            out[m.group(1)][int(m.group(2))] = figures
    return out


def label(cell):
    w, t, ws = cell
    return f"{w}, {t} thread{'s' if t > 1 else ''}, {ws:g}x"


def paired(data, old, new, metric):
    common = sorted(set(data[old]) & set(data[new]))
    cells = sorted(data[old][common[0]]) if common else []
    return {c: statistics.median(data[new][s][c][metric] /
                                 data[old][s][c][metric] for s in common)
            for c in cells}, len(common)


def main():
    data = load()
    if len(sys.argv) > 2:
        first, last = (int(x) for x in sys.argv[2].split("-"))
        data = {b: {s: f for s, f in by.items() if first <= s <= last}
                for b, by in data.items()}
        data = defaultdict(dict, {b: by for b, by in data.items() if by})
    pairs = [(o, n) for o, n in PAIRS if o in data and n in data]
    cols = [(o, n) + paired(data, o, n, "cpu") + paired(data, o, n, "get")[:1]
            for o, n in pairs]
    print("new / old ops per CPU-second (F/absl), median over paired sessions;"
          " in brackets FurrBall's Get p50 new / old")
    print("| cell (64 B, Zipfian) | " +
          " | ".join(f"{n} / {o} ({k})" for o, n, _, k, _ in cols) + " |")
    print("| --- |" + " ---: |" * len(cols))
    for cell in sorted(cols[0][2]):
        print(f"| {label(cell)} | " + " | ".join(
            f"{r[cell]:.2f} ({g[cell]:.2f})" for _, _, r, _, g in cols) + " |")
    if len(sys.argv) < 2:
        return
    final = sys.argv[1]
    common = sorted(set(data["main"]) & set(data[final]))
    print(f"\nF / absl, {final} and main, median [range] over {len(common)} sessions")
    print("| cell (64 B, Zipfian) | ops/s, main | ops/s, now | ops/CPU-s, main "
          "| ops/CPU-s, now | Get p50 ns main → now (absl) | Set p50 ns main → now (absl) |")
    print("| --- | --- | --- | --- | --- | --- | --- |")

    def spread(b, cell, m):
        v = sorted(data[b][s][cell][m] for s in common)
        return f"{statistics.median(v):.2f} [{v[0]:.2f}–{v[-1]:.2f}]"

    def med(b, cell, m):
        return statistics.median(data[b][s][cell][m] for s in common)
    for cell in sorted(data["main"][common[0]]):
        sets = "-" if cell[0] == "C" else (
            f"{med('main', cell, 'set'):.0f} → {med(final, cell, 'set'):.0f} "
            f"({med(final, cell, 'absl_set'):.0f})")
        print(f"| {label(cell)} | {spread('main', cell, 'ops')} | "
              f"{spread(final, cell, 'ops')} | {spread('main', cell, 'cpu')} | "
              f"{spread(final, cell, 'cpu')} | {med('main', cell, 'get'):.0f} → "
              f"{med(final, cell, 'get'):.0f} ({med(final, cell, 'absl_get'):.0f}) | {sets} |")


if __name__ == "__main__":
    main()
