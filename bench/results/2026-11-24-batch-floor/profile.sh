#!/bin/bash
# perf record -g of one server under the CLI's Batch load, with the window's Batch messages
# counted by the server: starts KIND (furrballs: furrballs_server SERVER, preloaded with
# 1,000 keys; empty: //bench/service:empty_server SERVER) on free ports, runs CLI load (Gets
# of 64 B, CALLERS synchronous callers on one client, i.e. one Batch stream), and 2 s in
# records the server for 4 s. Output in OUT (default /dev/shm/floor14: the perf data is large
# and the root disk was full): perf.data, report.txt (flat, by symbol), dso.txt (by DSO),
# window.txt (messages, switches, CPU seconds of the window).
# usage: profile.sh KIND SERVER CLI CALLERS [OUT]
KIND=$1; SERVER=$2; CLI=$3; CALLERS=$4; OUT=${5:-/dev/shm/floor14}
mkdir -p $OUT
PORT=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
MPORT=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
if [ "$KIND" = empty ]; then
  $SERVER --address=127.0.0.1:$PORT --metrics_address=127.0.0.1:$MPORT >$OUT/server.log 2>&1 &
else
  $SERVER --listen_address=127.0.0.1:$PORT --metrics_address=127.0.0.1:$MPORT --memory_mb=128 \
    --expected_item_bytes=88 >$OUT/server.log 2>&1 &
fi
SPID=$!
for i in $(seq 50); do (echo > /dev/tcp/127.0.0.1/$PORT) 2>/dev/null && break; sleep 0.1; done
[ "$KIND" = empty ] || $CLI --target=127.0.0.1:$PORT load --ops=4000 --keys=1000 --value_size=64 \
  --get_ratio=0 --key_prefix=k --concurrency=4 >/dev/null 2>&1
msgs() { curl -s http://127.0.0.1:$MPORT/metrics | awk '/^furrballs_requests_total/ && /op="batch"/ {s+=$NF} END {print s+0}'; }
cs() { cat /proc/$SPID/task/*/status | awk '/ctxt_switches/ {s+=$2} END {print s}'; }
cpu() { python3 -c "import time;print(time.clock_gettime(((~$SPID)<<3)|2))"; }
$CLI --target=127.0.0.1:$PORT load --ops=3000000 --keys=1000 --value_size=64 --get_ratio=1 \
  --key_prefix=k --concurrency=$CALLERS --timeout_ms=10000 >$OUT/load.log 2>&1 &
LPID=$!
sleep 2
M0=$(msgs); C0=$(cs); T0=$(cpu)
perf record -g -p $SPID -o $OUT/perf.data -- sleep 4 2>/dev/null
M1=$(msgs); C1=$(cs); T1=$(cpu)
python3 -c "m=$M1-$M0; print('messages %d switches/msg %.2f cpu_s %.3f us/msg %.1f' % (m, ($C1-$C0)/m, $T1-$T0, ($T1-$T0)/m*1e6))" | tee $OUT/window.txt
kill $LPID 2>/dev/null; wait $LPID 2>/dev/null
kill $SPID; wait $SPID
perf report -i $OUT/perf.data --no-children --sort sym --stdio 2>/dev/null | grep -v '^$' | grep '%' | head -80 > $OUT/report.txt
perf report -i $OUT/perf.data --no-children --sort dso --stdio 2>/dev/null | grep '%' | head -20 > $OUT/dso.txt
