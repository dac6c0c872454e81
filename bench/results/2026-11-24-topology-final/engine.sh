#!/usr/bin/env bash
set -u
cd /work/wt-topofig
OUT=bench/results/2026-11-24-topology-final
{
echo "commit $(git rev-parse --short HEAD)"
echo "engine start $(date -u +%FT%TZ), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "/tmp/topofig/bin/topology_bench --runs=5 --nodes=2,4 --delays=70,140 --workloads=placement,uniform --keys_per_thread=1000 --warmup_ops_per_thread=250000 --ops_per_thread=100000 --configs=hash,round_robin,thread_local,thread_local_migrate,round_robin_migrate,round_robin_defaults,race,race_location_cache --csv=$OUT/engine.csv"
} >> $OUT/run.txt
/tmp/topofig/bin/topology_bench --runs=5 --nodes=2,4 --delays=70,140 --workloads=placement,uniform --keys_per_thread=1000 --warmup_ops_per_thread=250000 --ops_per_thread=100000 --configs=hash,round_robin,thread_local,thread_local_migrate,round_robin_migrate,round_robin_defaults,race,race_location_cache --csv=$OUT/engine.csv > $OUT/engine.md 2> $OUT/engine.log
echo "engine exit $? end $(date -u +%FT%TZ), load average $(cut -d' ' -f1-3 /proc/loadavg)" >> $OUT/run.txt
