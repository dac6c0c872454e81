#!/usr/bin/env bash
# Makes throwaway certificates for the TLS tests with the openssl tool:
#
#   make_test_certs.sh DIR NAME...
#
# For each NAME a CA (NAME-ca.crt/.key) and, signed by it, a server
# certificate for 127.0.0.1 and localhost (NAME-server.crt/.key) and a client
# certificate (NAME-client.crt/.key), and NAME-expired.crt: the server's
# key with a certificate that expired yesterday. Keys are unencrypted PKCS#8
# (what gRPC, Python and Java all read); the rest is valid for one day.
set -euo pipefail

dir=$1
shift
mkdir -p "$dir"
cd "$dir"
quiet() {
  local out
  if ! out=$("$@" 2>&1); then
    echo "make_test_certs: $* failed: $out" >&2
    exit 1
  fi
}

for name in "$@"; do
  quiet openssl req -x509 -newkey rsa:2048 -nodes -days 1 \
    -subj "/CN=$name test CA" -keyout "$name-ca.key" -out "$name-ca.crt"
  for role in server client; do
    if [ "$role" = server ]; then
      ext="subjectAltName=IP:127.0.0.1,DNS:localhost"$'\n'"extendedKeyUsage=serverAuth"
    else
      ext="extendedKeyUsage=clientAuth"
    fi
    quiet openssl req -newkey rsa:2048 -nodes -subj "/CN=$name $role" \
      -keyout "$name-$role.key" -out "$name-$role.csr"
    quiet openssl x509 -req -in "$name-$role.csr" -CA "$name-ca.crt" \
      -CAkey "$name-ca.key" -CAcreateserial -days 1 \
      -extfile <(printf '%s\n' "$ext") -out "$name-$role.crt"
  done
  quiet openssl x509 -req -in "$name-server.csr" -CA "$name-ca.crt" \
    -CAkey "$name-ca.key" -CAcreateserial -days -1 -out "$name-expired.crt"
  rm -f "$name-server.csr" "$name-client.csr" "$name-ca.srl"
done
