#!/usr/bin/env python3
"""Server CPU per key operation of two or more builds, side by side (issue
14): each config is a furrballs_server binary and the CLI (furrballs) that
loads it, so a server change and a client change can each be measured
against the build before it. Redis (redis-benchmark -P 16, 16 clients) runs
in the same rounds as the yardstick. With --redis_in_flight, Redis also runs
with 16 operations in flight, as many as 16 synchronous callers give the
Batch stream: one client pipelining 16 (-c 1 -P 16: one connection, like the
client's one stream) and 16 clients without pipelining (-c 16 -P 1). Issue
14's yardstick, -c 16 -P 16, keeps 256 in flight, so each wake-up of Redis's
thread can answer many connections' commands.

Per config and round: the Batch stream through the CLI's automatic batching
with --callers concurrent callers (each value a cell), and unary Get via ghz
(16 calls over 4 connections). Per cell: server CPU per key op (CPU time,
user + system, of the server process over the load / key ops), operations
per Batch message (the server's furrballs_requests_total{op="batch"}
scraped before and after), CPU and context switches (all the server's
threads, /proc/PID/task/*/status) per message, throughput and the CLI's
p50. Rounds are interleaved, the order rotated per round; the report gives
medians and, per config, the median over rounds of its ratio to the first
config in the same round.

With --empty, the empty-handler server (//bench/service:empty_server: the
same gRPC server, a Batch handler that only parses each message and answers
it with fixed values) runs the same cells in the same rounds: the floor of
what gRPC 1.51 costs per message and per op here. The report then gives,
per config and cell, the median over rounds of its ratio to the floor (CPU
per key op; for unary Get also ghz's rate), and what it adds per message.

Usage: bench/peers/cpu_ab.py --config before=OLD_SERVER,OLD_CLI
           --config after=NEW_SERVER,NEW_CLI [--rounds 5] [--callers 16,64]
           [--empty empty=EMPTY_SERVER,CLI]
A config may add server flags after the two paths: NAME=SERVER,CLI,--flag=v
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import servers as srv  # noqa: E402

KEYS = 1000
VALUE_BYTES = 64
REDIS_OPS = 2000000


def context_switches(pid):
    n = 0
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/status" % (pid, tid)) as f:
                for line in f:
                    if "ctxt_switches:" in line:  # voluntary and not
                        n += int(line.split()[1])
        except OSError:
            pass  # a thread that ended
    return n


def batch_messages(metrics_port):
    url = "http://127.0.0.1:%d/metrics" % metrics_port
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    return sum(float(line.split()[-1]) for line in text.splitlines()
               if line.startswith("furrballs_requests_total") and 'op="batch"' in line)


def run(argv):
    out = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, timeout=600)
    if out.returncode != 0:
        raise RuntimeError("%s exited %d: %s" % (argv[0], out.returncode, out.stdout[-500:]))
    return out.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", action="append", required=True,
                    help="NAME=SERVER_BINARY,CLI_BINARY[,server flags...]")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--callers", default="16,64",
                    help="comma-separated concurrent callers of the Batch cells")
    ap.add_argument("--ops", type=int, default=150000, help="key ops per Batch cell")
    ap.add_argument("--ghz_seconds", type=int, default=5, help="0: no unary cell")
    ap.add_argument("--no_redis", action="store_true")
    ap.add_argument("--redis_in_flight", action="store_true",
                    help="also measure Redis with 16 operations in flight (-c 1 -P 16, -c 16 -P 1)")
    ap.add_argument("--empty", default=None,
                    help="NAME=EMPTY_SERVER_BINARY,CLI_BINARY[,server flags...]: the "
                    "empty-handler server in the same rounds (the floor)")
    ap.add_argument("--out", default=None, help="write rows as JSON lines here")
    args = ap.parse_args()
    ghz = os.path.expanduser("~/go/bin/ghz")
    procs, rows = {}, []
    try:
        for spec in args.config:
            name, rest = spec.split("=", 1)
            server_bin, cli, *flags = rest.split(",")
            port, metrics_port = srv.free_port(), srv.free_port()
            proc = subprocess.Popen(
                [server_bin, "--listen_address=127.0.0.1:%d" % port,
                 "--metrics_address=127.0.0.1:%d" % metrics_port, "--memory_mb=128",
                 "--expected_item_bytes=%d" % (VALUE_BYTES + 24)] + flags,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
            procs[name] = proc
            srv.wait_port(port, proc)
            run([cli, "--target=127.0.0.1:%d" % port, "load", "--ops=%d" % (KEYS * 4),
                 "--keys=%d" % KEYS, "--value_size=%d" % VALUE_BYTES, "--get_ratio=0",
                 "--key_prefix=k", "--concurrency=4"])
            procs[name].info = (port, metrics_port, cli)
        names = list(procs)
        empty = None
        if args.empty:
            # It answers every Get with a fixed value: nothing to preload.
            empty, rest = args.empty.split("=", 1)
            server_bin, cli, *flags = rest.split(",")
            port, metrics_port = srv.free_port(), srv.free_port()
            proc = subprocess.Popen(
                [server_bin, "--address=127.0.0.1:%d" % port,
                 "--metrics_address=127.0.0.1:%d" % metrics_port] + flags,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
            procs[empty] = proc
            srv.wait_port(port, proc)
            proc.info = (port, metrics_port, cli)
        if not args.no_redis:
            port = srv.free_port()
            proc = subprocess.Popen(
                ["redis-server", "--bind", "127.0.0.1", "--port", str(port), "--save", "",
                 "--appendonly", "no", "--daemonize", "no"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            procs["redis"] = proc
            srv.wait_port(port, proc)
            proc.info = (port, None, None)
            run(["redis-benchmark", "-p", str(port), "-t", "set", "-n", "100000",
                 "-r", str(KEYS), "-d", str(VALUE_BYTES), "-q"])
        callers = [int(c) for c in args.callers.split(",") if c]
        order = list(procs)
        for rnd in range(args.rounds):
            k = rnd % len(order)
            for name in order[k:] + order[:k]:
                proc = procs[name]
                port, metrics_port, cli = proc.info
                if name == "redis":
                    cells = [("redis GET -P 16", (16, 16))]
                    if args.redis_in_flight:
                        cells += [("redis GET -c 1 -P 16", (1, 16)),
                                  ("redis GET -c 16 -P 1", (16, 1))]
                else:
                    cells = [("batch, %d callers" % c, c) for c in callers]
                    if args.ghz_seconds > 0:
                        cells.append(("unary Get (ghz)", "ghz"))
                for cell, what in cells:
                    m0 = batch_messages(metrics_port) if metrics_port else 0
                    s0, c0, t0 = context_switches(proc.pid), srv.cpu_seconds(proc.pid), time.time()
                    p50 = None
                    if name == "redis":
                        clients, depth = what
                        # Unpipelined Redis answers ~10x fewer a second: fewer ops, similar time.
                        ops = REDIS_OPS if depth > 1 else REDIS_OPS // 10
                        run(["redis-benchmark", "-p", str(port), "-t", "get", "-n",
                             str(ops), "-r", str(KEYS), "-d", str(VALUE_BYTES), "-c",
                             str(clients), "-P", str(depth), "-q"])
                    elif what == "ghz":
                        text = run([ghz, "--insecure", "--call", "furrballs.v1.Cache/Get",
                                    "-d", json.dumps({"key": "azE="}), "--concurrency", "16",
                                    "--connections", "4", "-z", "%ds" % args.ghz_seconds,
                                    "--timeout", "10s", "--format", "json",
                                    "127.0.0.1:%d" % port])
                        r = json.loads(text[text.index("{"):])
                        ops = (r.get("statusCodeDistribution") or {}).get("OK", 0)
                    else:
                        text = run([cli, "--target=127.0.0.1:%d" % port, "load",
                                    "--ops=%d" % args.ops, "--keys=%d" % KEYS,
                                    "--value_size=%d" % VALUE_BYTES, "--get_ratio=1",
                                    "--key_prefix=k", "--concurrency=%d" % what,
                                    "--timeout_ms=10000"])
                        ops = args.ops
                        p50 = float(re.search(r"p50 ([0-9.]+) us", text).group(1))
                    cpu, wall = srv.cpu_seconds(proc.pid) - c0, time.time() - t0
                    switches = context_switches(proc.pid) - s0
                    msgs = (batch_messages(metrics_port) - m0) if metrics_port else 0
                    row = {"round": rnd, "config": name, "cell": cell, "ops": ops,
                           "us_per_op": cpu / ops * 1e6, "ops_per_s": ops / wall, "p50_us": p50,
                           "loadavg": srv.load_average()}
                    if msgs and cell.startswith("batch"):
                        row.update(ops_per_msg=ops / msgs, us_per_msg=cpu / msgs * 1e6,
                                   switches_per_msg=switches / msgs)
                    elif name == "redis" and what[1] > 1:
                        # A message is one pipelined round of -P commands.
                        rounds_done = ops / what[1]
                        row.update(ops_per_msg=what[1], us_per_msg=cpu / rounds_done * 1e6,
                                   switches_per_msg=switches / rounds_done)
                    rows.append(row)
                    print("%d %-8s %-18s %6.2f us/op %8.0f ops/s%s  load %s" % (
                        rnd, name, cell, row["us_per_op"], row["ops_per_s"],
                        "  %.1f ops/msg %.1f us/msg %.2f cs/msg" % (
                            row["ops_per_msg"], row["us_per_msg"], row["switches_per_msg"])
                        if "ops_per_msg" in row else "", row["loadavg"]), flush=True)
    finally:
        for proc in procs.values():
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
    if args.out:
        with open(args.out, "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
    report(rows, names, args.rounds)
    if empty:
        report_floor(rows, names, empty, args.rounds)


def med(vals):
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else float("nan")


def per_round(rows, rounds, a, b, key, combine):
    """combine(a's value, b's value) in each round where both rows exist;
    a and b are (config, cell)."""
    out = []
    for rnd in range(rounds):
        x = [r.get(key) for r in rows if r["round"] == rnd and (r["config"], r["cell"]) == a]
        y = [r.get(key) for r in rows if r["round"] == rnd and (r["config"], r["cell"]) == b]
        if x and y and x[0] is not None and y[0] is not None:
            out.append(combine(x[0], y[0]))
    return out


def fmt_range(vals, digits=2):
    if not vals:
        return "–"
    f = "%%.%df" % digits
    return (f + " [" + f + "–" + f + "]") % (med(vals), min(vals), max(vals))


def report_floor(rows, names, empty, rounds):
    """Each config's cells against the empty server's same cell, round by
    round: CPU per key op (ratio), CPU per message (difference), and for
    unary Get ghz's rate (ratio, issue 14's >= 0.95x goal)."""
    print("\nAgainst the floor (%s), per round then the median [range]:" % empty)
    print("\n| config | cell | CPU µs/op ÷ floor | µs/msg − floor's | ops/msg, floor's | "
          "rate ÷ floor's |")
    print("|---|---|---:|---:|---:|---:|")
    for name in names:
        for cell in dict.fromkeys(r["cell"] for r in rows if r["config"] == name):
            a, b = (name, cell), (empty, cell)
            ratio = per_round(rows, rounds, a, b, "us_per_op", lambda x, y: x / y)
            extra = per_round(rows, rounds, a, b, "us_per_msg", lambda x, y: x - y)
            rate = per_round(rows, rounds, a, b, "ops_per_s", lambda x, y: x / y)
            fill = [med(r.get("ops_per_msg") for r in rows if (r["config"], r["cell"]) == k)
                    for k in (a, b)]
            print("| %s | %s | %s | %s | %s | %s |" % (
                name, cell, fmt_range(ratio), fmt_range(extra, 1),
                "%.1f, %.1f" % tuple(fill) if extra else "–", fmt_range(rate)))
    floor_msg = [r["us_per_msg"] for r in rows
                 if r["config"] == empty and r.get("us_per_msg") is not None]
    redis_round = [r["us_per_msg"] for r in rows
                   if r["config"] == "redis" and r["cell"] == "redis GET -c 1 -P 16"]
    if floor_msg:
        print("\nThe floor's CPU per message, all its Batch cells: %s µs; at 16 ops a message "
              "that is %.2f µs per op" % (fmt_range(floor_msg, 1), med(floor_msg) / 16))
    if redis_round:
        print("Redis -c 1 -P 16, per 16-command round: %s µs (%.2f µs per op)" % (
            fmt_range(redis_round, 1), med(redis_round) / 16))


def report(rows, names, rounds):
    print("\n| config | cell | server CPU µs/op | ratio to %s | ops/msg | µs/msg | "
          "switches/msg | ops/s | p50 µs |" % names[0])
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, cell in dict.fromkeys((r["config"], r["cell"]) for r in rows):
        rs = [r for r in rows if r["config"] == name and r["cell"] == cell]
        ratios = []
        for rnd in range(rounds):
            a = [r["us_per_op"] for r in rs if r["round"] == rnd]
            b = [r["us_per_op"] for r in rows
                 if r["round"] == rnd and r["config"] == names[0] and r["cell"] == cell]
            if a and b:
                ratios.append(a[0] / b[0])
        us = [r["us_per_op"] for r in rs]
        print("| %s | %s | %.2f [%.2f–%.2f] | %s | %s | %s | %s | %.0f | %s |" % (
            name, cell, med(us), min(us), max(us),
            "%.2f [%.2f–%.2f]" % (med(ratios), min(ratios), max(ratios)) if ratios else "–",
            *("%.1f" % med(r.get(k) for r in rs) if "ops_per_msg" in rs[0] else "–"
              for k in ("ops_per_msg", "us_per_msg")),
            "%.2f" % med(r.get("switches_per_msg") for r in rs) if "ops_per_msg" in rs[0] else "–",
            med(r["ops_per_s"] for r in rs),
            "%.0f" % med(r["p50_us"] for r in rs) if rs[0]["p50_us"] is not None else "–"))

    redis_cells = list(dict.fromkeys(r["cell"] for r in rows if r["config"] == "redis"))
    if not redis_cells:
        return
    print("\nServer CPU per key op against each Redis cell: median of the per-round ratios [range].")
    print("\n| config | cell | ÷ %s |" % " | ÷ ".join(redis_cells))
    print("|---|---|%s" % ("---:|" * len(redis_cells)))
    for name, cell in dict.fromkeys((r["config"], r["cell"]) for r in rows if r["config"] != "redis"):
        cols = []
        for rc in redis_cells:
            ratios = []
            for rnd in range(rounds):
                a = [r["us_per_op"] for r in rows
                     if r["round"] == rnd and r["config"] == name and r["cell"] == cell]
                b = [r["us_per_op"] for r in rows
                     if r["round"] == rnd and r["config"] == "redis" and r["cell"] == rc]
                if a and b:
                    ratios.append(a[0] / b[0])
            cols.append("%.2f [%.2f–%.2f]" % (med(ratios), min(ratios), max(ratios))
                        if ratios else "–")
        print("| %s | %s | %s |" % (name, cell, " | ".join(cols)))


if __name__ == "__main__":
    main()
