#!/usr/bin/env bash
cd /work/wt-keyhdr
r=0
for b in main keyhdr keyhdr main main keyhdr; do
  r=$((r+1))
  echo "$(date -u +%H:%M:%S) fill $r $b load $(cut -d' ' -f1-3 /proc/loadavg)"
  python3 bench/memory/run.py --bin_dir=/work/keyhdr-bins/$b --out_dir=/work/keyhdr-fills/$b-r$r \
    --command="bench/memory/run.py --bin_dir=/work/keyhdr-bins/$b" > /work/keyhdr-fills/$b-r$r.log 2>&1
  echo "$(date -u +%H:%M:%S) done $r rc=$?"
done
