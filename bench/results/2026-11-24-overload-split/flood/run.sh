#!/bin/bash
# RSS of the server under a flood of 15 MB MultiSets, per --grpc_memory_mb.
# Run from the repository root; multiset.json (15 items of 1,000,000 bytes,
# a 20 MB file, not kept) is made by:
#   python3 -c 'import base64,json; v=base64.b64encode(b"x"*1000000).decode(); json.dump({"items":[{"key":base64.b64encode(b"flood-%d"%i).decode(),"value":v} for i in range(15)]},open("multiset.json","w"))'
for q in 0 256 32; do
  port=$((51200 + q))
  bazel-bin/service/furrballs_server --listen_address=127.0.0.1:$port --metrics_address= --memory_mb=64 --grpc_memory_mb=$q > server-$q.out 2>&1 &
  pid=$!
  sleep 2
  ghz --insecure --call furrballs.v1.Cache/MultiSet -D multiset.json --concurrency 64 --connections 16 -z 15s --timeout 60s 127.0.0.1:$port > ghz-$q.txt 2>&1
  grep -E "VmHWM|VmRSS" /proc/$pid/status > rss-$q.txt
  kill -TERM $pid; wait $pid
done
echo done > DONE
