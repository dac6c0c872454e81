#!/usr/bin/env python3
"""Summarizes run.py fills of DIR (<build>-r<round>/results.json): per fill,
keys per MiB of RSS after the fill, the largest RSS sampled, goal 1 (RSS <=
1.05 x budget + 24 MiB at every sample) and the harness commit; medians per
build and value size (rounds given with --exclude left out)."""
import argparse, glob, json, os, re, statistics
MiB = 1 << 20
p = argparse.ArgumentParser()
p.add_argument("dir")
p.add_argument("--exclude", default="", help="comma-separated <build>-r<round> to leave out")
args = p.parse_args()
excluded = set(filter(None, args.exclude.split(",")))
rows, out = {}, []
for path in sorted(glob.glob(os.path.join(args.dir, "*-r*/results.json"))):
    name = os.path.basename(os.path.dirname(path))
    m = re.match(r"(\w+)-r(\d+)$", name)
    build, rnd = m.group(1), int(m.group(2))
    raw = json.load(open(path))
    harness = raw.get("facts", raw).get("furrballs_commit", "?") if isinstance(raw, dict) else "?"
    for f in raw["fills"]:
        r = f.get("result")
        if not r:
            continue
        a = r["after_fill"]
        limit = 1.05 * f["budget_mb"] * MiB + 24 * MiB
        mx = max([s["rss_bytes"] for s in r["samples"]] + [a["rss_bytes"]])
        kpm = a["resident"] / (a["rss_bytes"] / MiB)
        out.append((f["system"], f["value_bytes"], build, rnd, a["resident"], a["rss_bytes"] / MiB,
                    kpm, mx / MiB, mx <= limit, r["read_back"]["wrong"], str(harness)[:7],
                    name in excluded))
        if name not in excluded:
            rows.setdefault((f["system"], f["value_bytes"], build), []).append(kpm)
print("| system | value B | build | round | resident | RSS MiB | keys/MiB RSS | max RSS MiB | goal 1 at every sample | wrong | harness |")
print("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | --- | ---: | --- |")
for o in sorted(out):
    print("| %s | %d | %s | %d%s | %d | %.1f | %.0f | %.1f | %s | %d | %s |" % (
        o[0], o[1], o[2], o[3], " (excluded)" if o[11] else "", o[4], o[5], o[6], o[7],
        "yes" if o[8] else "NO", o[9], o[10]))
print()
# main first, so the last column is the other build over main.
builds = sorted({k[2] for k in rows}, key=lambda b: (b != "main", b))
print("| system | value B | " + " | ".join("median %s (n)" % b for b in builds) + " | %s / %s |" % (builds[-1], builds[0]) if len(builds) == 2 else "")
print("| --- | ---: | " + " | ".join("---:" for _ in builds) + " | ---: |")
for (s, v) in sorted({(k[0], k[1]) for k in rows}):
    med = [statistics.median(rows[(s, v, b)]) for b in builds if (s, v, b) in rows]
    ns = [len(rows[(s, v, b)]) for b in builds if (s, v, b) in rows]
    ratio = "%.3f" % (med[-1] / med[0]) if len(med) == 2 else ""
    print("| %s | %d | %s | %s |" % (s, v, " | ".join("%.0f (%d)" % (m, n) for m, n in zip(med, ns)), ratio))
