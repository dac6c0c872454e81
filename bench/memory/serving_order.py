#!/usr/bin/env python3
"""Writes service/serving_functions.txt: the functions serving runs, for BOLT.

//service:furrballs_server is //service:furrballs_server_linked with these
functions laid out first, packed, by llvm-bolt-15 (tools/bolt/bolt.bzl). The
kernel maps 64 KiB of a file around every page fault (fault-around), so the
code a server keeps running costs it the 64 KiB blocks that code is spread
over; packed, they hold little else (docs/memory_bench.md, "The server's
code, laid out by function").

Why a list of functions and not of pages: serving_sections.py (the linker
script) can only move whole input sections, and many objects of the system
archives were built without -ffunction-sections: one touched function keeps
its object's whole .text. To name functions exactly, this script first lays
the linked server out with every function on a page of its own (BOLT
-align-functions=4096, a 225 MB probe binary) and runs serving_sections.py's
fills on it (serving_pages_shim.so: a present page is a page the process
touched, after its start-up drop); a touched page is then one function.

The list puts the functions every fill ran first, then those that fewer
fills ran, grouped by which (a server that serves one kind of request then
touches fewer of the packed pages), each group in the linker's order.

Then it checks the list on the real layout, --rounds times at most: it lays
the server out with the list, runs the same fills, and adds the functions
on any page touched outside the packed .text to the first group: about 50
functions the first time, then none. (What runs about the time of the
start-up drop is seen in one layout and not the other: gRPC's connection
set-up and error paths, run for the harnesses' port checks. Which function
of such a page ran is not known, so all the page's functions are added.)

  bazel build -c opt //service:furrballs_server_linked //bench/memory:fill_bench \\
      //bench/memory:serving_pages_shim.so
  bench/memory/serving_order.py --bin_dir=$(bazel info -c opt bazel-bin)

Rerun it after serving_sections.py, a dependency upgrade or a change of the
request path: a name that is no longer in the binary is skipped by BOLT, and
//service:furrballs_server_link_test fails when the packed .text shrinks
below its floor.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench", "memory"))

from file_pages import PAGE, sections, symbols  # noqa: E402
from serving_sections import FILLS, touched_pages  # noqa: E402

BOLT = "llvm-bolt-15"
# What tools/bolt/bolt.bzl runs.
LAYOUT = ["-reorder-functions=user", "-lite=0"]
# Every function at the start of a page of its own: BOLT's default aligner
# ("compact") would align small functions less.
ONE_PER_PAGE = ["-lite=0", "-use-compact-aligner=0", "-align-functions=%d" % PAGE,
                "-align-functions-max-bytes=%d" % PAGE]


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--bin_dir", required=True,
                   help="Bazel's bazel-bin (-c opt) with service/furrballs_server_linked, "
                   "bench/memory/fill_bench and bench/memory/serving_pages_shim.so")
    p.add_argument("--runs", default=FILLS, help="fills, as serving_sections.py --runs")
    p.add_argument("--budget_mb", type=int, default=64, help="--memory_mb of the server")
    p.add_argument("--rounds", type=int, default=3,
                   help="at most this many checks of the list on the packed layout")
    p.add_argument("--out", default=os.path.join(ROOT, "service", "serving_functions.txt"))
    return p.parse_args()


def bolt(linked, out, flags):
    """Runs llvm-bolt-15; its warnings (functions it cannot move) are noise here."""
    r = subprocess.run([BOLT, linked, "-o", out] + flags, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("%s failed:\n%s%s" % (BOLT, r.stdout[-4000:], r.stderr[-4000:]))


def functions_on(binary, pages, lo=0, hi=1 << 64):
    """Mangled names of the functions in [lo, hi) that overlap one of pages,
    by address (aliases included: BOLT finds a function by any of its names)."""
    out, seen = [], set()
    for addr, size, name in symbols(binary, demangle=False):
        if not lo <= addr < hi or name in seen:
            continue
        first, last = addr // PAGE * PAGE, (addr + max(size, 1) - 1) // PAGE * PAGE
        if any(p in pages for p in range(first, last + PAGE, PAGE)):
            out.append(name)
            seen.add(name)
    return out


def section(binary, name):
    found = [(a, s) for a, s, n in sections(binary) if n == name]
    if not found:
        sys.exit("%s has no %s section: did %s lay it out?" % (binary, name, BOLT))
    return found[0]


def main():
    args = parse_args()
    linked = os.path.join(args.bin_dir, "service", "furrballs_server_linked")
    work = tempfile.mkdtemp(prefix="serving_order-")
    # furrballs_server in the name: serving_pages_shim.so splits the
    # mappings of that executable only.
    probe = os.path.join(work, "furrballs_server.one_per_page")
    print("laying every function on a page of its own: %s" % probe, file=sys.stderr)
    bolt(linked, probe, ONE_PER_PAGE)
    text = section(probe, ".text")
    # Each fill on its own: a function every fill runs comes before one
    # that only some run, so that a server serving one kind of request
    # touches fewer of the packed pages (MultiSet and MultiGet alone do not
    # run the 0.2 MiB that only unary calls and the Batch stream run, and
    # the other way round).
    fills = args.runs.split(",")
    ran = {}  # function -> the indexes in fills of the fills that ran it
    touched = set()
    for i, run in enumerate(fills):
        one = argparse.Namespace(**vars(args))
        one.runs = run
        pages = touched_pages(one, probe)
        touched |= pages
        for name in functions_on(probe, pages, text[0], text[0] + text[1]):
            ran.setdefault(name, []).append(i)
    # Address order (the linker's) within a group of the same fills; the
    # groups run by more fills first. Python's sort is stable.
    order = functions_on(probe, touched, text[0], text[0] + text[1])
    order.sort(key=lambda n: (-len(ran[n]), ran[n]))
    common = sum(1 for n in order if len(ran[n]) == len(fills))
    print("%d functions touched" % len(order), file=sys.stderr)
    os.unlink(probe)  # ~200 MB

    listed = set(order)
    order_file = os.path.join(work, "order.txt")
    packed = os.path.join(work, "furrballs_server.packed")
    for round_ in range(args.rounds):
        with open(order_file, "w") as f:
            f.write("".join(n + "\n" for n in order))
        bolt(linked, packed, LAYOUT + ["-function-order=" + order_file])
        text = section(packed, ".text")
        cold = section(packed, ".text.cold")
        # The page that holds the end of the packed .text and the start of
        # the rest is touched by the former.
        lo = (text[0] + text[1] + PAGE - 1) // PAGE * PAGE
        missed = [n for n in functions_on(packed, touched_pages(args, packed), lo,
                                          cold[0] + cold[1])
                  if n not in listed]
        print("round %d: packed .text %.2f MiB; %d functions on pages touched past it"
              % (round_ + 1, text[1] / 2.0**20, len(missed)), file=sys.stderr)
        if not missed:
            break
        # Which fill ran them is not known (pages, not functions): with
        # the functions every fill runs.
        order[common:common] = missed
        common += len(missed)
        listed.update(missed)
    with open(args.out, "w") as f:
        f.write("".join(n + "\n" for n in order))
    print("%s: %d functions" % (args.out, len(order)), file=sys.stderr)
    shutil.rmtree(work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
