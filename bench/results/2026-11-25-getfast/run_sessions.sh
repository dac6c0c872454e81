#!/bin/bash
# Copied from bench/results/2026-11-24-hugepages. Runs sessions FIRST..LAST of the getpath method (docs/engine_bench.md,
# "After the drain cut"): every binary in BINARIES once per session, the
# order rotated by one each session; one CSV per run in raw/, a line per run
# in run_log.txt. BIN_DIR holds the binaries copied aside (ycsb_<name>).
# Usage: [OUT_DIR=dir] run_sessions.sh FIRST LAST name...
set -u
here=${OUT_DIR:-$(cd "$(dirname "$0")" && pwd)}  # raw/ and run_log.txt go here
bin_dir=${BIN_DIR:-/tmp/getfast}
first=$1; last=$2; shift 2
names=("$@")
for ((s = first; s <= last; ++s)); do
  n=${#names[@]}
  for ((i = 0; i < n; ++i)); do
    b=${names[$(((i + s) % n))]}
    echo "$(date -u +%H:%M:%S) start ${b}_s${s} load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$here/run_log.txt"
    "$bin_dir/ycsb_$b" --backends=furrball,absl_mutex --workloads=A,C \
      --distributions=zipfian --value_sizes=64 --threads=1,2 \
      --working_sets=0.1,0.5 --budget_mb=64 --ops_per_thread=200000 --runs=3 \
      --csv="$here/raw/rot_${b}_s${s}.csv" > /dev/null 2>&1
    echo "$(date -u +%H:%M:%S) end ${b}_s${s} rc=$? load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$here/run_log.txt"
  done
done
