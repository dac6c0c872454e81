#!/usr/bin/env python3
"""A single caller at depth 1 through the shipped C++ client, with and
without automatic batching: read p50 of `furrballs load --concurrency=1`
with --batch_streams=0 (every call unary) and --batch_streams=1 (the
client's default), rounds interleaved, against one real server on loopback
(issue 14's goal: batched p50 within 1.1x of unary p50).

Usage: bench/peers/lone_caller.py [--rounds 5] [--ops 20000] [--out DIR] [--bin_dir DIR]
(build first: bazel build //service:furrballs_server //clients/cli:furrballs)
"""

import argparse
import json
import os
import re
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import servers as srv  # noqa: E402
from cpu_per_op import ROOT, run  # noqa: E402

KEYS = 1000
VALUE_BYTES = 64


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--ops", type=int, default=20000)
    ap.add_argument("--get_ratio", type=float, default=1.0)
    ap.add_argument("--bin_dir", default=os.path.join(ROOT, "bazel-bin"),
                    help="where service/furrballs_server and clients/cli/furrballs are "
                    "(bazel-bin's layout), to measure another build")
    ap.add_argument("--out", default=os.path.join(
        ROOT, "bench", "results", time.strftime("%Y-%m-%d") + "-lone-caller"))
    args = ap.parse_args()
    os.makedirs(os.path.join(args.out, "logs"), exist_ok=True)
    bin_dir = args.bin_dir
    cli = os.path.join(bin_dir, "clients", "cli", "furrballs")
    log = open(os.path.join(args.out, "logs", "lone_caller.log"), "a")
    servers = srv.Servers(bin_dir, args.out)
    servers.stop_on_signals()
    rows = []
    try:
        addr, _ = servers.start("furrballs", 64, "lone")
        run([cli, "--target=" + addr, "load", "--ops=%d" % (KEYS * 2),
             "--keys=%d" % KEYS, "--value_size=%d" % VALUE_BYTES,
             "--get_ratio=0", "--concurrency=1"], log)
        for rnd in range(args.rounds):
            for streams in (0, 1):
                text = run([cli, "--target=" + addr,
                            "--batch_streams=%d" % streams, "load",
                            "--ops=%d" % args.ops, "--keys=%d" % KEYS,
                            "--value_size=%d" % VALUE_BYTES,
                            "--get_ratio=%g" % args.get_ratio,
                            "--concurrency=1", "--timeout_ms=10000"], log)
                p50 = float(re.search(r"p50 ([0-9.]+) us", text).group(1))
                tput = float(re.search(r"= ([0-9]+) ops/s", text).group(1))
                row = {"round": rnd, "batch_streams": streams, "p50_us": p50,
                       "ops_per_s": tput, "loadavg": srv.load_average()}
                rows.append(row)
                print("%d batch_streams=%d p50 %6.1f us  %7.0f ops/s  load %s"
                      % (rnd, streams, p50, tput, row["loadavg"]), flush=True)
    finally:
        servers.stop_all()
    with open(os.path.join(args.out, "lone_caller.jsonl"), "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    med = {s: statistics.median(r["p50_us"] for r in rows
                                if r["batch_streams"] == s) for s in (0, 1)}
    print("\nmedian p50 over %d rounds: unary %.1f us, batched %.1f us, "
          "batched/unary %.3f (goal <= 1.1)" % (args.rounds, med[0], med[1],
                                                med[1] / med[0]))


if __name__ == "__main__":
    main()
