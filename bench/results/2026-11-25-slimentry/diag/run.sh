#!/bin/bash
# Diagnosis of the C, 1 thread, 0.1x cell only: 8 alternating rounds.
for s in 1 2 3 4 5 6 7 8; do
  if [ $((s % 2)) = 1 ]; then order="main slim"; else order="slim main"; fi
  for b in $order; do
    /tmp/slim-bin/ycsb_$b --backends=furrball,absl_mutex --workloads=C,A \
      --distributions=zipfian --value_sizes=64 --threads=1 \
      --working_sets=0.1,0.5 --budget_mb=64 --ops_per_thread=200000 --runs=3 \
      --csv=/tmp/slim-diag/rot_${b}_s${s}.csv > /dev/null 2>&1
    echo "$(date -u +%H:%M:%S) $b s$s load $(cut -d' ' -f1-3 /proc/loadavg)" >> /tmp/slim-diag/run_log.txt
  done
done
echo alldone >> /tmp/slim-diag/run_log.txt
