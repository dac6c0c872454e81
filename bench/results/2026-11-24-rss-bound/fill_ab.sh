#!/bin/bash
# Interleaved fills of main's and this branch's server, as run.py fills Furrballs:
# fill_bench --backend=furrballs_multi --budget_mb=64 --key_bytes=24 --threads=4 --depth=32
#   --min_growth=0.005 --max_batches=10 --max_seconds=100 --sample_keys=1000 --seed=1
# usage: fillab.sh ROUNDS VALUES... ; prints "build value max_ratio resident failed_sets"
rounds=$1; shift
FB=/dev/shm/rssbound-bazel/execroot/furrballs/bazel-out/k8-opt/bin/bench/memory/fill_bench
declare -A BIN=([main]=/dev/shm/rssb/mainbin/service/furrballs_server [branch]=/dev/shm/rssbound-bazel/execroot/furrballs/bazel-out/k8-opt/bin/service/furrballs_server)
for r in $(seq $rounds); do for v in "$@"; do for b in main branch; do
  P=$((40000+RANDOM%20000)); log=/dev/shm/rssb/fill-srv-$P.log
  ${BIN[$b]} --listen_address=127.0.0.1:$P --metrics_address= --memory_mb=64 > $log 2>&1 & SP=$!
  for i in $(seq 100); do grep -q "furrballs: serving" $log && break; sleep 0.1; done
  out=/dev/shm/rssb/fill-$P.json
  $FB --backend=furrballs_multi --address=127.0.0.1:$P --pid=$SP --budget_mb=64 --key_bytes=24 --value_bytes=$v --threads=4 --depth=32 --min_growth=0.005 --max_batches=10 --max_seconds=100 --sample_keys=1000 --seed=1 --label="$b $v" --out=$out 2> /dev/shm/rssb/fill-$P.err
  res=$(python3 -c "import json;d=json.load(open('$out'));print('%.3f %d %d %.1f %d' % (max(s['rss_bytes'] for s in d['samples'])/d['budget_bytes'], d['after_fill']['resident'], d['failed_sets'], d['fill_seconds'], d['read_back']['wrong']+d['read_back']['failed']))" 2>/dev/null)
  echo "$b $v $res"
  kill $SP; wait $SP 2>/dev/null; rm -f $log $out /dev/shm/rssb/fill-$P.err
done; done; done
