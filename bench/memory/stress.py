#!/usr/bin/env python3
"""The RSS bound under load: largest RSS of fresh Furrballs servers driven by rss_stress.

Issue 13 goal 1 wants RSS <= 1.05 x budget + 24 MiB at every moment. The fill
test (run.sh) samples RSS between its batches, when nothing is in flight; this
samples it every 2 ms while //bench/memory:rss_stress sends bursts of large
MultiSets (bench/memory/rss_stress.cc). For every run a fresh server is
started, driven for --seconds and stopped; with --bin_dir_b the runs of two
builds are interleaved (A, B, A, B, ...), so that a comparison sees the same
machine load. Writes --out_dir/results.json (every run's rss_stress JSON and
the server's command line) and report.md (per build and configuration: the
max RSS / budget of every run, how many passed the bound, the RSS left after
the bursts, the items stored and refused, and the server's CPU time per item
stored, which the load of other processes disturbs less than the count). Method: docs/memory_bench.md,
"Requests in flight are bounded".

  bench/memory/stress.py --bin_dir=bazel-bin --runs=10
  bench/memory/stress.py --bin_dir=/tmp/main-bin --bin_dir_b=bazel-bin --runs=10

Exit status 0 when every run ran (over the bound or not: that is the
finding), 1 when a server did not start or rss_stress failed, 2 for bad
arguments or a missing binary.
"""

import argparse
import datetime
import json
import os
import shlex
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench", "peers"))

from servers import Servers, load_average  # noqa: E402

MIB = 1 << 20


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--bin_dir", required=True,
                   help="build A: its service/furrballs_server (and "
                        "bench/memory/rss_stress, which drives every run, from the "
                        "first of the two build directories that has it)")
    p.add_argument("--bin_dir_b", default="", help="build B, interleaved with A")
    p.add_argument("--budget_mb", type=int, default=64, help="--memory_mb of every server")
    p.add_argument("--configs", default="65536:4:1:32,1048576:4:1:4",
                   help="comma-separated value_bytes:connections:in_flight:items; the "
                        "defaults are the fill's own concurrency (4 callers, one "
                        "MultiSet each) in bursts")
    p.add_argument("--runs", type=int, default=10, help="runs per build and configuration")
    p.add_argument("--seconds", type=float, default=10, help="length of a run")
    p.add_argument("--burst_ms", type=int, default=300, help="rss_stress --burst_ms")
    p.add_argument("--pause_ms", type=int, default=100, help="rss_stress --pause_ms")
    p.add_argument("--furrballs_flags", default="",
                   help="extra flags for every furrballs_server")
    p.add_argument("--out_dir", default="",
                   help="default bench/results/<date>-rss-stress")
    return p.parse_args()


def configs(text):
    out = []
    for part in text.split(","):
        fields = part.split(":")
        if len(fields) != 4 or not all(f.isdigit() and int(f) > 0 for f in fields):
            print("stress.py: --configs: %r is not value_bytes:connections:in_flight:items"
                  % part, file=sys.stderr)
            sys.exit(2)
        out.append(tuple(int(f) for f in fields))
    return out


def cpu_seconds(pid):
    """User + system CPU time of process `pid` so far (/proc/PID/stat)."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one_run(args, servers, build, stress, config, tag, flags, out_dir):
    value_bytes, connections, in_flight, items = config
    rec = {"build": build, "value_bytes": value_bytes, "connections": connections,
           "in_flight": in_flight, "items": items}
    try:
        address, pid = servers.start("furrballs", args.budget_mb, tag, flags)
    except RuntimeError as e:
        rec["error"] = str(e)
        return rec
    rec["argv"] = servers.argv["furrballs"]
    out = os.path.join(out_dir, "logs", "stress-%s.json" % tag)
    argv = [stress, "--address=" + address, "--pid=%d" % pid,
            "--budget_mb=%d" % args.budget_mb, "--value_bytes=%d" % value_bytes,
            "--connections=%d" % connections, "--in_flight=%d" % in_flight,
            "--items=%d" % items, "--seconds=%g" % args.seconds,
            "--burst_ms=%d" % args.burst_ms, "--pause_ms=%d" % args.pause_ms, "--out=" + out]
    cpu_start = cpu_seconds(pid)
    try:
        done = subprocess.run(argv, stderr=subprocess.PIPE, text=True,
                              timeout=args.seconds + 120)
        # Before the server stops: what serving the run cost it.
        rec["server_cpu_s"] = cpu_seconds(pid) - cpu_start
        sys.stderr.write("  " + done.stderr)
        if done.returncode != 0:
            rec["error"] = "rss_stress exited with %d" % done.returncode
        else:
            with open(out) as f:
                rec["result"] = json.load(f)
    except subprocess.TimeoutExpired:
        rec["error"] = "rss_stress timed out"
    finally:
        servers.stop("furrballs")
    return rec


def render(raw):
    lines = ["# RSS under bursts of large MultiSets (issue 13 goal 1)", "",
             "`%s`, %s, load average %s at the start and %s at the end. Bound: "
             "1.05 x budget + 24 MiB = %.3f x budget. Each figure is one fresh "
             "server's largest RSS sampled every 2 ms, over the budget." % (
                 raw["command"], raw["finished"], raw["load_average"][0],
                 raw["load_average"][1], 1.05 + 24.0 / raw["budget_mb"]), ""]
    for build, bin_dir in raw["builds"].items():
        lines.append("- build %s: `%s`" % (build, bin_dir))
    lines += ["", "| build | values x per message, callers x in flight | runs over the bound "
              "| max RSS / budget, median (range) | every run | RSS after, MiB, median "
              "| items stored, median | items refused, median "
              "| server CPU ms per item stored, median |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    groups = {}
    for rec in raw["runs"]:
        key = (rec["build"], rec["value_bytes"], rec["items"], rec["connections"],
               rec["in_flight"])
        groups.setdefault(key, []).append(rec)
    for key in sorted(groups, key=lambda k: (k[1], k[2], k[3], k[4], k[0])):
        build, value_bytes, items, connections, in_flight = key
        ok = [r["result"] for r in groups[key] if "result" in r]
        errors = len(groups[key]) - len(ok)
        if not ok:
            lines.append("| %s | %d B x %d, %d x %d | — | failed (%d) | | | | | |" % (
                build, value_bytes, items, connections, in_flight, errors))
            continue
        ratios = [r["max_rss_ratio"] for r in ok]
        over = sum(1 for r in ok if not r["within_bound"])
        refused = [sum(r["failed_items"].values()) for r in ok]
        cpu = [1000.0 * rec["server_cpu_s"] / rec["result"]["ok_items"]
               for rec in groups[key]
               if "result" in rec and "server_cpu_s" in rec and rec["result"]["ok_items"]]
        lines.append("| %s | %d B x %d, %d x %d | %d of %d%s | %.3f (%.3f-%.3f) | %s | %.1f "
                     "| %d | %d | %s |" % (
                         build, value_bytes, items, connections, in_flight, over, len(ok),
                         " (%d failed)" % errors if errors else "",
                         statistics.median(ratios), min(ratios), max(ratios),
                         " ".join("%.2f" % x for x in ratios),
                         statistics.median(r["rss_end_bytes"] for r in ok) / MIB,
                         statistics.median(r["ok_items"] for r in ok),
                         statistics.median(refused),
                         "%.3f" % statistics.median(cpu) if cpu else "—"))
    return "\n".join(lines) + "\n"


def main():
    args = parse_args()
    builds = {"A": args.bin_dir}
    if args.bin_dir_b:
        builds["B"] = args.bin_dir_b
    stress = next((os.path.join(d, "bench", "memory", "rss_stress") for d in builds.values()
                   if os.access(os.path.join(d, "bench", "memory", "rss_stress"), os.X_OK)),
                  os.path.join(args.bin_dir, "bench", "memory", "rss_stress"))
    for exe in [stress] + [os.path.join(d, "service", "furrballs_server")
                           for d in builds.values()]:
        if not os.access(exe, os.X_OK):
            print("stress.py: %s is not built" % exe, file=sys.stderr)
            return 2
    if args.runs < 1 or args.budget_mb < 1 or args.seconds <= 0:
        print("stress.py: --runs, --budget_mb and --seconds must be positive",
              file=sys.stderr)
        return 2
    try:
        flags = shlex.split(args.furrballs_flags)
    except ValueError as e:
        print("stress.py: --furrballs_flags: %s" % e, file=sys.stderr)
        return 2
    stamp = datetime.datetime.utcnow().strftime("%Y-%m-%d")
    out_dir = args.out_dir or os.path.join(ROOT, "bench", "results", stamp + "-rss-stress")
    os.makedirs(os.path.join(out_dir, "logs"), exist_ok=True)
    raw = {"budget_mb": args.budget_mb, "builds": builds, "config": vars(args),
           "command": " ".join(shlex.quote(a) for a in sys.argv), "runs": []}
    load_start = load_average()
    all_servers = {b: Servers(d, out_dir) for b, d in builds.items()}
    try:
        for run in range(args.runs):
            for config in configs(args.configs):
                for build, servers in all_servers.items():
                    tag = "%s-%d-%dx%dx%d-%d" % (build, config[0], config[1], config[2],
                                                 config[3], run)
                    print("[stress] run %d/%d, build %s, %d B x %d, %d x %d" % (
                        run + 1, args.runs, build, config[0], config[3], config[1],
                        config[2]), file=sys.stderr, flush=True)
                    raw["runs"].append(one_run(args, servers, build, stress, config, tag,
                                               flags, out_dir))
    finally:
        for servers in all_servers.values():
            servers.stop_all()
    raw["load_average"] = [load_start, load_average()]
    raw["finished"] = datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M UTC")
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump(raw, f, indent=1)
    with open(os.path.join(out_dir, "report.md"), "w") as f:
        f.write(render(raw))
    print("stress: report in %s" % os.path.join(out_dir, "report.md"), file=sys.stderr)
    errors = [r["error"] for r in raw["runs"] if "error" in r]
    for e in errors:
        print("stress: FAILED: %s" % e, file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
