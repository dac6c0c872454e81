#!/usr/bin/env bash
# Installs what the Python client needs, for Debian's /usr/bin/python3:
#   - at run time: python3-grpcio (1.51), python3-protobuf (3.21; its
#     Python module reports 4.21) and python3-xxhash (3.2, xxHash 0.8.1, for
#     ClusterClient's rendezvous hashing) from Debian;
#   - for code generation (generate.sh) and its freshness test: grpcio-tools
#     1.51.1 from PyPI, the release that matches that runtime (it bundles
#     protoc 3.21.6, whose generated code imports cleanly against it).
#     It goes into clients/python/.deps (git-ignored) with --no-deps, so
#     Debian's grpcio and protobuf stay the only runtime copies.
#
# Idempotent and quiet: prints nothing when everything is present. On failure
# it says what failed and exits 1.
set -uo pipefail

here=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)
python=${FURRBALLS_PYTHON:-/usr/bin/python3}
deps="$here/.deps"
grpcio_tools_version=1.51.1

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"

missing=()
for p in python3 python3-grpcio python3-protobuf python3-xxhash python3-pip; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  log=$(mktemp)
  if ! { $sudo apt-get update && DEBIAN_FRONTEND=noninteractive $sudo \
      apt-get install -y -q --no-install-recommends "${missing[@]}"; } \
      >"$log" 2>&1; then
    echo "install_deps: could not install Debian packages: ${missing[*]}" >&2
    tail -n 15 "$log" >&2
    rm -f "$log"
    exit 1
  fi
  rm -f "$log"
  echo "install_deps: installed ${missing[*]}"
fi

have=$(PYTHONPATH="$deps" "$python" -c \
  'import grpc_tools, importlib.metadata as m; print(m.version("grpcio-tools"))' \
  2>/dev/null)
if [ "$have" != "$grpcio_tools_version" ]; then
  log=$(mktemp)
  rm -rf "$deps"
  if ! "$python" -m pip install --quiet --disable-pip-version-check \
      --no-deps --target "$deps" "grpcio-tools==$grpcio_tools_version" \
      >"$log" 2>&1; then
    echo "install_deps: could not install grpcio-tools==$grpcio_tools_version" >&2
    tail -n 15 "$log" >&2
    rm -f "$log"
    exit 1
  fi
  rm -f "$log"
  echo "install_deps: installed grpcio-tools $grpcio_tools_version in $deps"
fi
