#!/usr/bin/env bash
set -u
cd /work/wt-topofig
OUT=bench/results/2026-11-24-topology-final
until grep -q "engine exit" $OUT/run.txt; do sleep 10; done
B=/tmp/topofig/bin
for delay in 140 0; do
  cmd=("$B/service_bench" "--server_binary=$B/furrballs_server" "--empty_binary=$B/empty_server" "--runs=5"
    "--configs=nodejob64,direct,direct_thread_local,direct_round_robin,direct_round_robin_migrate"
    "--cells=get,multiget,pipeline" "--keys=1000"
    "--server_flags=--memory_mb=64 --simulate_nodes=2 --simulated_remote_delay_ns=$delay"
    "--csv=$OUT/service-$delay.csv")
  echo "service $delay start $(date -u +%FT%TZ), load average $(cut -d' ' -f1-3 /proc/loadavg)" >> $OUT/run.txt
  echo "${cmd[*]}" >> $OUT/run.txt
  "${cmd[@]}" > $OUT/service-$delay.md 2> $OUT/service-$delay.log
  echo "service $delay exit $? end $(date -u +%FT%TZ), load average $(cut -d' ' -f1-3 /proc/loadavg)" >> $OUT/run.txt
done
