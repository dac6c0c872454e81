#!/bin/bash
# YCSB 0.17.0 A/B/C/F: Furrballs binding with batching (batch_streams=1, the default),
# without (batch_streams=0), and Redis via Jedis; rounds interleaved.
set -u
W=/work/wt-clientbatch; Y=$W/bench/ycsb; OUT=$W/bench/results/2026-11-24-ycsb-batched
CP="$Y/target/bindings.jar:$Y/target/lib/*"
RECORDS=50000; OPS=${OPS:-30000}; ROUNDS=${ROUNDS:-3}
$W/bazel-bin/service/furrballs_server --listen_address=127.0.0.1:51801 --metrics_address= --memory_mb=128 --expected_item_bytes=1100 > $OUT/raw/furrballs.log 2>&1 & FP=$!
redis-server --bind 127.0.0.1 --port 51802 --save '' --appendonly no --protected-mode no --maxmemory 128mb --maxmemory-policy allkeys-lru --daemonize no > $OUT/raw/redis.log 2>&1 & RP=$!
sleep 2
ycsb() { # db phase workload extra...
  local db=$1 phase=$2 w=$3; shift 3
  java -cp "$CP" site.ycsb.Client $phase -db $db -P $Y/workloads/workload$w -P $Y/workloads/common.properties \
    -p recordcount=$RECORDS -p operationcount=$OPS -p maxexecutiontime=60 "$@" 2>&1
}
FB="dev.furrballs.ycsb.FurrballsClient"; RD="dev.furrballs.ycsb.RedisClient"
ycsb $FB -load a -p furrballs.address=127.0.0.1:51801 > $OUT/raw/load-furrballs.txt
ycsb $RD -load a -p redis.host=127.0.0.1 -p redis.port=51802 > $OUT/raw/load-redis.txt
for r in $(seq 1 $ROUNDS); do for w in a b c f; do
  for t in batched unary redis; do
    case $t in
      batched) args=(-p furrballs.address=127.0.0.1:51801 -p furrballs.batch_streams=1); db=$FB;;
      unary) args=(-p furrballs.address=127.0.0.1:51801 -p furrballs.batch_streams=0); db=$FB;;
      redis) args=(-p redis.host=127.0.0.1 -p redis.port=51802); db=$RD;;
    esac
    f=$OUT/raw/r$r-$w-$t.txt
    ycsb $db -t $w "${args[@]}" > $f
    echo "r$r $w $t $(grep 'OVERALL\], Throughput' $f | awk -F', ' '{print $3}') load $(cut -d' ' -f1-3 /proc/loadavg)"
  done
done; done
kill $FP $RP; wait
