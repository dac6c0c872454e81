#!/bin/bash
# Per-message counts on a live server: starts SERVER on a free port, preloads 1,000 keys,
# runs CLI load (Gets of 64 B, CALLERS synchronous callers on one client, i.e. one Batch
# stream) and, 2 s in, TOOL on the server for ~4 s (strace -c; straceseq: a 1 s strace
# of every syscall but futex; perftrace: perf trace -s; perfrec: perf record -g; cs: per-
# thread context switches), then prints the Batch messages, context switches and CPU
# ticks of that window. Output files go to /tmp/batchsys.
# usage: probe.sh SERVER CLI CALLERS TOOL [server flags...]
mkdir -p /tmp/batchsys
SERVER=$1; CLI=$2; CALLERS=$3; TOOL=$4; shift 4
PORT=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
MPORT=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
$SERVER --listen_address=127.0.0.1:$PORT --metrics_address=127.0.0.1:$MPORT --memory_mb=128 --expected_item_bytes=88 "$@" >/tmp/batchsys/server.log 2>&1 &
SPID=$!
for i in $(seq 50); do (echo > /dev/tcp/127.0.0.1/$PORT) 2>/dev/null && break; sleep 0.1; done
$CLI --target=127.0.0.1:$PORT load --ops=4000 --keys=1000 --value_size=64 --get_ratio=0 --key_prefix=k --concurrency=4 >/dev/null 2>&1
msgs() { curl -s http://127.0.0.1:$MPORT/metrics | awk '/^furrballs_requests_total/ && /op="batch"/ {s+=$NF} END {print s+0}'; }
cs() { cat /proc/$SPID/task/*/status | awk '/ctxt_switches/ {s+=$2} END {print s}'; }
$CLI --target=127.0.0.1:$PORT load --ops=3000000 --keys=1000 --value_size=64 --get_ratio=1 --key_prefix=k --concurrency=$CALLERS --timeout_ms=10000 >/tmp/batchsys/load.log 2>&1 &
LPID=$!
sleep 2
M0=$(msgs); C0=$(cs); T0=$(awk '{print $14+$15}' /proc/$SPID/stat)
case $TOOL in
  strace) timeout -s INT 4 strace -c -f -p $SPID -o /tmp/batchsys/strace.out ;;
  straceseq) timeout -s INT 1 strace -f -tt -p $SPID -e trace=!futex -o /tmp/batchsys/strace.seq ;;
  perftrace) timeout -s INT 4 perf trace -s -p $SPID -o /tmp/batchsys/perftrace.out 2>/dev/null ;;
  perfrec) perf record -g -p $SPID -o /tmp/batchsys/perf.data -- sleep 4 2>/dev/null ;;
  cs) for t in /proc/$SPID/task/*; do echo "$(cat $t/comm) $(grep ctxt $t/status | tr '\n' ' ')"; done > /tmp/batchsys/cs0; sleep 4; for t in /proc/$SPID/task/*; do echo "$(cat $t/comm) $(grep ctxt $t/status | tr '\n' ' ')"; done > /tmp/batchsys/cs1 ;;
  *) sleep 4 ;;
esac
M1=$(msgs); C1=$(cs); T1=$(awk '{print $14+$15}' /proc/$SPID/stat)
echo "messages $((M1-M0)) switches $((C1-C0)) cpu_ticks $((T1-T0))" | tee /tmp/batchsys/window.txt
kill $LPID 2>/dev/null; wait $LPID 2>/dev/null
kill $SPID; wait $SPID
