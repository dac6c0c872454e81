#!/usr/bin/env bash
# Engine CPU per op, criterion 4 of the README: ycsb_bench of main and keyhdr,
# 3 sessions each, interleaved main, keyhdr, keyhdr, main, main, keyhdr.
here=/work/keyhdr-fills/engine
s=0
for b in main keyhdr keyhdr main main keyhdr; do
  s=$((s+1))
  echo "$(date -u +%H:%M:%S) start ${b}_s${s} load $(cut -d' ' -f1-3 /proc/loadavg)" >> $here/run_log.txt
  /work/keyhdr-bins/ycsb_$b --backends=furrball --workloads=A,C --distributions=zipfian \
    --value_sizes=64,1024 --threads=1 --working_sets=0.5,3 --budget_mb=32 \
    --ops_per_thread=200000 --runs=3 --csv=$here/raw/${b}_s${s}.csv > $here/raw/${b}_s${s}.md 2> $here/raw/${b}_s${s}.err
  echo "$(date -u +%H:%M:%S) end ${b}_s${s} rc=$? load $(cut -d' ' -f1-3 /proc/loadavg)" >> $here/run_log.txt
done
