#!/bin/bash
# usage: probe2.sh BIN_DIR OUT_PREFIX value_bytes [extra server flags]
# exact touched pages of the executable during the fill (touched_shim.so)
B=$1; OUT=$2; V=${3:-1024}; shift 3
PORT=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
LD_PRELOAD=/tmp/fs_probe/touched_shim.so $B/service/furrballs_server --listen_address=127.0.0.1:$PORT --metrics_address= --memory_mb=64 "$@" > $OUT.log 2>&1 &
PID=$!
for i in $(seq 100); do grep -q "furrballs: serving" $OUT.log && break; sleep 0.1; done
sleep 1
# no signal: per-page VMAs
sleep 2
python3 /work/wt-filerss/bench/memory/file_pages.py --pid=$PID --top=0 > $OUT.idle.pages
$B/bench/memory/fill_bench --backend=furrballs_multi --address=127.0.0.1:$PORT --pid=$PID --budget_mb=64 --key_bytes=24 --value_bytes=$V --threads=4 --depth=32 --max_batches=10 --sample_keys=0 --cache_aside_ops=0 --label=probe --out=$OUT.fill.json > /dev/null 2>&1
sleep 1
python3 /work/wt-filerss/bench/memory/file_pages.py --pid=$PID --top=150 --json=$OUT.after.json > $OUT.after.pages
cp /proc/$PID/maps $OUT.maps
kill $PID; wait $PID
