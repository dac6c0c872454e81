#!/bin/bash
# usage: fills_loop.sh OUTDIR FIRST LAST: run.py (64 B and 1 KiB) of main and
# branch (/tmp/arcrise-main, /tmp/arcrise-branch), order alternating per round.
R=$1; a=$2; b=$3
for i in $(seq $a $b); do
  order="main branch"; [ $((i % 2)) = 0 ] && order="branch main"
  for build in $order; do
    echo "round $i $build $(cat /tmp/arcrise-$build/COMMIT) load $(cut -d' ' -f1-3 /proc/loadavg) $(date -u +%T)" >> $R/rounds.txt
    python3 bench/memory/run.py --bin_dir=/tmp/arcrise-$build --out_dir=$R/$build-r$i > $R/$build-r$i.log 2>&1
    echo "  exit $?" >> $R/rounds.txt
  done
done
