#!/usr/bin/env python3
"""What a cache holds after its values change size (issue 13, goal 1: "adapt").

The fill test (run.py) starts every server fresh for each value size. A
real cache is filled with one mix and then asked to hold another. This
script starts each server once with --budget_mb, then runs the fill test's
driver (//bench/memory:fill_bench) phase after phase on the same server:
by default 64-byte values, then 1 KiB values (the same key names, so the
1 KiB phase overwrites some keys and must evict the rest), then, after
--wait_s seconds, 1 KiB values again (memcached moves slab pages between
size classes in the background; the wait gives it the chance). After each
phase it records the resident key count, the RSS and a read-back of the
last keys written; it compares the last phase with a fresh server of the
same value size (the "fresh" row).

  bazel build -c opt //service:furrballs_server //bench/memory:fill_bench
  python3 bench/memory/mix_change.py --bin_dir=bazel-bin \\
      --out_dir=bench/results/$(date +%F)-mixchange

It prints a progress line per phase and writes report.md and results.json
to --out_dir. Method: docs/memory_bench.md, "When the values change size".
"""

import argparse
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench", "peers"))
sys.path.insert(0, os.path.join(ROOT, "bench", "memory"))

from run import BACKENDS, run_driver  # noqa: E402
from servers import (Servers, binary_identity, load_average, machine_basics,  # noqa: E402
                     tool_version)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--bin_dir", required=True, help="Bazel's bazel-bin (-c opt)")
    p.add_argument("--out_dir", required=True, help="where report.md and results.json go")
    p.add_argument("--budget_mb", type=int, default=64, help="every server's budget")
    p.add_argument("--phases", default="64,1024,wait,1024",
                   help="value sizes in order on one server; 'wait' sleeps --wait_s")
    p.add_argument("--wait_s", type=float, default=60, help="seconds of each 'wait' phase")
    p.add_argument("--systems", default="furrballs,memcached,redis",
                   help="servers to run, each started once")
    p.add_argument("--furrballs_flags", default="", help="extra server flags")
    args = p.parse_args()
    for phase in args.phases.split(","):
        if phase != "wait" and (not phase.isdigit() or int(phase) < 8):
            p.error("--phases: %r is neither 'wait' nor a value size of at least 8" % phase)
    for system in args.systems.split(","):
        if system not in BACKENDS:
            p.error("--systems: %r is not one of %s" % (system, ", ".join(BACKENDS)))
    return args


def fill(args, servers, system, address, pid, value_bytes, tag):
    """One fill_bench phase against a running server; its result record."""
    out = os.path.join(args.out_dir, "%s-%s.json" % (system, tag))
    argv = [os.path.join(args.bin_dir, "bench", "memory", "fill_bench"),
            "--backend=" + BACKENDS[system], "--address=" + address, "--pid=%d" % pid,
            "--budget_mb=%d" % args.budget_mb, "--value_bytes=%d" % value_bytes,
            "--label=%s %s" % (system, tag), "--out=" + out]
    error = run_driver(servers, argv, os.path.join(args.out_dir, "logs", "%s-%s.log" % (
        system, tag)), timeout=900)
    if error:
        return {"error": error}
    with open(out) as f:
        result = json.load(f)
    after = result["after_fill"]
    return {"value_bytes": value_bytes, "resident": after["resident"],
            "rss_mib": after["rss_bytes"] / 2**20, "read_back": result["read_back"]}


def run_system(args, servers, system, phases):
    """The phases on one server, then a fresh server at the last value size."""
    rows = []
    flags = args.furrballs_flags.split() if args.furrballs_flags else ()
    address, pid = servers.start(system, args.budget_mb, "mix", flags)
    try:
        for i, phase in enumerate(phases):
            if phase == "wait":
                print("[mix] %s: waiting %g s" % (system, args.wait_s), flush=True)
                time.sleep(args.wait_s)
                continue
            row = fill(args, servers, system, address, pid, int(phase), "phase%d-%sb" % (i, phase))
            row["phase"] = "%d: %s B" % (i, phase)
            rows.append(row)
            print("[mix] %s phase %s: %s" % (system, row["phase"], row), flush=True)
    finally:
        servers.stop(system)
    last = int([p for p in phases if p != "wait"][-1])
    address, pid = servers.start(system, args.budget_mb, "fresh", flags)
    try:
        row = fill(args, servers, system, address, pid, last, "fresh-%db" % last)
        row["phase"] = "fresh server: %d B" % last
        rows.append(row)
        print("[mix] %s %s: %s" % (system, row["phase"], row), flush=True)
    finally:
        servers.stop(system)
    return rows


def report(args, facts, results):
    lines = ["# Values that change size: what each cache holds afterwards",
             "",
             "`bench/memory/mix_change.py --budget_mb=%d --phases=%s --wait_s=%g` "
             "(docs/memory_bench.md, \"When the values change size\"). One server per "
             "system runs the phases in order; the last row of each is a fresh server "
             "at the last value size. Read-back: 1,000 of the last keys written." % (
                 args.budget_mb, args.phases, args.wait_s), ""]
    lines += ["- %s: %s" % (k, v) for k, v in facts.items()]
    lines += ["", "| system | phase | keys resident | RSS, MiB | read-back hits | "
              "resident / fresh |", "|---|---|---|---|---|---|"]
    for system, rows in results.items():
        fresh = rows[-1].get("resident") if rows else None
        for row in rows:
            if "error" in row:
                lines.append("| %s | %s | %s | | | |" % (system, row.get("phase", "?"),
                                                         row["error"]))
                continue
            ratio = ("%.2f" % (row["resident"] / fresh)) if fresh else "-"
            lines.append("| %s | %s | %s | %.1f | %d / %d | %s |" % (
                system, row["phase"], format(row["resident"], ","), row["rss_mib"],
                row["read_back"]["hits"], row["read_back"]["sampled"], ratio))
    return "\n".join(lines) + "\n"


def main():
    args = parse_args()
    os.makedirs(os.path.join(args.out_dir, "logs"), exist_ok=True)
    facts = machine_basics(ROOT)
    facts["furrballs_server"] = binary_identity(
        os.path.join(args.bin_dir, "service", "furrballs_server"))
    facts["redis_server"] = tool_version(["redis-server", "--version"])
    facts["memcached"] = tool_version(["memcached", "-V"])
    facts["load average at start"] = load_average()
    phases = args.phases.split(",")
    servers = Servers(args.bin_dir, args.out_dir)
    servers.stop_on_signals()
    results = {}
    try:
        for system in args.systems.split(","):
            results[system] = run_system(args, servers, system, phases)
    finally:
        servers.stop_all()
    with open(os.path.join(args.out_dir, "results.json"), "w") as f:
        json.dump({"facts": facts, "args": vars(args), "results": results}, f, indent=1)
    text = report(args, facts, results)
    with open(os.path.join(args.out_dir, "report.md"), "w") as f:
        f.write(text)
    print(text)
    return 1 if any("error" in r for rows in results.values() for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
