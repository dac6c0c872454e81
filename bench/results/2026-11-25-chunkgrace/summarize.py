import glob, statistics, collections
for which in ("main", "branch"):
    per = collections.defaultdict(list)
    for f in sorted(glob.glob(f"bench_{which}_*.txt")):
        for line in open(f):
            p = line.split()
            per[int(p[3])].append(float(p[7]))
    print(which, {s: (round(statistics.median(v), 1), len(v)) for s, v in sorted(per.items())})
