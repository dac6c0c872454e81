#!/usr/bin/env bash
# Installs the gRPC command-line tools the client smoke tests drive
# (tests/clients/grpcurl_ghz_test.sh): grpcurl and ghz, at pinned versions,
# built from the Go module proxy with the local Go toolchain.
#
# Idempotent and quiet: a tool already installed at its pinned version is left
# alone and nothing is printed. Binaries go to $FURRBALLS_GO_BIN, default
# <home of the current user>/go/bin (Go's own default GOBIN), which is where
# the tests look. On failure it names each tool that failed, shows the end of
# the build log, and exits 1.
set -uo pipefail

home=$(getent passwd "$(id -u)" 2>/dev/null | cut -d: -f6)
home=${home:-${HOME:-/root}}
bin_dir=${FURRBALLS_GO_BIN:-$home/go/bin}

# name|package|version. ghz's @latest on the proxy resolves to an old v0.93.0,
# so the version is pinned explicitly; both build with Go 1.26 and
# GOTOOLCHAIN=local.
tools=(
  "grpcurl|github.com/fullstorydev/grpcurl/cmd/grpcurl|v1.9.4"
  "ghz|github.com/bojand/ghz/cmd/ghz|v0.120.0"
)

if ! command -v go >/dev/null 2>&1; then
  echo "install_go_tools: 'go' is not on PATH; cannot install grpcurl, ghz" >&2
  exit 1
fi

# The module version a Go binary was built from ("" if unknown).
installed_version() {
  go version -m "$1" 2>/dev/null | awk '$1 == "mod" { print $3; exit }'
}

mkdir -p "$bin_dir"
failed=()
for t in "${tools[@]}"; do
  IFS='|' read -r name pkg version <<<"$t"
  if [ -x "$bin_dir/$name" ] &&
     [ "$(installed_version "$bin_dir/$name")" = "$version" ]; then
    continue
  fi
  log=$(mktemp)
  if GOBIN="$bin_dir" GOTOOLCHAIN=local GOFLAGS=-buildvcs=false \
      go install "$pkg@$version" >"$log" 2>&1; then
    echo "install_go_tools: installed $name $version in $bin_dir"
  else
    echo "install_go_tools: FAILED to install $name ($pkg@$version):" >&2
    tail -n 15 "$log" >&2
    failed+=("$name")
  fi
  rm -f "$log"
done

if [ ${#failed[@]} -gt 0 ]; then
  echo "install_go_tools: failed: ${failed[*]}" >&2
  exit 1
fi
