#!/bin/bash
# usage: starve-loop.sh OUTDIR FIRST LAST [extra args]
R=$1; shift; a=$1; b=$2; shift 2
for i in $(seq $a $b); do
  for build in main branch; do
    [ $((i % 2)) = 0 ] && build=$([ $build = main ] && echo branch || echo main)
    echo "round $i $build load $(cut -d' ' -f1-3 /proc/loadavg) $(date -u +%T)" >> $R/rounds.txt
    python3 bench/results/2026-11-25-arcrise/starve_fill.py --bin_dir=/tmp/arcrise-$build --out=$R/$build-r$i "$@" >> $R/rounds.txt 2>&1
  done
done
