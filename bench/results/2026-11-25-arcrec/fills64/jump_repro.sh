#!/bin/bash
# Runs the 64 B fill of bench/memory/run.py against one server, dumps its smaps when RSS > 75 MiB.
B=$1; N=$2
for i in $(seq 1 $N); do
  PORT=$((40000 + RANDOM % 20000))
  /tmp/arcrec-$B/service/furrballs_server --listen_address=127.0.0.1:$PORT --metrics_address=127.0.0.1:$((PORT+1)) --memory_mb=64 > /tmp/arcrec-jump-srv.log 2>&1 &
  PID=$!
  sleep 0.5
  /tmp/arcrec-$B/bench/memory/fill_bench --backend=furrballs_multi --address=127.0.0.1:$PORT --pid=$PID --budget_mb=64 --key_bytes=24 --value_bytes=64 --threads=4 --depth=32 --min_growth=0.005 --max_batches=10 --max_seconds=100 --sample_keys=1000 --seed=1 --cache_aside_ops=0 --zipf_theta=0.99 --label=jump --out=/tmp/arcrec-jump-fill.json > /tmp/arcrec-jump-drv.log 2>&1
  RSS=$(awk '/VmRSS/{print $2}' /proc/$PID/status)
  echo "$B $i RSS_kB=$RSS load=$(cut -d' ' -f1 /proc/loadavg) $(grep 'batch 2 step 4/4' /tmp/arcrec-jump-drv.log | sed 's/.*inserted, //')"
  curl -s http://127.0.0.1:$((PORT+1))/metrics > /tmp/arcrec-jump-metrics-last-$B.txt; if [ "$RSS" -gt 76800 ]; then
    cp /proc/$PID/smaps /tmp/arcrec-jump-smaps-$B-$i.txt; cat /proc/$PID/smaps_rollup > /tmp/arcrec-jump-rollup-$B-$i.txt
    cp /tmp/arcrec-jump-drv.log /tmp/arcrec-jump-drv-$B-$i.log
    curl -s http://127.0.0.1:$((PORT+1))/metrics > /tmp/arcrec-jump-metrics-$B-$i.txt; ls /proc/$PID/task | wc -l > /tmp/arcrec-jump-threads-$B-$i.txt
  fi
  kill $PID; wait $PID 2>/dev/null
done
