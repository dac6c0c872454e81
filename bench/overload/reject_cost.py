#!/usr/bin/env python3
"""Server CPU per refused call against per served call (issue 15 item 4).

Shedding load keeps admitted latency bounded only if refusing a call costs
the server much less than serving one. With rho = (CPU per refusal) /
(CPU per served call), serving a fraction f of its capacity and refusing the
rest of a load three times that capacity needs f + (3 - f) * rho <= 1 of
the server's CPU, so no admitted work fits at all once rho >= 1/3 (and on
this host the load generator shares the same two cores). This measures rho.

A refusal is measured at the earliest point the service refuses anything:
a unary Get with an unknown bearer token, answered UNAUTHENTICATED after the
token check and before the body is parsed. The --max_in_flight refusal
(RESOURCE_EXHAUSTED) sits right after that check (service/in_flight_limit.h),
so it costs the same gRPC work plus one atomic add; it cannot be forced on a
server whose Gets finish synchronously, which is why the token path stands in
for it. Each round starts one server with a token file and drives ghz
(16 concurrent calls on 4 connections) first with the good token, then with a
wrong one, or the other way round on odd rounds; server CPU is utime + stime
from /proc over each load.

    bench/overload/reject_cost.py [--rounds 5] [--calls 50000]
        [--server bazel-bin/service/furrballs_server] [--out reject_cost.json]

Needs ghz (tools/install_go_tools.sh).
"""
import argparse
import base64
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench", "security"))
from auth_cost import TOKEN, cpu_seconds, start_server  # noqa: E402

KEY = base64.b64encode(b"reject-cost-key").decode()


def drive(ghz, port, token, calls):
    """Runs `calls` Gets with `token`; returns (status counts, ghz's rps)."""
    out = subprocess.run([ghz, "--insecure", "-m",
                          json.dumps({"authorization": "Bearer " + token}),
                          "--call", "furrballs.v1.Cache/Get", "-d", json.dumps({"key": KEY}),
                          "--total", str(calls), "--concurrency", "16", "--connections", "4",
                          "--format", "json", "127.0.0.1:%d" % port],
                         check=False, capture_output=True, text=True, timeout=600).stdout
    r = json.loads(out)
    return r.get("statusCodeDistribution") or {}, r.get("rps", 0)


def run_round(binary, ghz, tokens, calls, refused_first):
    proc, port = start_server(binary, "plaintext+tokens", None, tokens)
    try:
        value = base64.b64encode(b"v" * 64).decode()
        subprocess.run([ghz, "--insecure", "-m",
                        json.dumps({"authorization": "Bearer " + TOKEN}),
                        "--call", "furrballs.v1.Cache/Set", "-d",
                        json.dumps({"key": KEY, "value": value}), "--total", "1",
                        "127.0.0.1:%d" % port], check=True, capture_output=True)
        row = {}
        order = [("refused", "wrong-" + TOKEN), ("served", TOKEN)]
        if not refused_first:
            order.reverse()
        for name, token in order:
            before = cpu_seconds(proc.pid)
            codes, rps = drive(ghz, port, token, calls)
            used = cpu_seconds(proc.pid) - before
            want = "Unauthenticated" if name == "refused" else "OK"
            if codes.get(want, 0) != calls:
                raise RuntimeError("%s: expected %d %s, got %s" % (name, calls, want, codes))
            row[name] = used / calls * 1e6
            row[name + "_rps"] = rps
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        proc.stdout.close()
    row["rho"] = row["refused"] / row["served"]
    return row


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--calls", type=int, default=50000)
    p.add_argument("--server", default=os.path.join(ROOT, "bazel-bin/service/furrballs_server"))
    p.add_argument("--ghz", default=shutil.which("ghz") or os.path.expanduser("~/go/bin/ghz"))
    p.add_argument("--out", default="reject_cost.json")
    a = p.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as d:
        tokens = os.path.join(d, "tokens")
        with open(tokens, "w") as f:
            f.write("read-write %s\n" % TOKEN)
        for i in range(a.rounds):
            row = run_round(a.server, a.ghz, tokens, a.calls, refused_first=(i % 2 == 0))
            with open("/proc/loadavg") as f:
                row["loadavg"] = " ".join(f.read().split()[:3])
            rows.append(row)
            print("round %d: served %.1f us CPU/call (%.0f/s), refused %.1f us (%.0f/s), "
                  "rho %.2f (load %s)" % (i + 1, row["served"], row["served_rps"],
                                          row["refused"], row["refused_rps"], row["rho"],
                                          row["loadavg"]), flush=True)
    with open(a.out, "w") as f:
        json.dump(rows, f, indent=1)
    med = lambda k: statistics.median(r[k] for r in rows)  # noqa: E731
    rho = med("rho")
    print("\nmedians of %d rounds of %d calls each:" % (a.rounds, a.calls))
    print("| | server CPU per call (us) | calls/s |")
    print("| --- | --- | --- |")
    print("| served Get | %.1f | %.0f |" % (med("served"), med("served_rps")))
    print("| refused (UNAUTHENTICATED, before parsing) | %.1f | %.0f |" % (
        med("refused"), med("refused_rps")))
    print("rho = refused / served = %.2f; at 3x the serving capacity the server keeps up "
          "only if f + (3 - f) * rho <= 1 for the admitted fraction f: largest f = %s" % (
              rho, "%.2f" % ((1 - 3 * rho) / (1 - rho)) if rho < 1 / 3 else
              "none (rho >= 1/3)"))


if __name__ == "__main__":
    main()
