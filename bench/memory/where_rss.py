#!/usr/bin/env python3
"""Where a Furrballs server's budget and RSS go at the end of the fill.

Starts furrballs_server (from --bin_dir) with its Prometheus endpoint on, runs
the fill test's own driver against it (//bench/memory:fill_bench, the same
arguments bench/memory/run.py gives it), and then, with the server idle after
the fill, prints:

- the pages by tier, live and dead bytes, key table capacity and the keys
  held (the server's /metrics, the engine's own counters), each also as a
  share of the budget;
- the RSS by what holds it (/proc/<pid>/smaps): the value page block (the
  anonymous mapping of the plan's pages), the other anonymous mappings of a
  megabyte and more (key table, ARC; malloc arenas are 64 MiB reservations),
  the heap, thread stacks, the small anonymous mappings, and file pages
  (code and read-only data), with each mapping's Rss.

  bazel build -c opt //service:furrballs_server //bench/memory:fill_bench
  bench/memory/where_rss.py --bin_dir=$(bazel info -c opt bazel-bin) \\
      --value_bytes=1024 [--furrballs_flags="..."] [--json=out.json]

The metrics endpoint adds a thread and its buffers to the RSS (under 1 MiB);
bench/memory/run.py runs the server without it, so its RSS is this one's less
that. docs/memory_bench.md ("Every byte of the budget at 1 KiB") has the
table this made.
"""

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench", "peers"))

from servers import Servers, free_port, rss_bytes  # noqa: E402

MIB = 1024.0 * 1024.0
PAGES_LINE = re.compile(r"\((\d+) pages of (\d+) KiB\)")
SMAPS_HEADER = re.compile(r"^([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ \S+\s*(.*)$")
METRIC = re.compile(r'^(furrballs_[a-z_]+)(\{[^}]*\})? ([0-9.e+-]+)$')


def parse_args():
    p = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--bin_dir", required=True, help="Bazel's bazel-bin (-c opt)")
    p.add_argument("--budget_mb", type=int, default=64, help="--memory_mb of the server")
    p.add_argument("--value_bytes", type=int, default=1024, help="bytes of every value")
    p.add_argument("--key_bytes", type=int, default=24, help="key length")
    p.add_argument("--threads", type=int, default=4, help="fill_bench inserting threads")
    p.add_argument("--depth", type=int, default=32, help="operations per MultiSet")
    p.add_argument("--max_batches", type=int, default=10, help="budget-sized batches at most")
    p.add_argument("--furrballs_flags", default="",
                   help="extra server flags, after the harness's own")
    p.add_argument("--json", default="", help="also write every figure to this file")
    return p.parse_args()


def metrics(port):
    """The server's furrballs_* samples, summed over nodes, by name and labels."""
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        m = METRIC.match(line)
        if not m:
            continue
        labels = re.sub(r'node="[^"]*",?', "", m.group(2) or "").replace("{}", "")
        key = m.group(1) + labels
        out[key] = out.get(key, 0.0) + float(m.group(3))
    return out


def smaps(pid, value_block_bytes):
    """Each mapping's Rss (bytes) and what it is, from /proc/<pid>/smaps."""
    maps = []
    cur = None
    with open("/proc/%d/smaps" % pid) as f:
        for line in f:
            h = SMAPS_HEADER.match(line)
            if h and not line.split()[0].endswith(":"):
                cur = {"start": int(h.group(1), 16), "end": int(h.group(2), 16),
                       "perms": h.group(3), "path": h.group(4).strip(), "rss": 0}
                cur["size"] = cur["end"] - cur["start"]
                maps.append(cur)
            elif line.startswith("Rss:"):
                cur["rss"] = int(line.split()[1]) * 1024
    for m in maps:
        path, size = m["path"], m["size"]
        if path == "[heap]":
            kind = "heap"
        elif path == "[stack]":
            kind = "main stack"
        elif path.startswith("["):
            kind = "kernel (vdso, vvar)"
        elif path:
            kind = "file pages (code, read-only data)"
        elif size >= value_block_bytes:
            # The kernel merges adjacent anonymous mappings of the same
            # protection: without malloc arenas between them, the block and
            # the key table's arrays can be one.
            kind = "value page block (and what the kernel merged with it)"
        elif size == 8 << 20 or size == (8 << 20) - 4096:
            kind = "thread stacks"
        elif size >= 1 << 20:
            kind = "other anonymous >= 1 MiB (key table, ARC, malloc arenas)"
        else:
            kind = "anonymous < 1 MiB (fixed structures, mapped blocks)"
        m["kind"] = kind
    return maps


def main():
    args = parse_args()
    out_dir = tempfile.mkdtemp(prefix="where_rss-")
    os.makedirs(os.path.join(out_dir, "logs"))
    servers = Servers(args.bin_dir, out_dir)
    servers.stop_on_signals()
    mport = free_port()
    flags = ["--metrics_address=127.0.0.1:%d" % mport] + shlex.split(args.furrballs_flags)
    try:
        address, pid = servers.start("furrballs", args.budget_mb, "where", flags)
        with open(servers.logs["furrballs"]) as f:
            log = f.read()
        pages = PAGES_LINE.search(log)
        block = int(pages.group(1)) * (int(pages.group(2)) << 10)
        page_size = int(pages.group(2)) << 10
        idle = rss_bytes(pid)
        fill_json = os.path.join(out_dir, "fill.json")
        argv = [os.path.join(args.bin_dir, "bench", "memory", "fill_bench"),
                "--backend=furrballs_multi", "--address=" + address, "--pid=%d" % pid,
                "--budget_mb=%d" % args.budget_mb, "--key_bytes=%d" % args.key_bytes,
                "--value_bytes=%d" % args.value_bytes, "--threads=%d" % args.threads,
                "--depth=%d" % args.depth, "--max_batches=%d" % args.max_batches,
                "--sample_keys=0", "--cache_aside_ops=0", "--label=where_rss",
                "--out=" + fill_json]
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        m = metrics(mport)
        maps = smaps(pid, block)
        rss = rss_bytes(pid)
    finally:
        servers.stop_all()
    budget = args.budget_mb << 20
    entry = args.key_bytes + args.value_bytes
    keys = m.get("furrballs_keys", 0)
    print("plan: %s" % re.search(r"furrballs: memory: (.*)", log).group(1))
    print("idle RSS %.1f MiB; after the fill RSS %.1f MiB, %d keys, %.0f keys per MiB of RSS"
          % (idle / MIB, rss / MIB, keys, keys / (rss / MIB)))
    print("\n| budget, %d MiB | MiB | share of the budget |" % args.budget_mb)
    print("| --- | --- | --- |")

    def row(name, b):
        print("| %s | %.2f | %.1f%% |" % (name, b / MIB, 100.0 * b / budget))

    row("live entries (key + value bytes of %d keys)" % keys, keys * entry)
    row("live entry bytes as the engine counts them (headers, padding)",
        m.get("furrballs_memory_used_bytes", 0) - m.get("furrballs_dead_bytes", 0))
    row("dead bytes awaiting a drain", m.get("furrballs_dead_bytes", 0))
    for tier in ("hot", "cold", "empty", "staging", "freeze", "retired"):
        n = m.get('furrballs_pages{tier="%s"}' % tier, 0)
        row("pages %s: %d" % (tier, n), n * page_size)
    row("pages in service", m.get("furrballs_memory_limit_bytes", 0))
    print("| key table capacity | %d keys | |" % m.get("furrballs_key_table_capacity", 0))
    print("\n| RSS by mapping | MiB |")
    print("| --- | --- |")
    kinds = {}
    for x in maps:
        kinds[x["kind"]] = kinds.get(x["kind"], 0) + x["rss"]
    for kind, b in sorted(kinds.items(), key=lambda kv: -kv[1]):
        print("| %s | %.2f |" % (kind, b / MIB))
    print("| total (VmRSS %.2f) | %.2f |" % (rss / MIB, sum(kinds.values()) / MIB))
    print("\nanonymous mappings with Rss >= 64 KiB (size, Rss, MiB):")
    for x in maps:
        if not x["path"] and x["rss"] >= 64 << 10:
            print("  %012x %-5s size %8.2f rss %7.2f  %s"
                  % (x["start"], x["perms"], x["size"] / MIB, x["rss"] / MIB, x["kind"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"idle_rss": idle, "rss": rss, "metrics": m, "maps": maps,
                       "args": vars(args)}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
