#!/bin/bash
# usage: [BUILDS="a b"] starve_loop.sh OUTDIR FIRST LAST [starve_fill.py args]
# Rounds FIRST..LAST of starve_fill.py with /tmp/arcrise-<build> for each of
# BUILDS (default "main branch"), the order reversed every other round.
R=$1; shift; a=$1; b=$2; shift 2
read -r -a builds <<< "${BUILDS:-main branch}"
for i in $(seq $a $b); do
  order=("${builds[@]}")
  [ $((i % 2)) = 0 ] && order=("${builds[1]}" "${builds[0]}")
  for build in "${order[@]}"; do
    echo "round $i $build load $(cut -d' ' -f1-3 /proc/loadavg) $(date -u +%T)" >> $R/rounds.txt
    python3 bench/results/2026-11-25-arcrise/starve_fill.py --bin_dir=/tmp/arcrise-$build --out=$R/$build-r$i "$@" >> $R/rounds.txt 2>&1
  done
done
