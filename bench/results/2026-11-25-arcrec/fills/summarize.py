#!/usr/bin/env python3
"""Summarizes the interleaved fills of this directory: per round and build,
keys per MiB of RSS after the fill, the largest RSS sampled and goal 1
(RSS <= 1.05 x budget + 24 MiB at every sample); medians per build."""
import glob, json, os, re, statistics
MiB = 1 << 20
rows = {}
print("| system | value B | build | round | resident | RSS MiB | keys/MiB RSS | max RSS MiB | goal 1 at every sample | wrong |")
print("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | --- | ---: |")
out = []
for d in sorted(glob.glob(os.path.join(os.path.dirname(os.path.abspath(__file__)), "*-r*/results.json"))):
    m = re.search(r"/(main|new)-r(\d+)/results.json$", d)
    build, rnd = m.group(1), int(m.group(2))
    for f in json.load(open(d))["fills"]:
        r = f["result"]
        a = r["after_fill"]
        budget = f["budget_mb"] * MiB
        limit = 1.05 * budget + 24 * MiB
        mx = max([s["rss_bytes"] for s in r["samples"]] + [a["rss_bytes"]])
        kpm = a["resident"] / (a["rss_bytes"] / MiB)
        ok = all(s["rss_bytes"] <= limit for s in r["samples"]) and a["rss_bytes"] <= limit
        out.append((f["system"], f["value_bytes"], build, rnd, a["resident"], a["rss_bytes"] / MiB, kpm, mx / MiB, ok, r["read_back"]["wrong"]))
        rows.setdefault((f["system"], f["value_bytes"], build), []).append(kpm)
for o in sorted(out):
    print("| %s | %d | %s | %d | %d | %.1f | %.0f | %.1f | %s | %d |" % (o[0], o[1], "arcrec" if o[2] == "new" else "main", o[3], o[4], o[5], o[6], o[7], "yes" if o[8] else "NO", o[9]))
print()
print("| system | value B | median keys/MiB main | arcrec | arcrec / main |")
print("| --- | ---: | ---: | ---: | ---: |")
for (sysname, v) in sorted({(k[0], k[1]) for k in rows}):
    a = statistics.median(rows[(sysname, v, "main")]); b = statistics.median(rows[(sysname, v, "new")])
    print("| %s | %d | %.0f | %.0f | %.3f |" % (sysname, v, a, b, b / a))
for v in (64, 1024):
    for build in ("main", "new"):
        f = statistics.median(rows[("furrballs", v, build)]); mc = statistics.median(rows[("memcached", v, build)])
        print("furrballs / memcached at %d B, %s rounds: %.3f" % (v, "arcrec" if build == "new" else "main", f / mc))
