#!/usr/bin/env bash
# End-to-end test of the server binary's security flags and the `furrballs`
# CLI against a server with TLS, mTLS, bearer tokens and a plaintext health
# listener (docs/security.md):
#   - --help documents every security flag with its default, in both tools;
#   - a bad certificate, key, token file or reload interval exits non-zero at
#     start-up with the reason;
#   - the CLI reads and writes with a client certificate and a read-write
#     token, reads with a read-only one, and gets PERMISSION_DENIED,
#     UNAUTHENTICATED or UNAVAILABLE (exit 3) where it should;
#   - grpcurl reaches it with the CA, a client certificate and a token.
#
# usage: cli_security_test.sh SERVER_BINARY CLI_BINARY MAKE_TEST_CERTS LIB_SH
set -u
server=$1
cli=$2
make_certs=$3
# shellcheck source=../clients/lib.sh
source "$4"

certs="$WORK_DIR/certs"
if ! "$make_certs" "$certs" one two; then
  fail "certificates are made" "make_test_certs.sh failed"
  finish cli_security_test
fi
writer=writer-0123456789abcdef
reader=reader-0123456789abcdef
printf '# test tokens\nread-write %s\nread-only %s\n' "$writer" "$reader" >"$WORK_DIR/tokens"
echo "$writer" >"$WORK_DIR/writer.token"
echo "$reader" >"$WORK_DIR/reader.token"

# --help: every security flag with its default. (Abseil's --help exits 1.)
expect "server --help" 1 "$server" --help
for flag in tls_cert_file tls_key_file tls_client_ca_file auth_token_file security_reload_s health_address; do
  # The flag's entry: from its line to the next flag's.
  entry=$(awk -v f="    --$flag (" 'index($0, f) == 1 { on = 1; print; next }
    on && /^    --/ { exit } on { print }' <<<"$OUT")
  if tr "\n" " " <<<"$entry" | grep -q "; *default: "; then
    pass "server --help documents --$flag with its default"
  else
    fail "server --help documents --$flag with its default" "$OUT"
  fi
done
expect "cli --help exits 0" 0 "$cli" --help
for flag in tls tls_ca_file tls_cert_file tls_key_file tls_server_name token_file; do
  if grep -q -- "--$flag (default: " <<<"$OUT"; then
    pass "cli --help documents --$flag with its default"
  else
    fail "cli --help documents --$flag with its default" "$OUT"
  fi
done

# Bad configurations: a non-zero exit with the reason, before serving.
bad() {
  local name=$1 want_rc=$2 want_text=$3
  shift 3
  FURRBALLS_METRICS_ADDRESS="" "$server" --listen_address=127.0.0.1:0 --memory_mb=16 "$@" \
    >"$WORK_DIR/out" 2>"$WORK_DIR/err"
  local rc=$?
  if [ "$rc" -eq "$want_rc" ] && grep -qF -- "$want_text" "$WORK_DIR/err"; then
    pass "$name"
  else
    fail "$name" "exit $rc (want $want_rc), stderr: $(cat "$WORK_DIR/err"), want '$want_text'"
  fi
}
bad "missing certificate file" 1 "cannot open $certs/nope.crt" \
  --tls_cert_file="$certs/nope.crt" --tls_key_file="$certs/one-server.key"
bad "key of another certificate" 1 "not the private key of the first certificate" \
  --tls_cert_file="$certs/one-server.crt" --tls_key_file="$certs/two-server.key"
bad "expired certificate" 1 "expired on" \
  --tls_cert_file="$certs/one-expired.crt" --tls_key_file="$certs/one-server.key"
bad "key without certificate" 1 "need --tls_cert_file" --tls_key_file="$certs/one-server.key"
bad "client CA file that holds no certificate" 1 "$certs/one-ca.key: no PEM certificate" \
  --tls_cert_file="$certs/one-server.crt" --tls_key_file="$certs/one-server.key" \
  --tls_client_ca_file="$certs/one-ca.key"
printf 'read-write %s\nowner %s\n' "$writer" "$reader" >"$WORK_DIR/bad-tokens"
bad "token file with an unknown role" 1 "bad-tokens line 2: unknown role \"owner\"" \
  --auth_token_file="$WORK_DIR/bad-tokens"
bad "missing token file" 1 "cannot open $WORK_DIR/none" --auth_token_file="$WORK_DIR/none"
bad "zero reload interval" 2 "--security_reload_s must be at least 1" --security_reload_s=0
bad "bad health address" 1 "could not listen on --health_address" --health_address=nohost

if ! start_server "$server" --tls_cert_file="$certs/one-server.crt" \
    --tls_key_file="$certs/one-server.key" --tls_client_ca_file="$certs/one-ca.crt" \
    --auth_token_file="$WORK_DIR/tokens" --health_address=127.0.0.1:0; then
  fail "server starts with TLS, mTLS and tokens" "see the log above"
  finish cli_security_test
fi
grep -q "mTLS: clients need a certificate from 1 CA(s)" "$SERVER_LOG" &&
  pass "start-up line names mTLS" || fail "start-up line names mTLS" "$(cat "$SERVER_LOG")"
grep -q "auth: 1 read-write, 1 read-only token(s)" "$SERVER_LOG" &&
  pass "start-up line counts the tokens" || fail "start-up line counts the tokens" "$(cat "$SERVER_LOG")"

tls=(--tls_ca_file="$certs/one-ca.crt" --tls_cert_file="$certs/one-client.crt"
  --tls_key_file="$certs/one-client.key")
fb() { "$cli" --target="127.0.0.1:$SERVER_PORT" --timeout_ms=10000 "$@"; }

expect "set with a read-write token" 0 fb "${tls[@]}" --token_file="$WORK_DIR/writer.token" set k hello
expect "get with a read-only token" 0 fb "${tls[@]}" --token_file="$WORK_DIR/reader.token" get k
[ "$OUT" = hello ] && pass "read-only get value" || fail "read-only get value" "$OUT"
expect "set with a read-only token exits 3" 3 fb "${tls[@]}" --token_file="$WORK_DIR/reader.token" set k x
grep -q PERMISSION_DENIED <<<"$ERR" && pass "PERMISSION_DENIED is printed" || fail "PERMISSION_DENIED is printed" "$ERR"
expect "get without a token exits 3" 3 fb "${tls[@]}" get k
grep -q UNAUTHENTICATED <<<"$ERR" && pass "UNAUTHENTICATED is printed" || fail "UNAUTHENTICATED is printed" "$ERR"
expect "get without a client certificate exits 3" 3 fb --tls_ca_file="$certs/one-ca.crt" \
  --token_file="$WORK_DIR/writer.token" get k
grep -q UNAVAILABLE <<<"$ERR" && pass "UNAVAILABLE without a client certificate" ||
  fail "UNAVAILABLE without a client certificate" "$ERR"
expect "plaintext get exits 3" 3 fb --token_file="$WORK_DIR/writer.token" get k
expect "get with --tls_server_name=localhost" 0 fb "${tls[@]}" --tls_server_name=localhost \
  --token_file="$WORK_DIR/writer.token" get k
expect "get with a server name the certificate lacks exits 3" 3 fb "${tls[@]}" \
  --tls_server_name=cache.example --token_file="$WORK_DIR/writer.token" get k
expect "missing --token_file is a usage error" 2 fb "${tls[@]}" --token_file="$WORK_DIR/none" get k
expect "client certificate without its key is a usage error" 2 fb --tls_ca_file="$certs/one-ca.crt" \
  --tls_cert_file="$certs/one-client.crt" get k

grpcurl=$(find_go_tool grpcurl)
if [ -n "$grpcurl" ]; then
  expect "grpcurl with the CA, a client certificate and a token" 0 "$grpcurl" \
    -cacert "$certs/one-ca.crt" -cert "$certs/one-client.crt" -key "$certs/one-client.key" \
    -H "authorization: Bearer $reader" -d '{"key":"aw=="}' "127.0.0.1:$SERVER_PORT" furrballs.v1.Cache/Get
  grep -q '"value": "aGVsbG8="' <<<"$OUT" && pass "grpcurl reads the value" || fail "grpcurl reads the value" "$OUT"
else
  fail "grpcurl is installed" "tools/install_go_tools.sh installs it"
fi

finish cli_security_test
