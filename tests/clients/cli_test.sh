#!/usr/bin/env bash
# End-to-end test of the `furrballs` CLI against a real server: every
# subcommand, the flags that change a write, and the exit codes
# (0 ok, 1 not found, 2 usage error, 3 RPC error).
#
# usage: cli_test.sh SERVER_BINARY CLI_BINARY
set -u
here=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
# shellcheck source=lib.sh
source "$here/lib.sh"
server=$1
cli=$2

if ! start_server "$server"; then
  fail "server starts" "see the log above"
  finish cli_test
fi
fb() { "$cli" --target="127.0.0.1:$SERVER_PORT" --timeout_ms=10000 "$@"; }

expect "help exits 0" 0 "$cli" --help
for flag in target timeout_ms ttl_ms if_absent if_version ops concurrency keys value_size get_ratio; do
  if grep -q -- "--$flag (default: " <<<"$OUT"; then
    pass "help documents --$flag with its default"
  else
    fail "help documents --$flag with its default" "$OUT"
  fi
done

expect "set from an argument" 0 fb set greeting hello
v1=$(sed -n 's/^version \([0-9]*\)$/\1/p' <<<"$OUT")
[ -n "$v1" ] && pass "set prints the version" || fail "set prints the version" "$OUT"
expect "get prints the value" 0 fb get greeting
[ "$OUT" = "hello" ] && pass "get value matches" || fail "get value matches" "got '$OUT'"
expect "get --meta prints the version" 0 fb get greeting --meta
grep -q "version=$v1 " <<<"$ERR" && pass "meta version matches" || fail "meta version matches" "$ERR"

printf 'line one\nline two\n' >"$WORK_DIR/value"
expect "set from stdin" 0 fb set multi <"$WORK_DIR/value"
expect "get --raw returns the exact bytes" 0 fb get multi --raw
if cmp -s "$WORK_DIR/out" "$WORK_DIR/value"; then pass "stdin value round-trips"; else fail "stdin value round-trips" "$OUT"; fi

expect "get of a missing key exits 1" 1 fb get no-such-key
expect "set --if_absent on a live key exits 3" 3 fb set greeting other --if_absent
grep -q "ALREADY_EXISTS" <<<"$ERR" && pass "ALREADY_EXISTS is printed" || fail "ALREADY_EXISTS is printed" "$ERR"
expect "set --if_absent on a new key" 0 fb set fresh v --if_absent
expect "set --if_version with the current version" 0 fb set greeting hi --if_version="$v1"
expect "set --if_version with a stale version exits 3" 3 fb set greeting x --if_version="$v1"
grep -q "ABORTED" <<<"$ERR" && pass "ABORTED is printed" || fail "ABORTED is printed" "$ERR"

expect "set with --ttl_ms" 0 fb set short v --ttl_ms=600000
expect "get shows the ttl" 0 fb get short --meta
ttl=$(sed -n 's/.*ttl_remaining_ms=\([0-9]*\).*/\1/p' <<<"$ERR")
if [ -n "$ttl" ] && [ "$ttl" -gt 0 ] && [ "$ttl" -le 600000 ]; then pass "ttl in (0, 600000]"; else fail "ttl in (0, 600000]" "$ERR"; fi
expect "touch a live key" 0 fb touch short --ttl_ms=0
expect "touch removed the ttl" 0 fb get short --meta
grep -q "ttl_remaining_ms=0" <<<"$ERR" && pass "ttl is 0 after touch" || fail "ttl is 0 after touch" "$ERR"
expect "touch a missing key exits 3" 3 fb touch no-such-key
grep -q "NOT_FOUND" <<<"$ERR" && pass "NOT_FOUND is printed" || fail "NOT_FOUND is printed" "$ERR"

expect "delete a live key" 0 fb delete greeting
[ "$OUT" = "deleted" ] && pass "delete says deleted" || fail "delete says deleted" "$OUT"
expect "delete again" 0 fb delete greeting
[ "$OUT" = "not found" ] && pass "delete says not found" || fail "delete says not found" "$OUT"
expect "get after delete exits 1" 1 fb get greeting

expect "empty key is an RPC error" 3 fb get ""
grep -q "INVALID_ARGUMENT" <<<"$ERR" && pass "INVALID_ARGUMENT is printed" || fail "INVALID_ARGUMENT is printed" "$ERR"

expect "stats" 0 fb stats
rows=$(grep -cE '^ +[0-3] ' <<<"$OUT")
[ "$rows" -eq 4 ] && pass "stats has a row per node" || fail "stats has a row per node" "$OUT"
grep -qE '^ +all ' <<<"$OUT" && pass "stats has a total row" || fail "stats has a total row" "$OUT"

expect "load" 0 fb load --ops=2000 --concurrency=4 --keys=100 --value_size=64 --get_ratio=0.5
grep -qE '^ops +2000 in .* ops/s' <<<"$OUT" && pass "load summary counts every op" || fail "load summary counts every op" "$OUT"
grep -qE '^latency +p50 [0-9.]+ us, p99 [0-9.]+ us' <<<"$OUT" && pass "load summary has p50/p99" || fail "load summary has p50/p99" "$OUT"
grep -qE '^errors +0$' <<<"$OUT" && pass "load had no errors" || fail "load had no errors" "$OUT"

expect "no command is a usage error" 2 "$cli"
expect "unknown command is a usage error" 2 "$cli" frobnicate
expect "unknown flag is a usage error" 2 "$cli" --frobnicate get k
expect "bad flag value is a usage error" 2 "$cli" --timeout_ms=soon get k
expect "missing argument is a usage error" 2 "$cli" get
expect "conflicting flags are a usage error" 2 "$cli" set k v --if_absent --if_version=1
expect "unreachable server is an RPC error" 3 "$cli" --target=127.0.0.1:1 get k
grep -q "UNAVAILABLE" <<<"$ERR" && pass "UNAVAILABLE is printed" || fail "UNAVAILABLE is printed" "$ERR"

finish cli_test
