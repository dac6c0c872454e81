#!/bin/bash
# usage: probe.sh BIN_DIR OUT_PREFIX [value_bytes] [extra server flags]
B=$1; OUT=$2; V=${3:-1024}; shift 3
PORT=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
$B/service/furrballs_server --listen_address=127.0.0.1:$PORT --metrics_address= --memory_mb=64 "$@" > $OUT.log 2>&1 &
PID=$!
for i in $(seq 100); do grep -q "furrballs: serving" $OUT.log && break; sleep 0.1; done
sleep 1
grep VmRSS /proc/$PID/status > $OUT.idle
python3 /work/wt-textprec/bench/memory/file_pages.py --pid=$PID --top=60 > $OUT.idle.pages
$B/bench/memory/fill_bench --backend=furrballs_multi --address=127.0.0.1:$PORT --pid=$PID --budget_mb=64 --key_bytes=24 --value_bytes=$V --threads=4 --depth=32 --max_batches=10 --sample_keys=0 --cache_aside_ops=0 --label=probe --out=$OUT.fill.json > /dev/null 2>&1
sleep 1
grep -E "VmRSS|RssAnon|RssFile" /proc/$PID/status > $OUT.after
python3 /work/wt-textprec/bench/memory/file_pages.py --pid=$PID --top=80 > $OUT.after.pages
kill $PID; wait $PID
