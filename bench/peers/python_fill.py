#!/usr/bin/env python3
"""Operations per Batch message with concurrent Python threads through one
Client (issue 14: how well the Python batcher fills its messages), for one
or more copies of the client package side by side against one server.

Each thread runs --ops_per_thread calls in a loop (set+get pairs by
default, as clients/README.md's figure; --gets for gets only) through one
shared Client with its defaults (one stream; a call alone in flight goes
unary). Reported per round and package: Batch messages (the server's
furrballs_requests_total{op="batch"}, scraped before and after), unary
calls, operations per message, operations per second. Rounds alternate the
packages.

Usage (Debian's python3, which has grpcio):
  bench/peers/python_fill.py --server bazel-bin/service/furrballs_server \\
      --package new=clients/python --package old=/tmp/old/clients/python
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import servers as srv  # noqa: E402

# Runs in a child process, so that each package is imported on its own.
WORKER = r'''
import sys, threading, time
import furrballs_client as fb
target, threads, per_thread, gets = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
with fb.Client(target, timeout=10.0) as client:
    client.set("fill-0", "v")
    start = threading.Barrier(threads + 1)
    def work(t):
        start.wait()
        for i in range(per_thread):
            key = "fill-%d" % (i % 1000)
            if gets:
                client.get(key)
            else:
                client.set(key, b"x" * 64)
                client.get(key)
    workers = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    start.wait()
    t0 = time.monotonic()
    for w in workers:
        w.join()
    print("seconds %f" % (time.monotonic() - t0))
'''


def requests(metrics_port):
    url = "http://127.0.0.1:%d/metrics" % metrics_port
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    out = {}
    for m in re.finditer(r'^furrballs_requests_total\{[^}]*op="(\w+)"[^}]*\} (\S+)$', text, re.M):
        out[m.group(1)] = out.get(m.group(1), 0) + float(m.group(2))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--server", required=True, help="furrballs_server binary")
    ap.add_argument("--package", action="append", required=True,
                    help="NAME=DIR: a directory holding the furrballs_client package")
    ap.add_argument("--threads", type=int, default=16)
    ap.add_argument("--ops_per_thread", type=int, default=500)
    ap.add_argument("--gets", action="store_true", help="gets only, not set+get pairs")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    port, metrics_port = srv.free_port(), srv.free_port()
    server = subprocess.Popen(
        [args.server, "--listen_address=127.0.0.1:%d" % port,
         "--metrics_address=127.0.0.1:%d" % metrics_port, "--memory_mb=64"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    rows = []
    try:
        srv.wait_port(port, server)
        packages = [p.split("=", 1) for p in args.package]
        ops = args.threads * args.ops_per_thread * (1 if args.gets else 2)
        for rnd in range(args.rounds):
            for name, path in packages[rnd % len(packages):] + packages[:rnd % len(packages)]:
                before = requests(metrics_port)
                out = subprocess.run(
                    ["/usr/bin/python3", "-c", WORKER, "127.0.0.1:%d" % port,
                     str(args.threads), str(args.ops_per_thread), "1" if args.gets else "0"],
                    env={**os.environ, "PYTHONPATH": os.path.abspath(path)},
                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
                if out.returncode != 0:
                    raise RuntimeError(out.stdout[-2000:])
                seconds = float(re.search(r"seconds (\S+)", out.stdout).group(1))
                after = requests(metrics_port)
                delta = {k: after.get(k, 0) - before.get(k, 0) for k in after}
                messages = delta.get("batch", 0)
                unary = sum(delta.get(k, 0) for k in ("get", "set"))
                row = {"round": rnd, "package": name, "messages": messages, "unary": unary,
                       "ops_per_msg": (ops - unary) / messages if messages else float("nan"),
                       "ops_per_s": ops / seconds}
                rows.append(row)
                print("%d %-6s %6d messages %5d unary  %5.1f ops/msg  %7.0f ops/s" % (
                    rnd, name, messages, unary, row["ops_per_msg"], row["ops_per_s"]), flush=True)
    finally:
        server.terminate()
        server.wait(timeout=20)
    print("\n| package | ops/message | ops/s | rounds |\n|---|---:|---:|---:|")
    for name, _ in packages:
        rs = [r for r in rows if r["package"] == name]
        print("| %s | %.1f | %.0f | %d |" % (
            name, statistics.median(r["ops_per_msg"] for r in rs),
            statistics.median(r["ops_per_s"] for r in rs), len(rs)))


if __name__ == "__main__":
    main()
