#!/bin/bash
# Operations per Batch message and throughput of the YCSB binding's batching,
# for binding jars side by side (rounds alternate): one furrballs_server
# (SERVER, default the worktree's bazel-bin), 10,000 records, 60,000
# operations of workload WL (default c) per run, THREADS YCSB threads.
# Messages and unary calls from the server's furrballs_requests_total.
# usage: [WL=a] [SERVER=...] ycsb_fill.sh ROUNDS THREADS NAME=JAR...
#   (build the jar: cd bench/ycsb && mvn -o -q -DskipTests package)
ROUNDS=$1; THREADS=$2; shift 2
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
Y=$ROOT/bench/ycsb
PORT=51911; MPORT=51912
${SERVER:-$ROOT/bazel-bin/service/furrballs_server} --listen_address=127.0.0.1:$PORT --metrics_address=127.0.0.1:$MPORT --memory_mb=128 --expected_item_bytes=1100 >/dev/null 2>&1 & FP=$!
sleep 2
msgs() { curl -s http://127.0.0.1:$MPORT/metrics | awk '/^furrballs_requests_total/ && /op="batch"/ {s+=$NF} END {print s+0}'; }
unary() { curl -s http://127.0.0.1:$MPORT/metrics | awk '/^furrballs_requests_total/ && /op="(get|set)"/ {s+=$NF} END {print s+0}'; }
ycsb() { local jar=$1 phase=$2; shift 2
  java -cp "$jar:$Y/target/lib/*" site.ycsb.Client $phase -db dev.furrballs.ycsb.FurrballsClient -P $Y/workloads/workload${WL:-c} -P $Y/workloads/common.properties \
    -p recordcount=10000 -p operationcount=60000 -p threadcount=$THREADS -p furrballs.address=127.0.0.1:$PORT "$@" 2>&1; }
first=${1#*=}
ycsb $first -load >/dev/null
for r in $(seq $ROUNDS); do for spec in "$@"; do name=${spec%%=*}; jar=${spec#*=}
  m0=$(msgs); u0=$(unary)
  out=$(ycsb $jar -t); tp=$(echo "$out" | grep 'OVERALL\], Throughput' | awk -F', ' '{print $3}'); rets=$(echo "$out" | grep 'Return=' | tr '\n' ' ')
  m1=$(msgs); u1=$(unary)
  echo "r$r $name threads=$THREADS messages=$((m1-m0)) unary=$((u1-u0)) ops_per_msg=$(echo "scale=1; (60000-($u1-$u0))/($m1-$m0)" | bc) throughput=$tp load=$(cut -d' ' -f1 /proc/loadavg) $rets"
done; done
kill $FP; wait $FP
