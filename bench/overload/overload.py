#!/usr/bin/env python3
"""Overload: unary Gets at a light load, 1x and 3x the server's measured capacity.

For each round: starts furrballs_server (with --dispatch and any extra
flags, e.g. --max_in_flight, --grpc_memory_mb, --max_concurrent_streams),
writes one key, measures capacity (Gets per second that ghz gets answered
with no rate limit, 16 workers on 4 connections), then drives Gets with ghz
at a tenth of that rate (the unloaded baseline), at 1x and at 3x, for a
fixed time each. For each load it reports, over the admitted requests
(status OK), p50 and p99 latency, the share rejected (RESOURCE_EXHAUSTED;
any other error is counted apart), the p99 of the rejections (how fast
excess is refused), and the server's peak RSS (VmHWM). Prints the median of
the rounds per load, the goal's ratio (3x admitted p99 / unloaded p99; the
goal is <= 2) and writes the rounds as JSON.

    bench/overload/overload.py [--rounds 3] [--seconds 10]
        [--dispatch direct] [--server_flag=--max_in_flight=4096 ...]
        [--server bazel-bin/service/furrballs_server] [--out overload.json]

Needs ghz (tools/install_go_tools.sh). ghz runs on the same machine as the
server, so on a small VM the client's own CPU is part of the load.
"""
import argparse
import base64
import json
import os
import shutil
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench", "security"))
from auth_cost import start_server  # noqa: E402  (one way to start a server)

KEY = base64.b64encode(b"overload-key").decode()
# (row name, share of capacity offered, ghz workers)
LOADS = (("unloaded", 0.1, 4), ("1x", 1.0, 64), ("3x", 3.0, 192))


def peak_rss_mib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def ghz(binary, port, extra):
    out = subprocess.run([binary, "--insecure", "--call", "furrballs.v1.Cache/Get",
                          "-d", json.dumps({"key": KEY}), "--format", "json"] + extra +
                         ["127.0.0.1:%d" % port],
                         check=False, capture_output=True, text=True, timeout=600)
    return json.loads(out.stdout)


def percentile(values, q):
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def summarize(report):
    ok, rejected, other = [], [], 0
    for d in report.get("details") or []:
        ms = d["latency"] / 1e6
        if d.get("status") == "OK":
            ok.append(ms)
        elif d.get("status") == "ResourceExhausted":
            rejected.append(ms)
        else:
            other += 1
    total = len(ok) + len(rejected) + other
    return {
        "requests": total,
        "admitted_per_s": len(ok) / (report["total"] / 1e9),
        "p50_ms": percentile(ok, 0.50),
        "p99_ms": percentile(ok, 0.99),
        "rejected_share": len(rejected) / total if total else float("nan"),
        "rejection_p99_ms": percentile(rejected, 0.99),
        "other_errors": other,
    }


def run_round(a):
    flags = ["--dispatch=%s" % a.dispatch] + a.server_flag
    proc, port = start_server(a.server, "plaintext", None, None, flags)
    try:
        subprocess.run([a.ghz, "--insecure", "--call", "furrballs.v1.Cache/Set", "-d",
                        json.dumps({"key": KEY, "value": base64.b64encode(b"x" * 100).decode()}),
                        "--total", "1", "127.0.0.1:%d" % port], check=True, capture_output=True)
        capacity = ghz(a.ghz, port, ["--concurrency", "16", "--connections", "4",
                                     "-z", "%ds" % a.seconds])["rps"]
        row = {"capacity_per_s": capacity}
        for name, share, workers in LOADS:
            rate = max(1, int(capacity * share))
            report = ghz(a.ghz, port, ["--rps", str(rate), "--concurrency", str(workers),
                                       "--connections", "4", "-z", "%ds" % a.seconds])
            row[name] = dict(summarize(report), offered_per_s=rate)
        row["peak_rss_mib"] = peak_rss_mib(proc.pid)
        return row
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seconds", type=int, default=10)
    p.add_argument("--dispatch", default="direct", choices=["direct", "nodejob"])
    p.add_argument("--server_flag", action="append", default=[],
                   help="a flag for the server (repeatable), e.g. --server_flag=--max_in_flight=64")
    p.add_argument("--server", default=os.path.join(ROOT, "bazel-bin/service/furrballs_server"))
    p.add_argument("--ghz", default=shutil.which("ghz") or os.path.expanduser("~/go/bin/ghz"))
    p.add_argument("--out", default="overload.json")
    a = p.parse_args()
    rounds = []
    for r in range(a.rounds):
        rounds.append(run_round(a))
        print("round %d: %s" % (r + 1, json.dumps(rounds[-1])), file=sys.stderr)
    with open(a.out, "w") as f:
        json.dump({"args": vars(a), "rounds": rounds}, f, indent=1)
    med = lambda xs: statistics.median(xs)  # noqa: E731
    print("capacity %.0f Gets/s, --dispatch=%s %s, %d s per load, median of %d rounds" % (
        med([r["capacity_per_s"] for r in rounds]), a.dispatch, " ".join(a.server_flag),
        a.seconds, a.rounds))
    print("| load | offered/s | admitted/s | admitted p50 ms | admitted p99 ms | rejected "
          "| rejection p99 ms | other errors |")
    print("|---|---|---|---|---|---|---|---|")
    for name, _, _ in LOADS:
        cells = [r[name] for r in rounds]
        print("| %s | %.0f | %.0f | %.2f | %.2f | %.1f%% | %.2f | %d |" % (
            name, med([c["offered_per_s"] for c in cells]),
            med([c["admitted_per_s"] for c in cells]), med([c["p50_ms"] for c in cells]),
            med([c["p99_ms"] for c in cells]), 100 * med([c["rejected_share"] for c in cells]),
            med([c["rejection_p99_ms"] for c in cells]),
            med([c["other_errors"] for c in cells])))
    ratios = [r["3x"]["p99_ms"] / r["unloaded"]["p99_ms"] for r in rounds]
    print("3x admitted p99 / unloaded p99: median %.1f (rounds %s); goal <= 2" % (
        med(ratios), ", ".join("%.1f" % x for x in ratios)))
    print("server peak RSS (VmHWM) median %.0f MiB" % med([r["peak_rss_mib"] for r in rounds]))


if __name__ == "__main__":
    main()
