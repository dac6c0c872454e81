#!/usr/bin/env python3
"""The tables of docs/engine_bench.md, "Huge pages for value pages below 2 MiB":
bench/results/2026-11-24-hugepages/tables.py (same method and arguments) on
this directory's raw/, comparing now / main and the A/A mainB / main.

    python3 tables.py            # every comparison over the sessions that have both
    python3 tables.py now        # and the goal-7 table of now against main
    python3 tables.py now 1-8    # the same over sessions 1-8 only
"""
import importlib.util
import os

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location(
    "hugepages_tables",
    os.path.join(HERE, "..", "2026-11-24-hugepages", "tables.py"))
hp = importlib.util.module_from_spec(spec)
spec.loader.exec_module(hp)
hp.RAW = os.path.join(HERE, "raw")
hp.PAIRS = [("main", "now"), ("main", "mainB")]

if __name__ == "__main__":
    hp.main()
