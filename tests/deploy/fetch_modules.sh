#!/usr/bin/env bash
# Fetches the Go modules the deployment test needs (k8s.io/api, kustomize,
# the Prometheus Operator's and cert-manager's types; versions pinned in
# go.mod/go.sum) from
# the Go module proxy into the module cache. tools/setup.sh calls it.
#
# Idempotent and quiet: with the modules already cached it prints nothing.
# On failure it shows the end of go's output and exits 1.
set -uo pipefail

dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if ! command -v go >/dev/null 2>&1; then
  echo "tests/deploy/fetch_modules.sh: 'go' is not on PATH" >&2
  exit 1
fi
log=$(mktemp)
if ! (cd "$dir" && GOTOOLCHAIN=local GOFLAGS=-mod=readonly go mod download) >"$log" 2>&1; then
  echo "tests/deploy/fetch_modules.sh: go mod download failed:" >&2
  tail -n 15 "$log" >&2
  rm -f "$log"
  exit 1
fi
rm -f "$log"
