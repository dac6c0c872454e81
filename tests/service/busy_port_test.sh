#!/usr/bin/env bash
# A second furrballs_server on a port that another one already serves must not
# start: it exits non-zero and says why, and the first one keeps serving.
# (gRPC sets SO_REUSEPORT by default, which let the second one start and take
# a share of the new connections.)
#
# usage: busy_port_test.sh LIB_SH SERVER_BINARY CLI_BINARY
set -u
# shellcheck source=../clients/lib.sh
source "$1"
server=$2
cli=$3

if ! start_server "$server"; then
  fail "first server starts" "see the log above"
  finish busy_port_test
fi
addr="127.0.0.1:$SERVER_PORT"

# The timeout only bounds a second server that wrongly serves.
expect "a second server on the busy port exits 1" 1 \
  timeout 20 env FURRBALLS_METRICS_ADDRESS= "$server" --listen_address="$addr" \
  --simulate_nodes=1 --memory_mb=16
if grep -q "cannot start: could not listen on $addr" <<<"$ERR"; then
  pass "it names the address it could not listen on"
else
  fail "it names the address it could not listen on" "stderr: $ERR"
fi
expect "the first server still serves" 0 "$cli" --target="$addr" --timeout_ms=10000 stats

finish busy_port_test
