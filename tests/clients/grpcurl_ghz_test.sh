#!/usr/bin/env bash
# Smoke test of the server with tools that are not ours, through server
# reflection only (no .proto files): grpcurl lists and describes every
# service (with the .proto's comments), checks health, and does a Set then a
# Get with JSON bodies; ghz runs a short, bounded load
# (300 Gets, concurrency 4) that must finish with zero errors.
#
# grpcurl and ghz come from tools/install_go_tools.sh.
#
# usage: grpcurl_ghz_test.sh SERVER_BINARY
set -u
here=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
# shellcheck source=lib.sh
source "$here/lib.sh"
server=$1

grpcurl=$(find_go_tool grpcurl)
ghz=$(find_go_tool ghz)
if [ -z "$grpcurl" ] || [ -z "$ghz" ]; then
  fail "grpcurl and ghz are installed" "grpcurl='$grpcurl' ghz='$ghz'; run tools/install_go_tools.sh"
  finish grpcurl_ghz_test
fi
pass "grpcurl and ghz are installed"

if ! start_server "$server"; then
  fail "server starts" "see the log above"
  finish grpcurl_ghz_test
fi
addr="127.0.0.1:$SERVER_PORT"
gc() { "$grpcurl" -plaintext -max-time 20 "$@"; }

expect "grpcurl list" 0 gc "$addr" list
grep -qx "furrballs.v1.Cache" <<<"$OUT" && pass "list shows furrballs.v1.Cache" || fail "list shows furrballs.v1.Cache" "$OUT"
grep -qx "grpc.health.v1.Health" <<<"$OUT" && pass "list shows grpc.health.v1.Health" || fail "list shows grpc.health.v1.Health" "$OUT"

expect "grpcurl describe" 0 gc "$addr" describe furrballs.v1.Cache
for rpc in Get Set Delete Touch MultiGet MultiSet Pipeline Stats; do
  grep -q "rpc $rpc (" <<<"$OUT" && pass "describe shows $rpc" || fail "describe shows $rpc" "$OUT"
done
# The .proto's comments come through reflection (proto/README.md says so).
grep -qF "// Reads one key." <<<"$OUT" && pass "describe shows the rpc comments" ||
  fail "describe shows the rpc comments" "$OUT"
expect "grpcurl describe a message" 0 gc "$addr" describe furrballs.v1.GetResponse
grep -qF "// False on a miss; the other fields are then unset." <<<"$OUT" &&
  pass "describe shows the field comments" || fail "describe shows the field comments" "$OUT"

# Every listed service can be described, and health answers without a local
# .proto file.
expect "grpcurl describe the health service" 0 gc "$addr" describe grpc.health.v1.Health
grep -q "rpc Check (" <<<"$OUT" && pass "describe shows Health.Check" || fail "describe shows Health.Check" "$OUT"
expect "grpcurl Health/Check" 0 gc "$addr" grpc.health.v1.Health/Check
grep -q '"status": "SERVING"' <<<"$OUT" && pass "health is SERVING" || fail "health is SERVING" "$OUT"
expect "grpcurl Health/Check of the Cache service" 0 \
  gc -d '{"service":"furrballs.v1.Cache"}' "$addr" grpc.health.v1.Health/Check
grep -q '"status": "SERVING"' <<<"$OUT" && pass "furrballs.v1.Cache is SERVING" ||
  fail "furrballs.v1.Cache is SERVING" "$OUT"
expect "grpcurl list again" 0 gc "$addr" list
for service in $OUT; do
  expect "grpcurl describe $service" 0 gc "$addr" describe "$service"
done

# bytes fields are base64 in JSON: "smoke" = c21va2U=, "ghz test value" below.
expect "grpcurl Set" 0 gc -d '{"key":"c21va2U=","value":"aGVsbG8gZ3JwY3VybA==","ttl_ms":"600000"}' \
  "$addr" furrballs.v1.Cache/Set
grep -qE '"version": "[0-9]+"' <<<"$OUT" && pass "Set returns a version" || fail "Set returns a version" "$OUT"
expect "grpcurl Get" 0 gc -d '{"key":"c21va2U="}' "$addr" furrballs.v1.Cache/Get
grep -q '"found": true' <<<"$OUT" && pass "Get finds the key" || fail "Get finds the key" "$OUT"
grep -q '"value": "aGVsbG8gZ3JwY3VybA=="' <<<"$OUT" && pass "Get returns the value" || fail "Get returns the value" "$OUT"
expect "grpcurl Get of an empty key fails (exit 64+3)" 67 gc -d '{"key":""}' "$addr" furrballs.v1.Cache/Get
grep -q "InvalidArgument" <<<"$ERR" && pass "empty key is InvalidArgument" || fail "empty key is InvalidArgument" "$ERR"
expect "ghz run" 0 "$ghz" --insecure --call furrballs.v1.Cache/Get \
  -d '{"key":"c21va2U="}' --total 300 --concurrency 4 --timeout 10s \
  --format json "$addr"
counts=$(python3 -c '
import json, sys
r = json.load(sys.stdin)
codes = r.get("statusCodeDistribution") or {}
errors = r.get("errorDistribution") or {}
print(r.get("count", 0), codes.get("OK", 0), sum(errors.values()))
' <<<"$OUT" 2>&1)
read -r count ok errors <<<"$counts"
[ "$count" = "300" ] && pass "ghz made 300 calls" || fail "ghz made 300 calls" "$counts / $OUT"
[ "$ok" = "300" ] && pass "ghz: all 300 OK" || fail "ghz: all 300 OK" "$counts"
[ "$errors" = "0" ] && pass "ghz: zero errors" || fail "ghz: zero errors" "$counts"

finish grpcurl_ghz_test
