#!/usr/bin/env python3
"""Server CPU per unary Get with and without bearer tokens (and TLS).

Starts furrballs_server once per mode and round, writes one key, drives
furrballs.v1.Cache/Get with ghz for a fixed number of calls, and divides the
server's CPU time over the run (utime + stime from /proc/PID/stat) by the
calls answered OK. Modes: plaintext, plaintext + tokens, TLS, TLS + tokens;
their order rotates from round to round so that drift in the machine's load
falls on all of them. Prints one row per mode with the median (and range) of
the rounds, and writes the rounds as JSON.

    bench/security/auth_cost.py [--rounds 5] [--calls 100000]
        [--server bazel-bin/service/furrballs_server] [--out auth_cost.json]

Needs ghz (tools/install_go_tools.sh) and the openssl tool. The server runs
with its defaults (direct dispatch, every NUMA node) and no metrics listener.
"""
import argparse
import base64
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench", "peers"))
from servers import cpu_seconds  # noqa: E402,F401  (nanosecond process CPU clock)
TOKEN = "bench-0123456789abcdef0123456789abcdef"
KEY = base64.b64encode(b"auth-cost-key").decode()
MODES = ["plaintext", "plaintext+tokens", "tls", "tls+tokens"]


def start_server(binary, mode, certs, tokens, extra_flags=()):
    flags = [binary, "--listen_address=127.0.0.1:0", "--metrics_address=", "--memory_mb=64"]
    flags += list(extra_flags)
    if mode.startswith("tls"):
        flags += ["--tls_cert_file=%s/bench-server.crt" % certs,
                  "--tls_key_file=%s/bench-server.key" % certs]
    if mode.endswith("tokens"):
        flags += ["--auth_token_file=%s" % tokens]
    proc = subprocess.Popen(flags, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 60
    output = []
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        output.append(line)
        m = re.search(r"serving furrballs\.v1\.Cache on 127\.0\.0\.1:(\d+)", line)
        if m:
            # Nothing more is printed until shutdown; the pipe cannot fill.
            return proc, int(m.group(1))
    proc.kill()
    raise RuntimeError("server did not start:\n" + "".join(output))


def ghz_args(ghz, mode, certs, port):
    args = [ghz]
    if mode.startswith("tls"):
        args += ["--cacert", "%s/bench-ca.crt" % certs]
    else:
        args += ["--insecure"]
    if mode.endswith("tokens"):
        args += ["-m", json.dumps({"authorization": "Bearer " + TOKEN})]
    return args, "127.0.0.1:%d" % port


def run_once(binary, ghz, mode, certs, tokens, calls):
    proc, port = start_server(binary, mode, certs, tokens)
    try:
        base, target = ghz_args(ghz, mode, certs, port)
        value = base64.b64encode(b"v" * 64).decode()
        subprocess.run(base + ["--call", "furrballs.v1.Cache/Set", "-d",
                               json.dumps({"key": KEY, "value": value}), "--total", "1", target],
                       check=True, capture_output=True)
        before = cpu_seconds(proc.pid)
        out = subprocess.run(base + ["--call", "furrballs.v1.Cache/Get", "-d",
                                     json.dumps({"key": KEY}), "--total", str(calls),
                                     "--concurrency", "16", "--connections", "4",
                                     "--format", "json", target],
                             check=True, capture_output=True, text=True).stdout
        used = cpu_seconds(proc.pid) - before
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        proc.stdout.close()
    r = json.loads(out)
    ok = (r.get("statusCodeDistribution") or {}).get("OK", 0)
    if ok != calls:
        raise RuntimeError("%s: %d of %d Gets OK: %s" % (mode, ok, calls,
                                                          r.get("statusCodeDistribution")))
    lat = {int(d["percentage"]): d["latency"] / 1e3 for d in r.get("latencyDistribution") or []}
    return {"mode": mode, "calls": ok, "server_cpu_s": used,
            "cpu_us_per_get": used / ok * 1e6, "rps": r.get("rps", 0), "p50_us": lat.get(50)}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--calls", type=int, default=100000)
    p.add_argument("--server", default=os.path.join(ROOT, "bazel-bin/service/furrballs_server"))
    p.add_argument("--ghz", default=shutil.which("ghz") or os.path.expanduser("~/go/bin/ghz"))
    p.add_argument("--out", default="auth_cost.json")
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as certs:
        subprocess.run([os.path.join(ROOT, "tests/security/make_test_certs.sh"), certs, "bench"],
                       check=True)
        tokens = os.path.join(certs, "tokens")
        with open(tokens, "w") as f:
            f.write("read-write %s\n" % TOKEN)
        rows = []
        for i in range(a.rounds):
            order = MODES[i % len(MODES):] + MODES[:i % len(MODES)]
            for mode in order:
                row = run_once(a.server, a.ghz, mode, certs, tokens, a.calls)
                row["round"] = i + 1
                with open("/proc/loadavg") as f:
                    row["loadavg"] = " ".join(f.read().split()[:3])
                rows.append(row)
                print("round %d %-17s %6.1f us CPU/Get  %7.0f Gets/s  p50 %5.0f us  (load %s)" % (
                    i + 1, mode, row["cpu_us_per_get"], row["rps"], row["p50_us"] or 0,
                    row["loadavg"]), flush=True)
    with open(a.out, "w") as f:
        json.dump(rows, f, indent=1)
    print("\nmedians over %d rounds of %d Gets (range):" % (a.rounds, a.calls))
    print("| mode | server CPU per Get (us) | Gets/s | p50 (us) |")
    print("| --- | --- | --- | --- |")
    for mode in MODES:
        mine = [r for r in rows if r["mode"] == mode]
        cpu = [r["cpu_us_per_get"] for r in mine]
        rps = [r["rps"] for r in mine]
        p50 = [r["p50_us"] for r in mine]
        print("| %s | %.1f (%.1f-%.1f) | %.0f | %.0f |" % (
            mode, statistics.median(cpu), min(cpu), max(cpu), statistics.median(rps),
            statistics.median(p50)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
