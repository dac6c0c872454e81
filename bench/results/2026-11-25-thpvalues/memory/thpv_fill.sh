#!/bin/bash
# Usage: thpv_fill.sh LABEL BIN_DIR  -- the fills of the brief for one build.
label=$1; bin=$2
res=/work/wt-thpvalues/bench/results/2026-11-25-thpvalues/memory
mkdir -p $res
cd /work/wt-thpvalues
run() {  # name, args...
  name=$1; shift
  echo "$(date -u +%H:%M:%S) start $label/$name load $(cut -d' ' -f1-3 /proc/loadavg)" >> $res/fill_log.txt
  /usr/bin/python3 bench/memory/run.py --bin_dir=$bin --out_dir=$res/$label/$name \
    --command="bench/memory/run.py $*" "$@" > $res/$label.$name.out 2>&1 &
  rp=$!
  bash /tmp/thpv_poll.sh $rp $res/$label/$name.poll.txt &
  wait $rp; rc=$?
  echo "$(date -u +%H:%M:%S) end $label/$name rc=$rc" >> $res/fill_log.txt
}
mkdir -p $res/$label
run fill_r1
run fill_r2
run values_r1 --values=8,65536,1048576
run values_r2 --values=8,65536,1048576
run small --small
