#!/usr/bin/env python3
"""The memory fill test: how many keys Furrballs, Redis and memcached hold in one budget.

bench/memory/run.sh is the entry point (it builds, then runs this). For each
value size this script starts Furrballs, Redis 7 and memcached 1.6 on
loopback with the same budget, records each one's idle RSS, runs
//bench/memory:fill_bench against it (fill until the resident key count stops
growing, RSS sampled throughout, a read-back of 1,000 keys) and stops it; then
it starts each once more at --idle_budget_mb with no data for the idle-RSS
row. --small instead runs issue 13's small-budget check: Furrballs and
memcached at 4 and 8 MiB with 1 KiB values, a fill, then a Zipfian cache-aside
load with the same key sequence for both. It writes
bench/results/<date>-memory[-small]/ with report.md (report.py), results.json
(every raw figure) and logs/.

Every server is its own child process, stopped by pid at the end, also on
failure or Ctrl-C. Exit status: 0 when every fill ran and every read-back
returned only its own keys' values; 1 otherwise (the report says why); 2 for
bad arguments or a missing binary. Method: docs/memory_bench.md.
"""

import argparse
import datetime
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench", "peers"))

import report  # noqa: E402  (bench/memory, this script's directory)
from servers import (Progress, Servers, binary_identity, load_average, machine_basics, rss_bytes,  # noqa: E402
                     tool_version)

# The client each system is driven with: Furrballs' MultiSet/MultiGet is its
# fastest way to move a batch (docs/peers_bench.md), as pipelining is Redis's.
BACKENDS = {"furrballs": "furrballs_multi", "redis": "redis", "memcached": "memcached"}
# Furrballs prints the metadata it mapped (key table, ARC, fixed structures;
# inside --memory_mb) at start-up; its Stats RPC has no such figure. Its key
# table then grows, paid with value pages: the start-up line's pages (per
# node, times the nodes) less the Stats' memory_limit_bytes (pages in
# service) after the fill is what the growth took (report.py).
METADATA_LINE = re.compile(r"metadata (\d+) MiB")
NODES_LINE = re.compile(r"furrballs: (\d+) node\(s\)")
PAGES_LINE = re.compile(r"\((\d+) pages of (\d+) KiB\)")


def usage_error(message):
    print("run.py: " + message, file=sys.stderr)
    sys.exit(2)


def int_list(text, name):
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        values = []
    if not values or any(v <= 0 for v in values):
        usage_error("--%s=%r: expected a comma-separated list of positive "
                         "integers" % (name, text))
    return values


def parse_args():
    p = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--bin_dir", required=True, help="Bazel's bazel-bin")
    p.add_argument("--budget_mb", type=int, default=64,
                   help="memory budget of every server in the fill, MiB")
    p.add_argument("--values", default="64,1024",
                   help="value sizes in bytes, comma-separated")
    p.add_argument("--idle_budget_mb", type=int, default=256,
                   help="budget of the idle-RSS row (servers started with no data)")
    p.add_argument("--furrballs_flags", default="",
                   help="extra flags for furrballs_server, after the harness's own "
                        "(--listen_address, --metrics_address=, --memory_mb), so they "
                        "override them; e.g. \"--expected_item_bytes=88\"")
    p.add_argument("--small", action="store_true",
                   help="the small-budget check instead of the fill (issue 13 goal 4)")
    p.add_argument("--small_budgets", default="4,8", help="--small: budgets in MiB")
    p.add_argument("--small_value_bytes", type=int, default=1024,
                   help="--small: value size in bytes")
    p.add_argument("--cache_aside_ops", type=int, default=100000,
                   help="--small: reads of the cache-aside warm-up, and again of its "
                        "measured part")
    p.add_argument("--zipf_theta", type=float, default=0.99,
                   help="--small: Zipfian constant of the cache-aside reads")
    p.add_argument("--key_bytes", type=int, default=24, help="key length")
    p.add_argument("--threads", type=int, default=4, help="fill_bench inserting threads")
    p.add_argument("--depth", type=int, default=32,
                   help="operations per request batch (MultiSet, pipeline)")
    p.add_argument("--min_growth", type=float, default=0.005,
                   help="settled when a budget-sized batch grows the resident count "
                        "by less than this fraction")
    p.add_argument("--max_batches", type=int, default=10,
                   help="budget-sized batches per fill at most")
    p.add_argument("--max_seconds", type=float, default=100,
                   help="seconds of inserting per fill at most")
    p.add_argument("--sample_keys", type=int, default=1000, help="keys read back per fill")
    p.add_argument("--seed", type=int, default=1, help="seed of the sample and the reads")
    p.add_argument("--out_dir", default="",
                   help="default bench/results/<date>-memory[-small]")
    p.add_argument("--command", default="bench/memory/run.sh",
                   help="the command line the report names")
    p.add_argument("--report_only", action="store_true",
                   help="rewrite report.md of --out_dir from its results.json")
    return p.parse_args()


def metadata_bytes(log_path):
    with open(log_path) as f:
        m = METADATA_LINE.search(f.read())
    return int(m.group(1)) << 20 if m else None


def start_page_bytes(log_path):
    """The value-page bytes the start-up line says every node got, summed."""
    with open(log_path) as f:
        text = f.read()
    nodes, pages = NODES_LINE.search(text), PAGES_LINE.search(text)
    if not nodes or not pages:
        return None
    return int(nodes.group(1)) * int(pages.group(1)) * (int(pages.group(2)) << 10)


def run_driver(servers, argv, log_path, timeout):
    """Runs fill_bench, its progress lines to stderr and to log_path.

    Returns None, or why it failed. `servers` stops it too on a signal."""
    with open(log_path, "a") as log:
        log.write("$ %s\n" % " ".join(argv))
        log.flush()
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                text=True)
        servers.adopt("fill_bench", proc)
        deadline = time.time() + timeout
        for line in proc.stderr:
            sys.stderr.write("  " + line)
            log.write(line)
            if time.time() > deadline:
                proc.kill()
                break
        proc.wait()
        servers.stop("fill_bench")
    if proc.returncode != 0:
        return "fill_bench exited with %d; see %s" % (
            proc.returncode, os.path.relpath(log_path, ROOT))
    return None


def one_fill(args, servers, out_dir, system, budget_mb, value_bytes, cache_aside_ops,
             furrballs_flags):
    """Starts `system`, fills it with fill_bench, stops it; the raw record."""
    tag = "%dmb-%db" % (budget_mb, value_bytes)
    rec = {"system": system, "budget_mb": budget_mb, "value_bytes": value_bytes}
    try:
        address, pid = servers.start(system, budget_mb, tag, furrballs_flags)
    except RuntimeError as e:
        rec["error"] = "did not start: %s" % e
        return rec
    try:
        rec["argv"] = servers.argv[system]
        rec["idle_rss_bytes"] = rss_bytes(pid)
        if system == "furrballs":
            rec["metadata_bytes"] = metadata_bytes(servers.logs[system])
            rec["start_page_bytes"] = start_page_bytes(servers.logs[system])
        out = os.path.join(out_dir, "fill-%s-%s.json" % (system, tag))
        argv = [os.path.join(args.bin_dir, "bench", "memory", "fill_bench"),
                "--backend=" + BACKENDS[system], "--address=" + address, "--pid=%d" % pid,
                "--budget_mb=%d" % budget_mb, "--key_bytes=%d" % args.key_bytes,
                "--value_bytes=%d" % value_bytes, "--threads=%d" % args.threads,
                "--depth=%d" % args.depth, "--min_growth=%g" % args.min_growth,
                "--max_batches=%d" % args.max_batches, "--max_seconds=%g" % args.max_seconds,
                "--sample_keys=%d" % args.sample_keys, "--seed=%d" % args.seed,
                "--cache_aside_ops=%d" % cache_aside_ops, "--zipf_theta=%g" % args.zipf_theta,
                "--label=%s %d MiB %d B" % (system, budget_mb, value_bytes), "--out=" + out]
        # The fill is bounded by --max_seconds; the read-back and the
        # cache-aside phase take seconds more.
        error = run_driver(servers, argv, os.path.join(out_dir, "logs", "driver-%s-%s.log" % (
            system, tag)), timeout=2 * args.max_seconds + 600)
        if error:
            rec["error"] = error
        else:
            with open(out) as f:
                rec["result"] = json.load(f)
    finally:
        servers.stop(system)
    return rec


def idle_rss(servers, system, budget_mb, furrballs_flags):
    rec = {"system": system, "budget_mb": budget_mb}
    try:
        _address, pid = servers.start(system, budget_mb, "idle-%dmb" % budget_mb,
                                      furrballs_flags)
    except RuntimeError as e:
        rec["error"] = "did not start: %s" % e
        return rec
    rec["rss_bytes"] = rss_bytes(pid)
    rec["argv"] = servers.argv[system]
    servers.stop(system)
    return rec


def main():
    args = parse_args()
    if args.report_only:
        with open(os.path.join(args.out_dir, "results.json")) as f:
            raw = json.load(f)
        with open(os.path.join(args.out_dir, "report.md"), "w") as f:
            f.write(report.render(raw))
        return 0
    mode = "small" if args.small else "fill"
    values = int_list(args.values, "values")
    budgets = int_list(args.small_budgets, "small_budgets")
    for name in ["budget_mb", "idle_budget_mb", "small_value_bytes", "threads", "depth",
                 "max_batches", "sample_keys", "key_bytes"]:
        if getattr(args, name) <= 0:
            usage_error("--%s must be positive" % name)
    if args.key_bytes < 24 or min(values + [args.small_value_bytes]) < 8:
        usage_error("keys of at least 24 bytes and values of at least 8 "
                         "(the key number) are needed")
    try:
        furrballs_flags = shlex.split(args.furrballs_flags)
    except ValueError as e:
        usage_error("--furrballs_flags: %s" % e)
    for exe in [os.path.join(args.bin_dir, "service", "furrballs_server"),
                os.path.join(args.bin_dir, "bench", "memory", "fill_bench")]:
        if not os.access(exe, os.X_OK):
            usage_error("%s is not built (run bench/memory/run.sh)" % exe)
    for exe in ["redis-server", "memcached"]:
        if shutil.which(exe) is None:
            usage_error("%s is not installed (tools/setup.sh installs it)" % exe)

    stamp = datetime.datetime.utcnow().strftime("%Y-%m-%d")
    out_dir = args.out_dir or os.path.join(
        ROOT, "bench", "results", "%s-memory%s" % (stamp, "-small" if args.small else ""))
    if os.path.exists(out_dir):
        shutil.rmtree(out_dir)
    os.makedirs(os.path.join(out_dir, "logs"))

    if args.small:
        systems = list(report.SMALL_SYSTEMS)
        runs = [(mb, args.small_value_bytes, args.cache_aside_ops) for mb in budgets]
        steps = len(runs) * len(systems)
    else:
        systems = list(report.SYSTEMS)
        runs = [(args.budget_mb, v, 0) for v in values]
        steps = len(runs) * len(systems) + len(systems)
    progress = Progress("memory", steps, os.path.join(out_dir, "logs", "progress.log"))
    facts = machine_basics(ROOT)
    facts["redis_server"] = tool_version(["redis-server", "--version"])
    facts["memcached"] = tool_version(["memcached", "-V"])
    facts["furrballs_server"] = binary_identity(
        os.path.join(args.bin_dir, "service", "furrballs_server"))
    config = {k: v for k, v in vars(args).items()
              if k not in ("bin_dir", "out_dir", "report_only", "command")}
    raw = {"mode": mode, "config": config, "facts": facts, "fills": [], "idle": []}
    load_start = load_average()
    start = time.time()
    servers = Servers(args.bin_dir, out_dir)
    servers.stop_on_signals()
    try:
        for budget_mb, value_bytes, cache_aside_ops in runs:
            for system in systems:
                progress.step("%s, %d MiB budget, %d B values: start, fill, read back%s" % (
                    system, budget_mb, value_bytes,
                    ", cache-aside reads" if cache_aside_ops else ""))
                rec = one_fill(args, servers, out_dir, system, budget_mb, value_bytes,
                               cache_aside_ops, furrballs_flags)
                if rec.get("error"):
                    print("  %s: %s" % (system, rec["error"]), file=sys.stderr)
                raw["fills"].append(rec)
        if not args.small:
            for system in systems:
                progress.step("%s: idle RSS at %d MiB, no data" % (system, args.idle_budget_mb))
                raw["idle"].append(idle_rss(servers, system, args.idle_budget_mb,
                                            furrballs_flags))
    finally:
        servers.stop_all()
    raw["run"] = {"load_average": [load_start, load_average()],
                  "command": args.command,
                  "seconds": time.time() - start,
                  "finished": datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M UTC")}
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump(raw, f, indent=1)
    with open(os.path.join(out_dir, "report.md"), "w") as f:
        f.write(report.render(raw))
    print("memory: report in %s" % os.path.relpath(os.path.join(out_dir, "report.md"), ROOT),
          file=sys.stderr)
    problems = [r["error"] for r in raw["fills"] if r.get("error") and
                not r["error"].startswith("did not start")]
    problems += report.failures([(r["system"], r["result"]) for r in raw["fills"]
                                 if r.get("result")])
    for p in problems:
        print("memory: FAILED: %s" % p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
