#!/bin/bash
# perf record -g of one server (KIND furrballs or empty) while ghz sends unary Gets (16 calls over
# 4 connections, 9 s; recorded 2 s in, for 4 s); output in OUT (perf data, dso.txt, report.txt).
# usage: profile_unary.sh KIND SERVER CLI OUT
KIND=$1; SERVER=$2; CLI=$3; OUT=$4; mkdir -p $OUT
PORT=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
if [ "$KIND" = empty ]; then $SERVER --address=127.0.0.1:$PORT >$OUT/server.log 2>&1 &
else $SERVER --listen_address=127.0.0.1:$PORT --metrics_address= --memory_mb=128 --expected_item_bytes=88 >$OUT/server.log 2>&1 & fi
SPID=$!
for i in $(seq 50); do (echo > /dev/tcp/127.0.0.1/$PORT) 2>/dev/null && break; sleep 0.1; done
[ "$KIND" = empty ] || $CLI --target=127.0.0.1:$PORT load --ops=4000 --keys=1000 --value_size=64 --get_ratio=0 --key_prefix=k --concurrency=4 >/dev/null 2>&1
~/go/bin/ghz --insecure --call furrballs.v1.Cache/Get -d '{"key":"azE="}' --concurrency 16 --connections 4 -z 9s --timeout 10s --format json 127.0.0.1:$PORT > $OUT/ghz.json 2>&1 &
GPID=$!
sleep 2
perf record -g -p $SPID -o $OUT/perf.data -- sleep 4 2>/dev/null
wait $GPID
kill $SPID; wait $SPID
perf report -i $OUT/perf.data --no-children --sort dso --stdio 2>/dev/null | grep -E "^ +[0-9.]+%" > $OUT/dso.txt
perf report -i $OUT/perf.data --no-children --sort sym --stdio -g none 2>/dev/null | grep -E "^ +[0-9.]+%" | head -60 > $OUT/report.txt
