#!/usr/bin/env python3
"""Server CPU per key operation: Furrballs (Batch stream through the shipped
C++ client's automatic batching, 16 and 64 concurrent callers; unary Get via
ghz, 16 concurrent calls) against Redis (redis-benchmark -P 16, 16 clients),
in one run, rounds interleaved (issue 14, goals).

CPU per key op = (CPU time of the server process over the load, user +
system, servers.cpu_seconds) / key operations of the load. On a shared machine this is
steadier than throughput: other processes' load changes how long the run
takes, much less what each operation costs the server. The load average is
recorded with every cell.

Usage: bench/peers/cpu_per_op.py [--rounds 3] [--out DIR]
(build first: bazel build //service:furrballs_server //clients/cli:furrballs)
"""

import argparse
import base64
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import servers as srv  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VALUE_BYTES = 64
KEYS = 1000

def run(argv, log, timeout=600):
    log.write("$ %s\n" % " ".join(argv))
    log.flush()
    out = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, timeout=timeout)
    log.write(out.stdout)
    log.flush()
    if out.returncode != 0:
        raise RuntimeError("%s exited %d: %s" % (argv[0], out.returncode,
                                                 out.stdout[-500:]))
    return out.stdout


def measure(pid, fn):
    """Runs fn() (which returns the key operations it did) and returns
    (ops, server CPU seconds, wall seconds, load average at the end)."""
    c0, t0 = srv.cpu_seconds(pid), time.time()
    ops = fn()
    c1, t1 = srv.cpu_seconds(pid), time.time()
    return ops, c1 - c0, t1 - t0, srv.load_average()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=os.path.join(
        ROOT, "bench", "results", time.strftime("%Y-%m-%d") + "-cpu-per-op"))
    ap.add_argument("--batched_ops", type=int, default=400000)
    ap.add_argument("--redis_ops", type=int, default=2000000)
    ap.add_argument("--ghz_seconds", type=int, default=5)
    ap.add_argument("--streams", type=int, default=1,
                    help="the CLI's --batch_streams")
    args = ap.parse_args()
    os.makedirs(os.path.join(args.out, "logs"), exist_ok=True)
    bin_dir = os.path.join(ROOT, "bazel-bin")
    cli = os.path.join(bin_dir, "clients", "cli", "furrballs")
    ghz = os.path.expanduser("~/go/bin/ghz")
    log = open(os.path.join(args.out, "logs", "cpu_per_op.log"), "a")
    servers = srv.Servers(bin_dir, args.out)
    servers.stop_on_signals()
    rows = []
    try:
        fb_addr, fb_pid = servers.start("furrballs", 128, "cpu",
                                        ["--expected_item_bytes=88"])
        rd_addr, rd_pid = servers.start("redis", 128, "cpu")
        rd_port = rd_addr.split(":")[1]
        # Preload the hot keys in both.
        run([cli, "--target=" + fb_addr, "load", "--ops=%d" % (KEYS * 4),
             "--keys=%d" % KEYS, "--value_size=%d" % VALUE_BYTES,
             "--get_ratio=0", "--key_prefix=k", "--concurrency=4"], log)
        key_b64 = base64.b64encode(b"k1").decode()
        run(["redis-benchmark", "-p", rd_port, "-t", "set", "-n", "100000",
             "-r", str(KEYS), "-d", str(VALUE_BYTES), "-q"], log)

        def batched(concurrency):
            def fn():
                run([cli, "--target=" + fb_addr, "load",
                     "--ops=%d" % args.batched_ops, "--keys=%d" % KEYS,
                     "--value_size=%d" % VALUE_BYTES, "--get_ratio=1",
                     "--key_prefix=k", "--concurrency=%d" % concurrency,
                     "--timeout_ms=10000", "--batch_streams=%d" % args.streams], log)
                return args.batched_ops
            return fn

        def unary_ghz():
            text = run([ghz, "--insecure", "--call", "furrballs.v1.Cache/Get",
                        "-d", json.dumps({"key": key_b64}), "--concurrency", "16",
                        "--connections", "4", "-z", "%ds" % args.ghz_seconds,
                        "--timeout", "10s", "--format", "json", fb_addr], log)
            r = json.loads(text[text.index("{"):])
            return (r.get("statusCodeDistribution") or {}).get("OK", 0)

        def redis_p16():
            run(["redis-benchmark", "-p", rd_port, "-t", "get", "-n",
                 str(args.redis_ops), "-r", str(KEYS), "-d", str(VALUE_BYTES),
                 "-c", "16", "-P", "16", "-q"], log)
            return args.redis_ops

        cells = [
            ("furrballs batched stream, 16 callers", fb_pid, batched(16)),
            ("furrballs batched stream, 64 callers", fb_pid, batched(64)),
            ("furrballs unary Get (ghz, 16 calls)", fb_pid, unary_ghz),
            ("redis GET -P 16 (16 clients)", rd_pid, redis_p16),
        ]
        for rnd in range(args.rounds):
            for name, pid, fn in cells:
                ops, cpu, wall, load = measure(pid, fn)
                row = {"round": rnd, "cell": name, "ops": ops, "cpu_s": cpu,
                       "wall_s": wall, "us_per_op": cpu / ops * 1e6,
                       "ops_per_s": ops / wall, "loadavg": load}
                rows.append(row)
                print("%d %-40s %8.3f us/op  %9.0f ops/s  load %s" % (
                    rnd, name, row["us_per_op"], row["ops_per_s"], load),
                    flush=True)
    finally:
        servers.stop_all()
    with open(os.path.join(args.out, "cpu_per_op.jsonl"), "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    print("\nmedians over %d rounds:" % args.rounds)
    med = {}
    for name in dict.fromkeys(r["cell"] for r in rows):
        us = statistics.median(r["us_per_op"] for r in rows if r["cell"] == name)
        tput = statistics.median(r["ops_per_s"] for r in rows if r["cell"] == name)
        med[name] = us
        print("  %-40s %8.3f us/op  %9.0f ops/s" % (name, us, tput))
    redis = med["redis GET -P 16 (16 clients)"]
    for name in med:
        print("  %-40s %5.2fx redis -P 16" % (name, med[name] / redis))


if __name__ == "__main__":
    main()
