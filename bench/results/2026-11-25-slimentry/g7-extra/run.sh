#!/bin/bash
for s in $(seq 13 22); do
  if ((s % 2)); then order="main slim"; else order="slim main"; fi
  for b in $order; do
    /tmp/slim-bin/ycsb_$b --backends=furrball,absl_mutex --workloads=C --distributions=zipfian --value_sizes=64 --threads=1 --working_sets=0.1 --budget_mb=64 --ops_per_thread=200000 --runs=3 --csv=bench/results/2026-11-25-slimentry/g7-extra/raw/rot_${b}_s${s}.csv > /dev/null 2>&1
    echo "$(date -u +%T) $b s$s load $(cut -d' ' -f1 /proc/loadavg)" >> bench/results/2026-11-25-slimentry/g7-extra/log.txt
  done
done
echo done >> bench/results/2026-11-25-slimentry/g7-extra/log.txt
