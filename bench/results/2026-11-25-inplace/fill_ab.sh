#!/bin/bash
# Interleaved fills of two servers, as bench/memory/run.py fills Furrballs:
# fill_bench --backend=furrballs_multi --budget_mb=64 --key_bytes=24 --threads=4 --depth=32
#   --min_growth=0.005 --max_batches=10 --max_seconds=100 --sample_keys=1000 --seed=1
# (run.sh itself also fills Redis and memcached and runs tools/setup.sh).
# usage: fill_ab.sh FILL_BENCH MAIN_SERVER BRANCH_SERVER ROUNDS VALUES...
# prints "build value max_rss/budget resident failed_sets fill_seconds read_back_bad"
fb=$1; main=$2; branch=$3; rounds=$4; shift 4
tmp=$(mktemp -d)
declare -A BIN=([main]=$main [branch]=$branch)
for r in $(seq "$rounds"); do for v in "$@"; do for b in main branch; do
  P=$((40000 + RANDOM % 20000)); log=$tmp/srv-$P.log
  ${BIN[$b]} --listen_address=127.0.0.1:$P --metrics_address= --memory_mb=64 > "$log" 2>&1 & SP=$!
  for i in $(seq 100); do grep -q "furrballs: serving" "$log" && break; sleep 0.1; done
  out=$tmp/fill-$P.json
  "$fb" --backend=furrballs_multi --address=127.0.0.1:$P --pid=$SP --budget_mb=64 --key_bytes=24 \
    --value_bytes="$v" --threads=4 --depth=32 --min_growth=0.005 --max_batches=10 --max_seconds=100 \
    --sample_keys=1000 --seed=1 --label="$b $v" --out="$out" 2> "$tmp/fill-$P.err"
  res=$(python3 -c "import json;d=json.load(open('$out'));print('%.3f %d %d %.1f %d' % (max(s['rss_bytes'] for s in d['samples'])/d['budget_bytes'], d['after_fill']['resident'], d['failed_sets'], d['fill_seconds'], d['read_back']['wrong']+d['read_back']['failed']))" 2>/dev/null)
  echo "$b $v $res"
  kill $SP; wait $SP 2>/dev/null; rm -f "$log" "$out" "$tmp/fill-$P.err"
done; done; done
rmdir "$tmp" 2>/dev/null
