#!/usr/bin/env python3
"""The G7 table of README.md: slim against main, with the functions of
bench/results/2026-11-24-hugepages/tables.py (same method: a run's figure for
a cell is FurrBall / absl over that run, a binary's figure in a session its
median over the run's 3 repetitions, a comparison the median over sessions of
slim / main, paired by session) applied to this directory's raw/.

    python3 tables.py
"""
import importlib.util
import os
import statistics

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location(
    "hugepages_tables",
    os.path.join(HERE, "..", "2026-11-24-hugepages", "tables.py"))
hp = importlib.util.module_from_spec(spec)
spec.loader.exec_module(hp)
hp.RAW = os.path.join(HERE, "raw")


def main():
    data = hp.load()
    common = sorted(set(data["main"]) & set(data["slim"]))
    cpu, _ = hp.paired(data, "main", "slim", "cpu")
    ops, _ = hp.paired(data, "main", "slim", "ops")
    print(f"slim / main over {len(common)} paired sessions (F/absl of each run)")
    print("| cell (64 B, Zipfian) | ops per CPU-second, slim / main [range] "
          "| ops/s, slim / main | Get p50 ns, main -> slim |")
    print("| --- | ---: | ---: | --- |")
    for cell in sorted(cpu):
        r = sorted(data["slim"][s][cell]["cpu"] / data["main"][s][cell]["cpu"]
                   for s in common)
        get = [statistics.median(data[b][s][cell]["get"] for s in common)
               for b in ("main", "slim")]
        print(f"| {hp.label(cell)} | {cpu[cell]:.3f} [{r[0]:.2f}-{r[-1]:.2f}] "
              f"| {ops[cell]:.3f} | {get[0]:.0f} -> {get[1]:.0f} |")


if __name__ == "__main__":
    main()
