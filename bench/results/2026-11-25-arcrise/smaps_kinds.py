#!/usr/bin/env python3
"""Sums a furrballs_server's smaps Rss by kind of mapping: malloc arenas
(64 MiB-aligned anonymous mappings with MAP_NORESERVE, 'nr'), the brk heap,
other anonymous mappings (value block, key table, ARC, thread stacks) listed
one by one when above 1 MiB, and files."""
import re
import sys


def parse(path):
    maps, cur = [], None
    for line in open(path):
        m = re.match(r"^([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ \S+\s*(.*)$", line)
        if m:
            cur = {"start": int(m.group(1), 16), "end": int(m.group(2), 16),
                   "perm": m.group(3), "name": m.group(4), "rss": 0, "flags": ""}
            maps.append(cur)
        elif line.startswith("Rss:"):
            cur["rss"] = int(line.split()[1])
        elif line.startswith("VmFlags:"):
            cur["flags"] = line.split(":", 1)[1].split()
    return maps


def main():
    for path in sys.argv[1:]:
        kinds = {"arena": 0, "heap": 0, "anon": 0, "file": 0}
        big = []
        for m in parse(path):
            if m["name"] == "[heap]":
                kinds["heap"] += m["rss"]
            elif m["name"]:
                kinds["file"] += m["rss"]
            elif "nr" in m["flags"] and m["start"] % (64 << 20) == 0:
                kinds["arena"] += m["rss"]
            else:
                kinds["anon"] += m["rss"]
                if m["rss"] > 1024:
                    big.append("%.1f/%.1f" % (m["rss"] / 1024, (m["end"] - m["start"]) / 2**20))
        print(path, " ".join("%s %.1f" % (k, v / 1024) for k, v in kinds.items()),
              "| anon >1MiB (rss/size MiB):", " ".join(big))


if __name__ == "__main__":
    main()
