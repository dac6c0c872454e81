#!/usr/bin/env python3
"""The peers benchmark: Furrballs against Redis 7 and memcached 1.6 on loopback.

bench/peers/run.sh is the entry point (it installs, builds, then runs this).
This script starts every server with the same memory budget, drives them with
our C++ driver (//bench/peers:peers_bench), with YCSB 0.17.0 through the
bindings in bench/ycsb, and with redis-benchmark (to validate the driver); it
measures the gRPC transport limit with ghz against Furrballs Get and against
//bench/service:empty_server; it stops everything and writes
bench/results/<date>-<host>/ with report.md, the raw data and PNG plots.

Every server it starts is its own child process, stopped by pid at the end,
also on failure or Ctrl-C. Method and settings: docs/peers_bench.md.
"""

import argparse
import base64
import csv
import datetime
import io
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import time

from servers import (Progress, Servers, binary_identity, cpu_seconds, deb_version,
                     load_average, machine_basics, rss_bytes, tool_version)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
YCSB_DIR = os.path.join(ROOT, "bench", "ycsb")

# One memory budget for every system: Furrballs --memory_mb (its value pages;
# key metadata comes on top), Redis maxmemory (its whole data set, metadata
# included) and memcached -m (its slab memory, item headers included).
MODES = {
    "full": dict(
        values=[64, 1024], records=150000, threads=4, seconds=3.0, warmup=1.0,
        memory_mb=128, open_rate=4000,
        depth1_cells=["A:zipfian:1:0", "B:zipfian:1:0", "C:zipfian:1:0",
                      "F:zipfian:1:0", "A:uniform:1:0", "C:uniform:1:0",
                      "B:zipfian:1:{rate}"],
        depth16_cells=["A:zipfian:16:0", "B:zipfian:16:0", "C:zipfian:16:0",
                       "F:zipfian:16:0"],
        caller_counts=[16, 64], caller_cells=["C:zipfian:1:0", "A:zipfian:1:0"],
        caller_values=[64], rounds=3,
        validation_seconds=2.0, rb_requests=60000,
        ycsb_records=50000, ycsb_ops=100000, ycsb_workloads="abcf",
        ycsb_max_seconds=45, ghz_seconds=10),
    "short": dict(
        values=[64], records=20000, threads=4, seconds=1.0, warmup=0.3,
        memory_mb=64, open_rate=2000,
        depth1_cells=["A:zipfian:1:0", "B:zipfian:1:{rate}"],
        depth16_cells=["C:zipfian:16:0"],
        caller_counts=[16, 64], caller_cells=["C:zipfian:1:0"], caller_values=[64],
        rounds=1,
        validation_seconds=1.0, rb_requests=10000,
        ycsb_records=5000, ycsb_ops=5000, ycsb_workloads="ac",
        ycsb_max_seconds=20, ghz_seconds=2),
}

SYSTEMS = ["furrballs", "redis", "memcached"]
# The first two also run the depth-1 cells; furrballs_batched's depth-1 call
# is furrballs' (a lone synchronous call goes unary).
FURRBALLS_BACKENDS = ["furrballs", "furrballs_pipeline", "furrballs_multi",
                      "furrballs_batched"]
# Column prefixes of each Furrballs client in the report's ratio table.
BACKEND_ABBREVIATIONS = {"furrballs": "FB", "furrballs_pipeline": "FBp",
                         "furrballs_multi": "FBm", "furrballs_batched": "FBb"}
# Many callers through one client: N driver threads at depth 1 share one
# Furrballs client with automatic batching (furrballs_shared, the Batch
# stream); Redis and memcached get one connection per thread, as their
# clients would.
CALLER_BACKENDS = ["furrballs_shared", "redis", "memcached"]
# The redis-benchmark check passes when the driver's throughput is within this
# fraction of redis-benchmark's, at every depth and command.
VALIDATION_TOLERANCE = 0.25
# Validation runs at one connection per tool (a plain round trip) and at the
# benchmark's thread count.
VALIDATION_CONNECTIONS = 1
# Alternations of the two tools. The first full run used 3 and saw
# redis-benchmark's own throughput vary up to 5x between rounds on a busy
# machine; 5 shorter rounds give the medians more to stand on.
VALIDATION_ROUNDS = 5


def run(argv, log_path, timeout=None, env=None, cwd=None):
    """Runs argv with stdout captured and stderr appended to log_path."""
    with open(log_path, "a") as log:
        log.write("$ %s\n" % " ".join(argv))
        log.flush()
        out = subprocess.run(argv, stdout=subprocess.PIPE, stderr=log, text=True,
                             timeout=timeout, env=env, cwd=cwd)
    if out.returncode != 0:
        raise RuntimeError("%s exited with %d; see %s" % (argv[0], out.returncode, log_path))
    return out.stdout


def machine_facts():
    facts = machine_basics(ROOT)
    facts.update({
        "redis_server": tool_version(["redis-server", "--version"]),
        "memcached": tool_version(["memcached", "-V"]),
        "redis_benchmark": tool_version(["redis-benchmark", "--version"]),
        "libhiredis": deb_version("libhiredis-dev"),
        "libmemcached": deb_version("libmemcached-dev"),
        "grpc_cpp": deb_version("libgrpc++-dev"),
        "java": tool_version(["java", "-version"]),
        "ghz": tool_version([find_ghz() or "ghz", "--version"]),
    })
    return facts


def find_ghz():
    home = os.path.expanduser("~")
    for candidate in [shutil.which("ghz"), os.path.join(home, "go", "bin", "ghz")]:
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def read_jsonl(path):
    rows = []
    if os.path.exists(path):
        with open(path) as f:
            rows = [json.loads(line) for line in f if line.strip()]
    return rows


# ---------------------------------------------------------------- phases


def phase_driver(cfg, servers, bin_dir, out_dir, progress):
    driver = os.path.join(bin_dir, "bench", "peers", "peers_bench")
    jsonl = os.path.join(out_dir, "driver.jsonl")
    rss = []
    for value_bytes in cfg["values"]:
        tag = "v%d" % value_bytes
        item_bytes = 24 + value_bytes
        progress.step("driver, %d B values: starting furrballs, redis, memcached "
                      "(%d MiB each) and loading %d records" %
                      (value_bytes, cfg["memory_mb"], cfg["records"]))
        addr = {}
        for system in SYSTEMS:
            addr[system] = servers.start(
                system, cfg["memory_mb"], tag,
                ["--expected_item_bytes=%d" % item_bytes])
        fb_addr, fb_pid = addr["furrballs"]
        rd_addr, rd_pid = addr["redis"]
        mc_addr, mc_pid = addr["memcached"]
        fb_targets = ["%s@%s@%d" % (b, fb_addr, fb_pid) for b in FURRBALLS_BACKENDS]
        peers = ["redis@%s@%d" % (rd_addr, rd_pid), "memcached@%s@%d" % (mc_addr, mc_pid)]
        common = ["--records=%d" % cfg["records"], "--value_bytes=%d" % value_bytes,
                  "--seconds=%g" % cfg["seconds"], "--warmup_seconds=%g" % cfg["warmup"],
                  "--rounds=%d" % cfg["rounds"], "--out=" + jsonl]
        threads = ["--threads=%d" % cfg["threads"]]
        log = os.path.join(out_dir, "logs", "driver-%s.log" % tag)
        cells1 = [c.format(rate=cfg["open_rate"]) for c in cfg["depth1_cells"]]
        run([driver, "--targets=" + ",".join(fb_targets[:2] + peers),
             "--cells=" + ",".join(cells1), "--load"] + common + threads, log)
        rss_after_load = {s: rss_bytes(addr[s][1]) for s in SYSTEMS}
        progress.step("driver, %d B values: %d depth-1 cells x 4 clients done; "
                      "depth-16 cells" % (value_bytes, len(cells1)))
        run([driver, "--targets=" + ",".join(fb_targets + peers),
             "--cells=" + ",".join(cfg["depth16_cells"]), "--load=false"] + common +
            threads, log)
        if value_bytes in cfg["caller_values"]:
            callers = ["%s@%s@%d" % (CALLER_BACKENDS[0], fb_addr, fb_pid)] + peers
            for n in cfg["caller_counts"]:
                progress.note("driver, %d B values: %d callers through one client" %
                              (value_bytes, n))
                run([driver, "--targets=" + ",".join(callers),
                     "--cells=" + ",".join(cfg["caller_cells"]), "--load=false",
                     "--threads=%d" % n] + common, log)
        for system in SYSTEMS:
            rss.append({"value_bytes": value_bytes, "system": system,
                        "rss_after_load_bytes": rss_after_load[system],
                        "rss_at_end_bytes": rss_bytes(addr[system][1])})
            servers.stop(system)
    with open(os.path.join(out_dir, "server_rss.json"), "w") as f:
        json.dump(rss, f, indent=1)


def phase_validation(cfg, servers, bin_dir, out_dir, progress):
    """redis-benchmark and our driver, SET and GET, depth 1 and 16, one Redis.

    Both sides have the same shape: as many client threads as connections,
    64 B values, 16-byte keys drawn uniformly from the same number of keys.
    It runs at one connection (a plain round trip) and at the benchmark's
    thread count. The two tools alternate,
    VALIDATION_ROUNDS times each, and the medians are compared, so that a
    burst of load from other processes does not land on one tool only.
    """
    progress.step("validation: redis-benchmark vs the driver on one Redis, %d rounds"
                  % VALIDATION_ROUNDS)
    driver = os.path.join(bin_dir, "bench", "peers", "peers_bench")
    log = os.path.join(out_dir, "logs", "validation.log")
    keys = cfg["records"]
    address, pid = servers.start("redis", cfg["memory_mb"], "validation")
    host, port = address.split(":")
    rows = []
    loaded = False
    for rep in range(VALIDATION_ROUNDS):
        for conns in validation_connections(cfg):
            for depth in (1, 16):
                # redis-benchmark's usual single event loop: with --threads N
                # on a 2-core machine its threads and Redis fight for the
                # cores, which measured 20-40% below its own one-loop figure.
                out = run(["redis-benchmark", "-h", host, "-p", port, "-c", str(conns),
                           "-n", str(cfg["rb_requests"] * conns * (4 if depth == 16 else 1)),
                           "-d", "64", "-r", str(keys), "-P", str(depth), "-t", "set,get",
                           "--csv"], log, timeout=600)
                for rec in csv.DictReader(io.StringIO(out)):
                    rows.append({"tool": "redis-benchmark", "round": rep,
                                 "connections": conns, "command": rec["test"],
                                 "depth": depth, "ops_per_second": float(rec["rps"]),
                                 "p50_us": float(rec.get("p50_latency_ms", "nan")) * 1000,
                                 "p99_us": float(rec.get("p99_latency_ms", "nan")) * 1000})
            jsonl = os.path.join(out_dir, "validation_driver.jsonl")
            before = len(read_jsonl(jsonl))
            run([driver, "--targets=redis@%s@%d" % (address, pid), "--records=%d" % keys,
                 "--key_bytes=16", "--value_bytes=64", "--threads=%d" % conns,
                 "--seconds=%g" % cfg["validation_seconds"], "--warmup_seconds=0.5",
                 "--load=%s" % ("false" if loaded else "true"),
                 "--cells=S:uniform:1:0,C:uniform:1:0,S:uniform:16:0,C:uniform:16:0",
                 "--out=" + jsonl], log)
            loaded = True
            for r in read_jsonl(jsonl)[before:]:
                op = "SET" if r["workload"] == "S" else "GET"
                rows.append({"tool": "peers_bench", "round": rep, "connections": conns,
                             "command": op, "depth": r["depth"],
                             "ops_per_second": r["ops_per_second"],
                             "p50_us": r["update_p50_us"] if op == "SET" else r["read_p50_us"],
                             "p99_us": r["update_p99_us"] if op == "SET" else r["read_p99_us"]})
    servers.stop("redis")
    with open(os.path.join(out_dir, "validation.json"), "w") as f:
        json.dump(rows, f, indent=1)


def validation_connections(cfg):
    """One connection, then the benchmark's thread count."""
    return [VALIDATION_CONNECTIONS] + ([cfg["threads"]] if cfg["threads"] != 1 else [])


YCSB_CLASSES = {"furrballs": "dev.furrballs.ycsb.FurrballsClient",
                "redis": "dev.furrballs.ycsb.RedisClient",
                "memcached": "dev.furrballs.ycsb.MemcachedClient"}


def parse_ycsb(text):
    """YCSB's text exporter: '[SECTION], metric, value' lines."""
    out = {}
    for line in text.splitlines():
        m = re.match(r"^\[([A-Z_-]+)\], (.+?), (.+)$", line.strip())
        if m:
            try:
                out.setdefault(m.group(1), {})[m.group(2)] = float(m.group(3))
            except ValueError:
                pass
    return out


def phase_ycsb(cfg, servers, out_dir, progress):
    classpath = os.path.join(YCSB_DIR, "target", "bindings.jar") + ":" + \
        os.path.join(YCSB_DIR, "target", "lib", "*")
    rows = []
    for system in SYSTEMS:
        progress.step("YCSB 0.17.0: %s, load %d records, workloads %s" %
                      (system, cfg["ycsb_records"], cfg["ycsb_workloads"].upper()))
        address, _pid = servers.start(system, cfg["memory_mb"], "ycsb",
                                       ["--expected_item_bytes=1100"])
        host, port = address.split(":")
        conn = {"furrballs": ["-p", "furrballs.address=" + address],
                "redis": ["-p", "redis.host=" + host, "-p", "redis.port=" + port],
                "memcached": ["-p", "memcached.address=" + address]}[system]
        log = os.path.join(out_dir, "logs", "ycsb-%s.log" % system)
        for phase, workload in [("load", "a")] + [("run", w) for w in cfg["ycsb_workloads"]]:
            argv = ["java", "-cp", classpath, "site.ycsb.Client",
                    "-load" if phase == "load" else "-t",
                    "-db", YCSB_CLASSES[system],
                    "-P", os.path.join(YCSB_DIR, "workloads", "workload" + workload),
                    "-P", os.path.join(YCSB_DIR, "workloads", "common.properties"),
                    "-p", "recordcount=%d" % cfg["ycsb_records"],
                    "-p", "operationcount=%d" % cfg["ycsb_ops"],
                    "-p", "maxexecutiontime=%d" % cfg["ycsb_max_seconds"]] + conn
            text = run(argv, log, timeout=cfg["ycsb_max_seconds"] + 120)
            with open(os.path.join(out_dir, "ycsb", "%s-%s-%s.txt" % (
                    system, phase, workload)), "w") as f:
                f.write(text)
            rows.append({"system": system, "phase": phase, "workload": workload.upper(),
                         "metrics": parse_ycsb(text)})
        servers.stop(system)
    with open(os.path.join(out_dir, "ycsb.json"), "w") as f:
        json.dump(rows, f, indent=1)


def phase_ghz(cfg, servers, out_dir, progress):
    ghz = find_ghz()
    if ghz is None:
        raise RuntimeError("ghz not found; tools/install_go_tools.sh installs it")
    progress.step("transport limit: ghz against Furrballs Get and the empty server")
    rows = []
    log = os.path.join(out_dir, "logs", "ghz.log")
    key = "Z2h6LWtleQ=="  # "ghz-key"
    value = base64.b64encode(b"v" * 64).decode()
    for system in ["furrballs", "empty"]:
        address, pid = servers.start(system, cfg["memory_mb"], "ghz",
                                      ["--expected_item_bytes=88"])
        run([ghz, "--insecure", "--call", "furrballs.v1.Cache/Set", "-d",
             json.dumps({"key": key, "value": value}), "--total", "1", address], log)
        cpu0 = cpu_seconds(pid)
        text = run([ghz, "--insecure", "--call", "furrballs.v1.Cache/Get", "-d",
                    json.dumps({"key": key}), "--concurrency", "16", "--connections", "4",
                    "-z", "%ds" % cfg["ghz_seconds"], "--timeout", "10s",
                    "--format", "json", address], log, timeout=cfg["ghz_seconds"] + 120)
        cpu = cpu_seconds(pid) - cpu0
        servers.stop(system)
        r = json.loads(text)
        lat = {int(d["percentage"]): d["latency"] / 1e3
               for d in (r.get("latencyDistribution") or [])}
        rows.append({"server": system, "rpc": "Get", "ops_per_second": r.get("rps", 0),
                     "count": r.get("count", 0),
                     "ok": (r.get("statusCodeDistribution") or {}).get("OK", 0),
                     "p50_us": lat.get(50), "p99_us": lat.get(99),
                     "average_us": r.get("average", 0) / 1e3,
                     "server_cpu_us_per_op": cpu * 1e6 / max(r.get("count", 0), 1)})
    with open(os.path.join(out_dir, "ghz.json"), "w") as f:
        json.dump(rows, f, indent=1)


# ---------------------------------------------------------------- report

def cell_name(r):
    loop = "open %d/s" % r["target_ops_per_second"] if r["loop"] == "open" else "closed"
    return "%s %s d%d %s" % (r["workload"], r["distribution"], r["depth"], loop)


def ratio(a, b):
    return "%.2f" % (a / b) if a and b else "n/a"


def fmt_ops(x):
    return "%.0f" % x if x is not None else "n/a"


def fmt_cpu(x):
    return "%.2f" % x if x is not None and x >= 0 else "n/a"


def write_driver_csv(rows, path):
    if not rows:
        return
    keys = list(rows[0].keys())
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)


def median_by(rows, key_fn, field):
    groups = {}
    for r in rows:
        groups.setdefault(key_fn(r), []).append(r[field])
    return {k: statistics.median(v) for k, v in groups.items()}


def make_plots(out_dir, driver, rss, ycsb, ghz):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    backends = FURRBALLS_BACKENDS + ["redis", "memcached"]
    colors = {"furrballs": "#1f77b4", "furrballs_pipeline": "#6baed6",
              "furrballs_multi": "#c6dbef", "furrballs_batched": "#08306b",
              "redis": "#d62728", "memcached": "#2ca02c", "empty": "#7f7f7f"}
    values = sorted({r["value_bytes"] for r in driver})
    cells = []
    for r in driver:
        c = cell_name(r)
        if c not in cells:
            cells.append(c)

    def grouped(ax, field, value_bytes, title, ylabel, scale=1.0):
        width = 0.8 / len(backends)
        for i, b in enumerate(backends):
            ys = []
            for c in cells:
                m = [r[field] for r in driver if r["backend"] == b and cell_name(r) == c
                     and r["value_bytes"] == value_bytes]
                ys.append(statistics.median(m) * scale if m else 0)
            ax.bar([x + i * width for x in range(len(cells))], ys, width, label=b,
                   color=colors[b])
        ax.set_xticks([x + 0.4 - width / 2 for x in range(len(cells))])
        ax.set_xticklabels(cells, rotation=30, ha="right", fontsize=7)
        ax.set_title(title, fontsize=9)
        ax.set_ylabel(ylabel, fontsize=8)

    fig, axes = plt.subplots(len(values), 1, figsize=(12, 4.5 * len(values)), squeeze=False)
    for i, v in enumerate(values):
        grouped(axes[i][0], "ops_per_second", v,
                "driver throughput, %d B values (log scale)" % v, "kops/s", 1e-3)
        axes[i][0].set_yscale("log")
    axes[0][0].legend(fontsize=7, ncol=5)
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "throughput.png"), dpi=110)
    plt.close(fig)

    for op in ["read", "update", "rmw"]:
        fig, axes = plt.subplots(len(values), 3, figsize=(16, 4.5 * len(values)),
                                 squeeze=False)
        for i, v in enumerate(values):
            for j, (pct, label) in enumerate([("p50", "p50"), ("p99", "p99"),
                                               ("p999", "p99.9")]):
                ax = axes[i][j]
                field = "%s_%s_us" % (op, pct)
                grouped(ax, field, v, "%s %s latency, %d B values" % (op, label, v), "us")
                if any(r[field] > 0 for r in driver if r["value_bytes"] == v):
                    ax.set_yscale("log")
        axes[0][0].legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(os.path.join(out_dir, "latency_%s.png" % op), dpi=100)
        plt.close(fig)

    fig, axes = plt.subplots(len(values), 1, figsize=(12, 4 * len(values)), squeeze=False)
    for i, v in enumerate(values):
        grouped(axes[i][0], "hit_ratio", v, "read hit ratio, %d B values" % v, "hits/reads")
        axes[i][0].set_ylim(0, 1.05)
    axes[0][0].legend(fontsize=7, ncol=5)
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "hit_ratio.png"), dpi=110)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(8, 4))
    labels = ["%s %dB" % (r["system"], r["value_bytes"]) for r in rss]
    ax.bar(range(len(rss)), [r["rss_at_end_bytes"] / 2**20 for r in rss],
           color=[colors[r["system"]] for r in rss])
    ax.set_xticks(range(len(rss)))
    ax.set_xticklabels(labels, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("server RSS at the end, MiB")
    ax.set_title("server RSS after load and all cells (same memory budget)")
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "rss.png"), dpi=110)
    plt.close(fig)

    if ycsb:
        runs = [r for r in ycsb if r["phase"] == "run"]
        workloads = sorted({r["workload"] for r in runs})
        fig, ax = plt.subplots(figsize=(8, 4))
        width = 0.8 / len(SYSTEMS)
        for i, s in enumerate(SYSTEMS):
            ys = [next((r["metrics"].get("OVERALL", {}).get("Throughput(ops/sec)", 0)
                        for r in runs if r["system"] == s and r["workload"] == w), 0)
                  for w in workloads]
            ax.bar([x + i * width for x in range(len(workloads))], ys, width, label=s,
                   color=colors[s])
        ax.set_xticks([x + 0.4 - width / 2 for x in range(len(workloads))])
        ax.set_xticklabels(["workload " + w for w in workloads])
        ax.set_ylabel("ops/s")
        ax.set_title("YCSB 0.17.0 throughput (same settings for all)")
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(os.path.join(out_dir, "ycsb_throughput.png"), dpi=110)
        plt.close(fig)

    if ghz:
        fig, ax = plt.subplots(figsize=(6, 4))
        ax.bar([r["server"] for r in ghz], [r["ops_per_second"] for r in ghz],
               color=[colors.get(r["server"], "#999") for r in ghz])
        ax.set_ylabel("Get RPCs/s (ghz)")
        ax.set_title("gRPC transport limit: ghz Get")
        fig.tight_layout()
        fig.savefig(os.path.join(out_dir, "ghz.png"), dpi=110)
        plt.close(fig)


def write_summary(out_dir, driver, callers, ycsb, ghz, ops_of, command):
    """summary.md: the table docs/peers_bench.md and the README quote."""
    S = ["| value | workload | keys | depth | Redis ops/s | memcached ops/s | Furrballs "
         "ops/s (client) | Furrballs/Redis | Furrballs/memcached |",
         "|---|---|---|---|---|---|---|---|---|"]
    listed = set()
    for r in driver:
        if r["backend"] != "redis" or r["loop"] != "closed":
            continue
        c, v = cell_name(r), r["value_bytes"]
        if (c, v) in listed:  # one line per cell, not per round
            continue
        listed.add((c, v))
        rd, mc = ops_of("redis", c, v), ops_of("memcached", c, v)
        # Furrballs' best client for the cell: at depth 1 unary or Pipeline, at
        # depth 16 also MultiGet/MultiSet and the automatically batched client.
        fb, client = max((ops_of(b, c, v) or 0, b) for b in FURRBALLS_BACKENDS)
        S.append("| %d B | %s | %s | %d | %.0f | %.0f | %.0f (%s) | %s | %s |" % (
            v, r["workload"], r["distribution"], r["depth"], rd, mc, fb, client,
            ratio(fb, rd), ratio(fb, mc)))
    if callers:
        S.append("")
        S.extend(callers_section(driver, callers))
    runs = [r for r in ycsb if r["phase"] == "run"]
    if runs:
        S.append("")
        S.append("| YCSB 0.17.0 workload | Redis ops/s | memcached ops/s | Furrballs ops/s | "
                 "Furrballs/Redis | Furrballs/memcached |")
        S.append("|---|---|---|---|---|---|")
        for w in sorted({r["workload"] for r in runs}):
            ops = {r["system"]: r["metrics"].get("OVERALL", {}).get("Throughput(ops/sec)")
                   for r in runs if r["workload"] == w}
            S.append("| %s | %.0f | %.0f | %.0f | %s | %s |" % (
                w, ops.get("redis") or 0, ops.get("memcached") or 0,
                ops.get("furrballs") or 0, ratio(ops.get("furrballs"), ops.get("redis")),
                ratio(ops.get("furrballs"), ops.get("memcached"))))
    if len(ghz) == 2:
        S.append("")
        S.append("Transport limit (ghz Get, 16 concurrent): Furrballs %.0f/s, empty gRPC "
                 "handler %.0f/s (%.2f)." % (ghz[0]["ops_per_second"], ghz[1]["ops_per_second"],
                                             ghz[0]["ops_per_second"] /
                                             max(ghz[1]["ops_per_second"], 1)))
    S.append("")
    S.append("Reproduce: `%s`." % command)
    with open(os.path.join(out_dir, "summary.md"), "w") as f:
        f.write("\n".join(S) + "\n")


def validation_section(cfg, validation):
    """The driver-vs-redis-benchmark table and its verdict."""
    tol = VALIDATION_TOLERANCE * 100
    L = ["One Redis; each tool with N client threads of one connection each "
         "(redis-benchmark `-c N`, its usual single event loop), N = %s, 64 B values, "
         "16-byte keys uniform over %d; `-P 1` and `-P 16` against the driver at depth 1 "
         "and 16; the tools alternate %d times and medians are compared. Criterion "
         "(fixed before the first run): the driver's median throughput within ±%d%% of "
         "redis-benchmark's for every N, command and depth. The p50 latency is compared "
         "the same way and reported, not judged: the two tools time different things "
         "(the driver from before its write to after its blocking read returns, which "
         "includes the thread's wake-up; redis-benchmark inside its event loop, which "
         "often finds replies already waiting). The first two runs used "
         "`redis-benchmark --threads N` at N = %d and failed (1 of 4, 0 of 4): six busy "
         "threads on two cores, where redis-benchmark's threaded mode measured 20-40%% "
         "below its own single loop on the same Redis." % (
             " and ".join(str(n) for n in validation_connections(cfg)), cfg["records"],
             VALIDATION_ROUNDS, tol, cfg["threads"]),
         "",
         "| N | command | depth | rb ops/s (median) | driver ops/s (median) | driver/rb "
         "| throughput within ±%d%% | rb p50 µs | driver p50 µs | driver/rb p50 "
         "| p50 within ±%d%% | rb rounds | driver rounds |" % (tol, tol),
         "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    passed = passed_p50 = checks = 0
    for conns in validation_connections(cfg):
        for cmd in ["SET", "GET"]:
            for depth in (1, 16):
                def pick(tool):
                    return [x for x in validation if x["tool"] == tool
                            and x.get("connections", cfg["threads"]) == conns
                            and x["command"] == cmd and x["depth"] == depth]
                rb, dr = pick("redis-benchmark"), pick("peers_bench")
                if not rb or not dr:
                    continue
                q = (statistics.median(x["ops_per_second"] for x in dr) /
                     statistics.median(x["ops_per_second"] for x in rb))
                rb_p50 = statistics.median(x["p50_us"] for x in rb)
                dr_p50 = statistics.median(x["p50_us"] for x in dr)
                q50 = dr_p50 / rb_p50
                ok = abs(q - 1) <= VALIDATION_TOLERANCE
                ok50 = abs(q50 - 1) <= VALIDATION_TOLERANCE
                checks += 1
                passed += ok
                passed_p50 += ok50

                def verdict(good):
                    return "yes" if good else "**no**"
                L.append("| %d | %s | %d | %.0f | %.0f | %.2f | %s | %.0f | %.0f | %.2f | %s "
                         "| %s | %s |" % (
                             conns, cmd, depth,
                             statistics.median(x["ops_per_second"] for x in rb),
                             statistics.median(x["ops_per_second"] for x in dr), q,
                             verdict(ok), rb_p50, dr_p50, q50, verdict(ok50),
                             " ".join("%.0f" % x["ops_per_second"] for x in rb),
                             " ".join("%.0f" % x["ops_per_second"] for x in dr)))
    L.append("")
    L.append("Validation: throughput %d of %d within ±%d%% (the criterion: %s); p50 "
             "latency %d of %d (reported)." % (passed, checks, tol,
                                              "passed" if passed == checks else "**failed**",
                                              passed_p50, checks))
    return L


def median_of(rows, field, **match):
    """The median of `field` over the rows whose fields equal `match` (cell
    matches cell_name); None if there are none or the field is missing."""
    cell = match.pop("cell", None)
    m = [r[field] for r in rows
         if all(r.get(k) == v for k, v in match.items())
         and (cell is None or cell_name(r) == cell)
         and r.get(field) is not None and r[field] >= 0]
    return statistics.median(m) if m else None


def callers_section(driver, callers):
    """Many callers through one client: Furrballs' batching client against
    Redis and memcached with a connection per caller, and the server CPU per
    key op against Redis pipelining 16 (the same workload at depth 16)."""
    fb = CALLER_BACKENDS[0]
    L = ["| value | cell | callers | %s ops/s | redis ops/s | "
         "memcached ops/s | FB/Redis | FB/memcached | server CPU µs/op: %s "
         "/ redis / memcached | FB CPU / Redis -P 16 CPU (same workload, depth 16) "
         "| FB read p50 µs |" % (fb, fb),
         "|---|---|---|---|---|---|---|---|---|---|---|"]
    for v in sorted({r["value_bytes"] for r in callers}):
        for c in dict.fromkeys(cell_name(r) for r in callers):
            for n in sorted({r["threads"] for r in callers}):
                ops = {b: median_of(callers, "ops_per_second", backend=b, cell=c,
                                    value_bytes=v, threads=n) for b in CALLER_BACKENDS}
                cpu = {b: median_of(callers, "server_cpu_us_per_op", backend=b, cell=c,
                                    value_bytes=v, threads=n) for b in CALLER_BACKENDS}
                if ops[fb] is None:
                    continue
                p16 = median_of(driver, "server_cpu_us_per_op", backend="redis",
                                cell=c.replace(" d1 ", " d16 "), value_bytes=v)
                p50 = median_of(callers, "read_p50_us", backend=fb,
                                cell=c, value_bytes=v, threads=n)
                L.append("| %d B | %s | %d | %s | %s | %s | %s | %s | %s / %s / %s | %s | %s |" % (
                    v, c, n, fmt_ops(ops[fb]), fmt_ops(ops["redis"]),
                    fmt_ops(ops["memcached"]), ratio(ops[fb], ops["redis"]),
                    ratio(ops[fb], ops["memcached"]),
                    fmt_cpu(cpu[fb]), fmt_cpu(cpu["redis"]),
                    fmt_cpu(cpu["memcached"]), ratio(cpu[fb], p16),
                    "%.0f" % p50 if p50 else "n/a"))
    return L


def write_report(out_dir, mode, cfg, facts, loads, command, elapsed, finished=None):
    every_row = read_jsonl(os.path.join(out_dir, "driver.jsonl"))
    write_driver_csv(every_row, os.path.join(out_dir, "driver.csv"))
    # The cells at the benchmark's thread count, and the many-callers cells.
    driver = [r for r in every_row if r["threads"] == cfg["threads"]]
    callers = [r for r in every_row if r["threads"] != cfg["threads"]]

    def load_json(name):
        p = os.path.join(out_dir, name)
        return json.load(open(p)) if os.path.exists(p) else []

    rss = load_json("server_rss.json")
    validation = load_json("validation.json")
    ycsb = load_json("ycsb.json")
    ghz = load_json("ghz.json")
    make_plots(out_dir, driver, rss, ycsb, ghz)

    L = []
    L.append("# Peers benchmark: Furrballs vs Redis vs memcached (%s mode)" % mode)
    L.append("")
    L.append("Run finished %s, %.1f minutes, by `%s`." % (
        finished or "?", elapsed / 60, command))
    L.append("")
    L.append("## Machine and versions")
    L.append("")
    for k, v in facts.items():
        L.append("- %s: %s" % (k, v))
    L.append("- load average (1/5/15 min) at start: %s; at end: %s" % loads)
    L.append("")
    L.append("**Noise.** This machine is shared: other agents build and test on the same "
             "%s cores while this runs, and the load average above says how busy it was. "
             "Every server and the client share those cores, so absolute numbers are far "
             "below what the systems do on a dedicated host, and single cells can move by "
             "tens of percent between runs. Within each cell the systems run back to back "
             "(interleaved), so drift hits them alike; the ratios are the figures to read, "
             "and only large ratios are meaningful." % facts.get("cpus"))
    L.append("")
    L.append("## Settings")
    L.append("")
    L.append("- Same memory budget for every server: %d MiB (Furrballs `--memory_mb`, its "
             "value pages, key metadata on top; Redis `maxmemory` with `allkeys-lru`, "
             "which counts its whole data set; memcached `-m`, slab memory). Redis runs "
             "with no persistence (`--save '' --appendonly no`). All on 127.0.0.1, each "
             "with its default threads (Furrballs: one NUMA node, direct dispatch; Redis "
             "7: one thread; memcached: 4 worker threads)." % cfg["memory_mb"])
    L.append("- Driver (`//bench/peers:peers_bench`): %d client threads, one connection "
             "each; %d records, 24-byte keys; %g s measured after %g s warm-up per cell; "
             "YCSB mixes A (50/50 read/update), B (95/5), C (read only), F (50%% read, 50%% "
             "read-modify-write); Zipfian θ=0.99 (scrambled, as YCSB) or uniform keys; a "
             "read miss is followed by a fill write (not counted as an operation). Closed "
             "loop, or open loop at a fixed total rate with latency from the intended send "
             "time. Depth 16: 16 operations in flight per connection (see "
             "bench/peers/peer_client.h for how each backend does it; memcached's writes "
             "cannot be pipelined with acknowledgement in libmemcached and go one by one)."
             % (cfg["threads"], cfg["records"], cfg["seconds"], cfg["warmup"]))
    L.append("- Furrballs clients: `furrballs` = unary Get/Set (async calls at depth 16), "
             "`furrballs_pipeline` = the Pipeline stream, `furrballs_multi` = MultiGet + "
             "MultiSet per batch (depth 16 only), `furrballs_batched` = the same calls "
             "as `furrballs` through the client's automatic batching (depth 16 only: 16 "
             "concurrent callers of one client share Batch messages), `furrballs_shared` "
             "= one batching client shared by all driver threads (the many-callers cells "
             "below).")
    L.append("- %d round(s) of every cell, interleaved (each round runs every cell and "
             "system once); tables give medians over rounds. Server CPU per key op = "
             "CPU time (user + system) of the server process over the whole cell, "
             "warm-up included, divided by the operations run in it (fills not counted)."
             % cfg.get("rounds", 1))
    L.append("- YCSB 0.17.0 core with the bindings in bench/ycsb: %d records of 10 x 100 B "
             "fields, %d operations per workload (capped at %d s), threadcount 4, records "
             "written whole, the same properties for every system." %
             (cfg["ycsb_records"], cfg["ycsb_ops"], cfg["ycsb_max_seconds"]))
    L.append("")

    # Throughput with ratios.
    def ops_of(backend, cell, v):
        m = [r["ops_per_second"] for r in driver
             if r["backend"] == backend and cell_name(r) == cell and r["value_bytes"] == v]
        return statistics.median(m) if m else None

    cells = []
    for r in driver:
        if cell_name(r) not in cells:
            cells.append(cell_name(r))
    L.append("## Driver throughput and ratios (ops/s)")
    L.append("")
    L.append("Ratios are Furrballs' ops/s over the peer's; above 1 Furrballs is faster. "
             "Every cell is listed, whichever way it falls.")
    L.append("")
    L.append("| value | cell | redis | memcached | " + " | ".join(
        "%s | %s/Redis | %s/memcached" % (b, BACKEND_ABBREVIATIONS[b], BACKEND_ABBREVIATIONS[b])
        for b in FURRBALLS_BACKENDS) + " |")
    L.append("|---|---|---|---|" + "---|---|---|" * len(FURRBALLS_BACKENDS))
    for v in sorted({r["value_bytes"] for r in driver}):
        for c in cells:
            rd, mc = ops_of("redis", c, v), ops_of("memcached", c, v)
            if rd is None and mc is None:
                continue
            row = ["%d B" % v, c, fmt_ops(rd), fmt_ops(mc)]
            for b in FURRBALLS_BACKENDS:
                fb = ops_of(b, c, v)
                row += [fmt_ops(fb), ratio(fb, rd), ratio(fb, mc)] if fb else ["—"] * 3
            L.append("| " + " | ".join(row) + " |")
    L.append("")
    write_summary(out_dir, driver, callers, ycsb, ghz, ops_of, command)
    L.append("![throughput](throughput.png)")
    L.append("")

    L.append("## Server CPU per key operation (µs, median over rounds)")
    L.append("")
    L.append("The server's CPU time per operation: on a shared machine the steadiest "
             "figure, since others' load changes how long a cell takes far more than "
             "what an operation costs the server. Lower is better.")
    L.append("")
    L.append("| value | cell | redis | memcached | " +
             " | ".join(FURRBALLS_BACKENDS) + " | best FB / Redis |")
    L.append("|---|---|---|---|" + "---|" * len(FURRBALLS_BACKENDS) + "---|")
    for v in sorted({r["value_bytes"] for r in driver}):
        for c in cells:
            cpu = {b: median_of(driver, "server_cpu_us_per_op", backend=b, cell=c,
                                value_bytes=v) for b in ["redis", "memcached"] +
                   FURRBALLS_BACKENDS}
            if cpu["redis"] is None and cpu["memcached"] is None:
                continue
            fb = [x for x in (cpu[b] for b in FURRBALLS_BACKENDS) if x is not None]
            L.append("| %d B | %s | %s |" % (v, c, " | ".join(
                fmt_cpu(cpu[b]) for b in ["redis", "memcached"] + FURRBALLS_BACKENDS)) +
                " %s |" % ratio(min(fb) if fb else None, cpu["redis"]))
    L.append("")
    if callers:
        L.append("## Many callers through one client (automatic batching)")
        L.append("")
        L.append("N driver threads at depth 1 (N concurrent callers): for Furrballs all of "
                 "them call one shared C++ client with automatic batching on, which "
                 "coalesces their operations into Batch messages on one stream; Redis and "
                 "memcached get one connection per caller (no pipelining: each caller "
                 "waits for its answer). The CPU ratio compares Furrballs' server CPU per "
                 "key op with Redis pipelining 16 deep in the same workload (the depth-16 "
                 "cell above), the issue's yardstick.")
        L.append("")
        L.extend(callers_section(driver, callers))
        L.append("")

    L.append("## Driver latency (µs): p50 / p99 / p99.9 per operation")
    L.append("")
    L.append("| value | cell | client | read | update | read-modify-write | hit ratio | "
             "failed | bad values |")
    L.append("|---|---|---|---|---|---|---|---|---|")

    def lat(r, op):
        if r["%s_count" % op] == 0:
            return "—"
        return "%.0f / %.0f / %.0f" % (r[op + "_p50_us"], r[op + "_p99_us"],
                                       r[op + "_p999_us"])

    for r in driver + callers:
        L.append("| %d B | %s | %s%s (round %d) | %s | %s | %s | %.3f | %d | %d |" % (
            r["value_bytes"], cell_name(r), r["backend"],
            "" if r["threads"] == cfg["threads"] else ", %d callers" % r["threads"],
            r["round"], lat(r, "read"), lat(r, "update"), lat(r, "rmw"), r["hit_ratio"],
            r["failed"], r["bad_values"]))
    L.append("")
    L.append("![read latency](latency_read.png) ![update latency](latency_update.png) "
             "![rmw latency](latency_rmw.png)")
    L.append("")
    L.append("## Hit ratio and memory")
    L.append("")
    L.append("Hit ratio per cell is in the latency table (reads that found their key; a "
             "miss is refilled). Server RSS with the same budget:")
    L.append("")
    L.append("| value | system | RSS after load (MiB) | RSS at end (MiB) |")
    L.append("|---|---|---|---|")
    for r in rss:
        L.append("| %d B | %s | %.1f | %.1f |" % (r["value_bytes"], r["system"],
                                                 r["rss_after_load_bytes"] / 2**20,
                                                 r["rss_at_end_bytes"] / 2**20))
    L.append("")
    L.append("![hit ratio](hit_ratio.png) ![rss](rss.png)")
    L.append("")

    L.append("## Driver validation against redis-benchmark")
    L.append("")
    L.extend(validation_section(cfg, validation))
    L.append("")

    L.append("## YCSB 0.17.0 (bench/ycsb bindings)")
    L.append("")
    L.append("| workload | system | ops/s | FB/system | READ p50/p99/p99.9 µs | UPDATE "
             "p50/p99/p99.9 µs | RMW p50/p99/p99.9 µs | errors |")
    L.append("|---|---|---|---|---|---|---|---|")

    def ylat(m, sec):
        s = m.get(sec)
        if not s or not s.get("Operations"):
            return "—"
        return "%.0f / %.0f / %.0f" % (s.get("50thPercentileLatency(us)", float("nan")),
                                       s.get("99thPercentileLatency(us)", float("nan")),
                                       s.get("99.9PercentileLatency(us)", float("nan")))

    runs = [r for r in ycsb if r["phase"] == "run"]
    for w in sorted({r["workload"] for r in runs}):
        fb = next((r for r in runs if r["system"] == "furrballs" and r["workload"] == w), None)
        fb_ops = fb["metrics"].get("OVERALL", {}).get("Throughput(ops/sec)") if fb else None
        for s in SYSTEMS:
            r = next((x for x in runs if x["system"] == s and x["workload"] == w), None)
            if r is None:
                continue
            m = r["metrics"]
            ops = m.get("OVERALL", {}).get("Throughput(ops/sec)", 0)
            errors = sum(v.get("Operations", 0) for k, v in m.items() if k.endswith("-FAILED"))
            L.append("| %s | %s | %.0f | %s | %s | %s | %s | %d |" % (
                w, s, ops, "—" if s == "furrballs" else ratio(fb_ops, ops),
                ylat(m, "READ"), ylat(m, "UPDATE"), ylat(m, "READ-MODIFY-WRITE"), errors))
    L.append("")
    if ycsb:
        L.append("![ycsb](ycsb_throughput.png)")
        L.append("")

    L.append("## Transport limit (ghz, Get of one 64 B key)")
    L.append("")
    L.append("ghz with 16 concurrent calls over 4 connections for %d s against Furrballs "
             "and against `//bench/service:empty_server` (the same gRPC server build, empty "
             "handlers)." % cfg["ghz_seconds"])
    L.append("")
    L.append("| server | Get/s | p50 µs | p99 µs | calls | OK | server CPU µs/call |")
    L.append("|---|---|---|---|---|---|---|")
    for r in ghz:
        L.append("| %s | %.0f | %s | %s | %d | %d | %s |" % (
            r["server"], r["ops_per_second"],
            "%.0f" % r["p50_us"] if r["p50_us"] else "?",
            "%.0f" % r["p99_us"] if r["p99_us"] else "?", r["count"], r["ok"],
            fmt_cpu(r.get("server_cpu_us_per_op"))))
    if len(ghz) == 2 and ghz[1]["ops_per_second"]:
        L.append("")
        L.append("Furrballs Get reaches %.2f of the empty handler's rate." %
                 (ghz[0]["ops_per_second"] / ghz[1]["ops_per_second"]))
    L.append("")
    if ghz:
        L.append("![ghz](ghz.png)")
        L.append("")
    L.append("## Raw data")
    L.append("")
    L.append("driver.jsonl / driver.csv (every cell and client), server_rss.json, "
             "validation.json (+ validation_driver.jsonl), ycsb.json and ycsb/*.txt (YCSB's "
             "own output), ghz.json, facts.json, logs/.")
    with open(os.path.join(out_dir, "report.md"), "w") as f:
        f.write("\n".join(L) + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--short", action="store_true", help="smoke run (a few minutes)")
    parser.add_argument("--bin_dir", required=True, help="Bazel's bazel-bin")
    parser.add_argument("--out_dir", default="", help="default bench/results/<date>-<host>")
    parser.add_argument("--command", default="bench/peers/run.sh")
    parser.add_argument("--report_only", action="store_true",
                        help="rewrite report.md and the plots of --out_dir from its raw data")
    args = parser.parse_args()
    if args.report_only:
        saved = json.load(open(os.path.join(args.out_dir, "facts.json")))
        run_info = saved.get("run", {})
        write_report(args.out_dir, saved["mode"], saved["config"], saved["facts"],
                     tuple(run_info.get("load_average", ["?", "?"])),
                     run_info.get("command", args.command), run_info.get("seconds", 0),
                     run_info.get("finished"))
        return
    mode = "short" if args.short else "full"
    cfg = MODES[mode]
    stamp = datetime.datetime.utcnow().strftime("%Y-%m-%d")
    out_dir = args.out_dir or os.path.join(
        ROOT, "bench", "results", "%s-%s%s" % (stamp, socket.gethostname(),
                                               "-short" if args.short else ""))
    if os.path.exists(out_dir):
        shutil.rmtree(out_dir)
    for sub in ["", "logs", "ycsb"]:
        os.makedirs(os.path.join(out_dir, sub), exist_ok=True)

    steps = 2 * len(cfg["values"]) + 1 + len(SYSTEMS) + 1 + 1
    progress = Progress("peers", steps, os.path.join(out_dir, "logs", "progress.log"))
    facts = machine_facts()
    facts["furrballs_server"] = binary_identity(
        os.path.join(args.bin_dir, "service", "furrballs_server"))
    load_start = load_average()
    with open(os.path.join(out_dir, "facts.json"), "w") as f:
        json.dump({"facts": facts, "config": cfg, "mode": mode}, f, indent=1)
    servers = Servers(args.bin_dir, out_dir)
    start = time.time()
    servers.stop_on_signals()
    try:
        phase_driver(cfg, servers, args.bin_dir, out_dir, progress)
        phase_validation(cfg, servers, args.bin_dir, out_dir, progress)
        phase_ycsb(cfg, servers, out_dir, progress)
        phase_ghz(cfg, servers, out_dir, progress)
    finally:
        servers.stop_all()
    progress.step("writing the report")
    run_info = {"load_average": [load_start, load_average()],
                "command": args.command + (" --short" if args.short else ""),
                "seconds": time.time() - start,
                "finished": datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M UTC")}
    with open(os.path.join(out_dir, "facts.json"), "w") as f:
        json.dump({"facts": facts, "config": cfg, "mode": mode, "run": run_info}, f, indent=1)
    write_report(out_dir, mode, cfg, facts, tuple(run_info["load_average"]),
                 run_info["command"], run_info["seconds"], run_info["finished"])
    print("peers: report in %s" % os.path.relpath(os.path.join(out_dir, "report.md"), ROOT),
          file=sys.stderr)


if __name__ == "__main__":
    main()
