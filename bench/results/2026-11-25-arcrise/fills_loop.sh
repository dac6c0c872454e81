#!/bin/bash
# usage: [BUILDS="a b"] fills_loop.sh OUTDIR FIRST LAST: run.py (64 B and
# 1 KiB) of /tmp/arcrise-<build> for each of BUILDS (default "main branch"),
# the order reversed every other round.
R=$1; a=$2; b=$3
read -r -a builds <<< "${BUILDS:-main branch}"
for i in $(seq $a $b); do
  order=("${builds[@]}")
  [ $((i % 2)) = 0 ] && order=("${builds[1]}" "${builds[0]}")
  for build in "${order[@]}"; do
    echo "round $i $build $(cat /tmp/arcrise-$build/COMMIT) load $(cut -d' ' -f1-3 /proc/loadavg) $(date -u +%T)" >> $R/rounds.txt
    python3 bench/memory/run.py --bin_dir=/tmp/arcrise-$build --out_dir=$R/$build-r$i > $R/$build-r$i.log 2>&1
    echo "  exit $?" >> $R/rounds.txt
  done
done
