#!/usr/bin/env python3
"""Throughput through the shipped C++ client's automatic batching against
Redis in the peers benchmark's depth-16 cells (issue 14's goal: >= 1.0x
Redis, hiredis with 16 commands pipelined).

One Furrballs server and one Redis, 128 MiB each, loaded with the same
records; then the driver (//bench/peers:peers_bench) runs the depth-16 cells
(A, B, C, F Zipfian, 64 B values, 4 threads with a connection each) for
furrballs_batched (16 concurrent callers of one client per connection),
furrballs_multi (MultiGet + MultiSet per 16), furrballs (16 async unary
calls) and redis, the targets of a cell back to back and the whole list
repeated --rounds times (interleaved rounds). Also the server CPU per key
operation of each cell (CPU time of the server over the cell / its ops;
the Furrballs clients share one server, so its CPU is read per target run).
Writes driver.jsonl, cpu.jsonl and report.md to --out.

Usage: bench/peers/batched_d16.py [--rounds 3] [--seconds 3] [--out DIR]
(build first: bazel build //service:furrballs_server //bench/peers:peers_bench)
"""

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import servers as srv  # noqa: E402
from cpu_per_op import ROOT, run  # noqa: E402

CELLS = ["A:zipfian:16:0", "B:zipfian:16:0", "C:zipfian:16:0", "F:zipfian:16:0"]
FURRBALLS = ["furrballs_batched", "furrballs_multi", "furrballs"]
VALUE_BYTES = 64
KEY_BYTES = 24


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=3)
    ap.add_argument("--warmup", type=float, default=1)
    ap.add_argument("--records", type=int, default=150000)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--out", default=os.path.join(
        ROOT, "bench", "results", time.strftime("%Y-%m-%d") + "-batched-d16"))
    args = ap.parse_args()
    os.makedirs(os.path.join(args.out, "logs"), exist_ok=True)
    bin_dir = os.path.join(ROOT, "bazel-bin")
    driver = os.path.join(bin_dir, "bench", "peers", "peers_bench")
    log = open(os.path.join(args.out, "logs", "batched_d16.log"), "a")
    jsonl = os.path.join(args.out, "driver.jsonl")
    if os.path.exists(jsonl):
        os.remove(jsonl)
    servers = srv.Servers(bin_dir, args.out)
    servers.stop_on_signals()
    facts = srv.machine_basics(ROOT)
    facts["load_average_start"] = srv.load_average()
    cpu_rows = []
    common = ["--records=%d" % args.records, "--value_bytes=%d" % VALUE_BYTES,
              "--key_bytes=%d" % KEY_BYTES, "--threads=%d" % args.threads,
              "--seconds=%g" % args.seconds, "--warmup_seconds=%g" % args.warmup,
              "--out=" + jsonl]
    try:
        fb_addr, fb_pid = servers.start(
            "furrballs", 128, "d16",
            ["--expected_item_bytes=%d" % (VALUE_BYTES + KEY_BYTES)])
        rd_addr, rd_pid = servers.start("redis", 128, "d16")
        targets = ["%s@%s@%d" % (b, fb_addr, fb_pid) for b in FURRBALLS] + \
            ["redis@%s@%d" % (rd_addr, rd_pid)]
        pids = {b: fb_pid for b in FURRBALLS}
        pids["redis"] = rd_pid
        run([driver, "--targets=" + targets[0] + "," + targets[-1],
             "--cells=" + CELLS[2], "--seconds=0.5", "--warmup_seconds=0",
             "--load", "--out=/dev/null"] + common[:4], log)
        for rnd in range(args.rounds):
            for cell in CELLS:
                for target in targets:
                    backend = target.split("@")[0]
                    before = len(open(jsonl).readlines()) if os.path.exists(jsonl) else 0
                    c0 = srv.cpu_seconds(pids[backend])
                    run([driver, "--targets=" + target, "--cells=" + cell,
                         "--load=false"] + common, log)
                    cpu = srv.cpu_seconds(pids[backend]) - c0
                    with open(jsonl) as f:
                        rows = [json.loads(x) for x in f.readlines()[before:]]
                    ops = sum(r["ops"] for r in rows)
                    # The warm-up's operations are not in `ops`; count them
                    # at the measured rate so CPU per op covers the same span.
                    ops_total = ops * (args.seconds + args.warmup) / args.seconds
                    row = {"round": rnd, "cell": cell, "backend": backend,
                           "ops_per_second": rows[-1]["ops_per_second"],
                           "server_cpu_s": cpu,
                           "server_cpu_us_per_op": cpu / ops_total * 1e6 if ops else None,
                           "loadavg": srv.load_average()}
                    cpu_rows.append(row)
                    print("%d %-16s %-20s %9.0f ops/s  server %.2f us/op  load %s" % (
                        rnd, cell, backend, row["ops_per_second"],
                        row["server_cpu_us_per_op"] or 0, row["loadavg"]), flush=True)
    finally:
        servers.stop_all()
    facts["load_average_end"] = srv.load_average()
    with open(os.path.join(args.out, "cpu.jsonl"), "w") as f:
        for r in cpu_rows:
            f.write(json.dumps(r) + "\n")
    with open(os.path.join(args.out, "facts.json"), "w") as f:
        json.dump(facts, f, indent=1)
    write_report(args, facts, cpu_rows)


def write_report(args, facts, rows):
    def med(cell, backend, field):
        v = [r[field] for r in rows if r["cell"] == cell and r["backend"] == backend]
        return statistics.median(v), min(v), max(v)

    L = ["# Automatic batching against Redis, depth-16 cells (issue 14)", "",
         "`bench/peers/batched_d16.py --rounds %d --seconds %g`: one Furrballs server "
         "(direct dispatch, its defaults) and one Redis 7, 128 MiB each, %d records of "
         "%d B values with %d B keys, %d driver threads with a connection each, 16 "
         "operations in flight per connection, closed loop, %g s measured after %g s "
         "warm-up; in each round every cell runs each target back to back. Medians of "
         "%d rounds (range in brackets)." % (
             args.rounds, args.seconds, args.records, VALUE_BYTES, KEY_BYTES,
             args.threads, args.seconds, args.warmup, args.rounds),
         "",
         "- `furrballs_batched`: 16 concurrent async Get/Set calls of one C++ client "
         "(clients/cpp, its defaults: automatic batching on one stream) per connection.",
         "- `furrballs_multi`: one MultiGet + one MultiSet per 16; `furrballs`: 16 async "
         "unary calls (batching off); `redis`: hiredis, 16 commands pipelined.",
         "- Server CPU per op: CPU time (user + system) of the server process over the target's run "
         "(warm-up included, counted at the measured rate) / its operations.",
         "",
         "Machine: %s, %s CPUs, load average %s at the start and %s at the end "
         "(a shared machine: other engineers were building)." % (
             facts.get("host", "?"), facts.get("cpus", "?"),
             facts.get("load_average_start"), facts.get("load_average_end")),
         "Commit: %s." % facts.get("furrballs_commit", "?"),
         "",
         "| cell | redis ops/s | furrballs_batched ops/s | batched / Redis | "
         "furrballs_multi ops/s | multi / Redis | furrballs (unary) ops/s | "
         "server CPU µs/op: redis | batched | multi | unary |",
         "|---|---|---|---|---|---|---|---|---|---|---|"]
    ratios = []
    for cell in CELLS:
        rd = med(cell, "redis", "ops_per_second")
        fb = med(cell, "furrballs_batched", "ops_per_second")
        mu = med(cell, "furrballs_multi", "ops_per_second")
        un = med(cell, "furrballs", "ops_per_second")
        ratios.append(fb[0] / rd[0])
        cpu = [med(cell, b, "server_cpu_us_per_op")[0]
               for b in ("redis", "furrballs_batched", "furrballs_multi", "furrballs")]
        L.append("| %s | %.0f [%.0f–%.0f] | %.0f [%.0f–%.0f] | %.2f | %.0f [%.0f–%.0f] | "
                 "%.2f | %.0f [%.0f–%.0f] | %.2f | %.2f | %.2f | %.2f |" % (
                     cell.split(":")[0] + " Zipfian d16", *rd, *fb, fb[0] / rd[0], *mu,
                     mu[0] / rd[0], *un, *cpu))
    L += ["", "furrballs_batched / Redis, median over the cells: %.2f (range %.2f–%.2f); "
          "goal >= 1.0." % (statistics.median(ratios), min(ratios), max(ratios)), ""]
    with open(os.path.join(args.out, "report.md"), "w") as f:
        f.write("\n".join(L))
    print("\n".join(L))


if __name__ == "__main__":
    main()
