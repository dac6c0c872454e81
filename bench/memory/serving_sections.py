#!/usr/bin/env python3
"""Writes service/serving_sections.ld: the code and read-only data serving runs.

The server's file-backed RSS after a fill is the pages of its binary that
serving touches, each with the 64 KiB of neighbours the kernel maps around a
fault (fault-around): about 1.9 MiB of code touched, spread over 4.9 MiB of
64 KiB blocks (docs/memory_bench.md, "The server's file pages"). The linker
script this writes puts every input section that serving touched (an
archive member's .text, a template's COMDAT section, their .rodata) into
.text.serving and .rodata.serving, ahead of the rest, so that those blocks
hold little else.

How it finds them: for each of --runs (a client backend and a value size) it
starts service/furrballs_server_linked (the server as ld wrote it, before
BOLT lays its code out again by function: bench/memory/serving_order.py)
from --bin_dir with serving_pages_shim.so preloaded (every
page of the executable in a mapping of its own, so fault-around maps nothing
that was not touched), fills it with the fill test's driver (a read-back and
cache-aside reads included), scrapes its /metrics once, reads which pages of
the executable are present (/proc/<pid>/pagemap; the server dropped its
start-up pages before serving), and maps their union to input sections with
the link map of the same binary.

  bazel build -c opt //bench/memory:fill_bench //bench/memory:serving_pages_shim.so
  bazel build -c opt --linkopt=-Wl,-Map=/tmp/server.map //service:furrballs_server_linked
  bench/memory/serving_sections.py --bin_dir=$(bazel info -c opt bazel-bin) \\
      --link_map=/tmp/server.map

Rerun it when a dependency upgrade or a change of the request path moves
code: a pattern that no longer matches anything is ignored by the linker.
Then rerun bench/memory/serving_order.py, whose list is made from the
linked binary.
"""

import argparse
import os
import re
import socket
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench", "peers"))
sys.path.insert(0, os.path.join(ROOT, "bench", "memory"))

from file_pages import PAGE, executable_pages  # noqa: E402
from servers import Servers, free_port  # noqa: E402
from where_rss import metrics  # noqa: E402

OUTPUTS = (".text", ".rodata")
# The fills the probes run (fill_bench's backend:value bytes); serving_order.py's too.
FILLS = "furrballs_multi:64,furrballs_multi:1024,furrballs:1024,furrballs_batched:1024"
MAP_OUTPUT = re.compile(r"^(\.\S+)(\s+0x[0-9a-f]+\s+0x[0-9a-f]+)?\s*$")
MAP_INPUT = re.compile(r"^ (\.\S+)?\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)\s+(\S.*)$")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--bin_dir", required=True, help="Bazel's bazel-bin (-c opt)")
    p.add_argument("--link_map", required=True,
                   help="the -Wl,-Map output of service/furrballs_server_linked in --bin_dir "
                   "(the server as the linker wrote it, before BOLT)")
    p.add_argument("--runs", default=FILLS,
                   help="fills, each BACKEND:VALUE_BYTES (fill_bench's --backend: MultiSet "
                   "and MultiGet, unary calls, the Batch stream)")
    p.add_argument("--budget_mb", type=int, default=64, help="--memory_mb of the server")
    p.add_argument("--out", default=os.path.join(ROOT, "service", "serving_sections.ld"))
    return p.parse_args()


def input_sections(link_map):
    """(output section, input section, address, size, file) of .text/.rodata."""
    out, pending, entries = None, None, []
    with open(link_map) as f:
        for line in f:
            line = line.rstrip("\n")
            if line and not line.startswith(" "):
                m = MAP_OUTPUT.match(line)
                # A binary linked with this script has .text.serving too.
                out = m.group(1).replace(".serving", "") if m else None
                continue
            if out not in OUTPUTS:
                continue
            m = re.match(r"^ (\.\S+)$", line)
            if m:  # a long input section name is alone on its line
                pending = m.group(1)
                continue
            m = MAP_INPUT.match(line)
            name = (m.group(1) or pending) if m else None
            pending = None
            if m and name and int(m.group(3), 16):
                entries.append((out, name, int(m.group(2), 16), int(m.group(3), 16),
                                m.group(4)))
    return entries


def pattern(section, path):
    """The linker script pattern of one input section, or None."""
    if "._Z" in section:
        # A C++ COMDAT section: one copy is kept, whichever file it came from.
        return "*(%s)" % section
    m = re.match(r"^.*/(lib[^/]+\.a)\((.+)\)$", path)
    if m:
        return "*%s:%s(%s)" % (m.group(1), m.group(2), section)
    m = re.match(r"^.*/(_objs/[^/]+/[^/]+\.o)$", path)
    if m:
        return "*/%s(%s)" % (m.group(1), section)
    return None


def touched_pages(args, server):
    """Pages of `server` that serving touched: --runs fills, each on a fresh
    server started from a copy of --bin_dir whose furrballs_server is `server`,
    with serving_pages_shim.so preloaded."""
    shim = os.path.join(args.bin_dir, "bench", "memory", "serving_pages_shim.so")
    out_dir = tempfile.mkdtemp(prefix="serving_pages-")
    os.makedirs(os.path.join(out_dir, "logs"))
    probe_bin = os.path.join(out_dir, "bin")
    os.makedirs(os.path.join(probe_bin, "service"))
    # A link: the shim finds the executable by its resolved name.
    os.symlink(os.path.abspath(server), os.path.join(probe_bin, "service", "furrballs_server"))
    servers = Servers(probe_bin, out_dir)
    servers.stop_on_signals()
    pages = set()
    for run in args.runs.split(","):
        backend, value_bytes = run.split(":")[0], int(run.split(":")[1])
        os.environ["LD_PRELOAD"] = shim  # a no-op in every other program
        try:
            mport = free_port()
            address, pid = servers.start("furrballs", args.budget_mb,
                                         "%s-%d" % (backend, value_bytes),
                                         ["--metrics_address=127.0.0.1:%d" % mport])
            # A client that connects and closes without a word (the
            # harnesses' port check, a TCP health check): its error path.
            # The harness's own check came before the start-up drop, and
            # whether gRPC handled it before or after the drop depends on
            # how long the drop took.
            host, port = address.rsplit(":", 1)
            socket.create_connection((host, int(port))).close()
            subprocess.run(
                [os.path.join(args.bin_dir, "bench", "memory", "fill_bench"),
                 "--backend=" + backend, "--address=" + address, "--pid=%d" % pid,
                 "--budget_mb=%d" % args.budget_mb, "--value_bytes=%d" % value_bytes,
                 "--sample_keys=1000", "--cache_aside_ops=20000", "--label=serving",
                 "--out=" + os.path.join(out_dir, "fill-%s-%d.json" % (backend, value_bytes))],
                check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            metrics(mport)  # a Prometheus scrape runs too while serving
            found = executable_pages(pid)
        finally:
            del os.environ["LD_PRELOAD"]
            servers.stop_all()
        print("%s, %d B values: %d pages of the executable touched"
              % (backend, value_bytes, len(found)), file=sys.stderr)
        pages |= set(found)
    return pages


def main():
    args = parse_args()
    pages = touched_pages(args, os.path.join(args.bin_dir, "service", "furrballs_server_linked"))
    chosen = {o: [] for o in OUTPUTS}
    sizes = {o: 0 for o in OUTPUTS}
    seen = set()
    for out, section, addr, size, path in sorted(input_sections(args.link_map),
                                                 key=lambda e: e[2]):
        first, last = addr // PAGE * PAGE, (addr + size - 1) // PAGE * PAGE
        if not any(p in pages for p in range(first, last + PAGE, PAGE)):
            continue
        p = pattern(section, path)
        if p is None or p in seen:
            continue
        seen.add(p)
        chosen[out].append(p)
        sizes[out] += size
    with open(args.out, "w") as f:
        f.write("/* Generated by bench/memory/serving_sections.py (fills: %s);\n"
                "   do not edit.\n"
                "   The input sections serving touched, in link order, ahead of the rest\n"
                "   (service/BUILD, docs/memory_bench.md \"The server's file pages\"). */\n"
                % args.runs)
        for out in OUTPUTS:
            # Page-aligned read-only data starts the read-only segment;
            # unaligned, ld left it after .fini in the executable one
            # (furrballs_server_link_test checks).
            align = " ALIGN(CONSTANT (MAXPAGESIZE))" if out == ".rodata" else ""
            f.write("\nSECTIONS\n{\n  %s.serving%s :\n  {\n" % (out, align))
            for p in chosen[out]:
                f.write("    %s\n" % p)
            f.write("  }\n}\nINSERT BEFORE %s;\n" % out)
    for out in OUTPUTS:
        print("%s.serving: %d input sections, %.2f MiB" % (out, len(chosen[out]),
                                                          sizes[out] / 2.0**20),
              file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
