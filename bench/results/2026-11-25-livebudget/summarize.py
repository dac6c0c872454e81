import json,sys,glob,os,statistics
rows={}
for d in sorted(glob.glob(sys.argv[1])):
    r=json.load(open(os.path.join(d,'results.json')))
    for f in r['fills']:
        if 'result' not in f: print(d,f['system'],f.get('error')); continue
        res=f['result']; a=res['after_fill']
        kpm=a['resident']/(a['rss_bytes']/2**20)
        mx=max(s['rss_bytes'] for s in res['samples'])/res['budget_bytes']
        last=[s['resident'] for s in res['samples'][-4:]]
        print("%-28s %-9s %7d B  keys %7d (last batch %d-%d)  RSS %6.1f MiB  keys/MiB %6.0f  maxRSS/budget %.2f  fill %.2fs  rb %s" % (
            os.path.basename(d), f['system'], f['value_bytes'], a['resident'], min(last), max(last), a['rss_bytes']/2**20, kpm, mx, res['fill_seconds'], res['read_back']['hits']))
        rows.setdefault((f['system'],f['value_bytes'],os.path.basename(d).split('-')[1]),[]).append(kpm)
print()
for k,v in sorted(rows.items()):
    print(k, "median keys/MiB %.0f" % statistics.median(v), ["%.0f"%x for x in v])
