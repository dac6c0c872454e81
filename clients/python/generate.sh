#!/usr/bin/env bash
# Generates the Python protobuf and gRPC stubs of furrballs.v1 into
# furrballs_client/v1/ with grpcio-tools (installed by install_deps.sh).
#
#   clients/python/generate.sh          regenerate the committed stubs
#   clients/python/generate.sh --check  regenerate into a temporary directory
#                                       and fail (exit 1, with a diff) if the
#                                       committed stubs differ
#
# The stubs are committed so that the client needs only grpcio and protobuf
# at run time. The output is deterministic for a given grpcio-tools version
# (pinned in install_deps.sh); --check, run by the test
# //clients/python:generated_stubs_test, keeps the committed copy honest.
#
# protoc names the modules after the .proto's path (furrballs/v1/...), so the
# gRPC module's absolute import of its message module is rewritten to a
# relative one: the stubs then live inside the furrballs_client package
# without a top-level "furrballs" package on sys.path.
set -euo pipefail

here=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)
root=$(cd "$here/../.." && pwd)
python=${FURRBALLS_PYTHON:-/usr/bin/python3}
dest="$here/furrballs_client/v1"

check=0
case "${1:-}" in
  --check) check=1 ;;
  "") ;;
  *) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac

if ! PYTHONPATH="$here/.deps" "$python" -c 'import grpc_tools.protoc' 2>/dev/null; then
  echo "generate.sh: grpcio-tools is not installed; run clients/python/install_deps.sh" >&2
  exit 1
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
PYTHONPATH="$here/.deps" "$python" -m grpc_tools.protoc \
  --proto_path="$root/proto" \
  --python_out="$work" --pyi_out="$work" --grpc_python_out="$work" \
  furrballs/v1/furrballs.proto

out="$work/out"
mkdir -p "$out"
cp "$work/furrballs/v1/furrballs_pb2.py" "$work/furrballs/v1/furrballs_pb2.pyi" "$out/"
sed 's/^from furrballs\.v1 import furrballs_pb2 as /from . import furrballs_pb2 as /' \
  "$work/furrballs/v1/furrballs_pb2_grpc.py" >"$out/furrballs_pb2_grpc.py"
if ! grep -q '^from \. import furrballs_pb2 as ' "$out/furrballs_pb2_grpc.py"; then
  echo "generate.sh: the gRPC module's import line changed; update the rewrite" >&2
  exit 1
fi

files=(furrballs_pb2.py furrballs_pb2.pyi furrballs_pb2_grpc.py)
if [ $check -eq 1 ]; then
  stale=0
  for f in "${files[@]}"; do
    if ! diff -u "$dest/$f" "$out/$f"; then
      stale=1
    fi
  done
  if [ $stale -ne 0 ]; then
    echo "generate.sh: the committed stubs are out of date; run clients/python/generate.sh" >&2
    exit 1
  fi
  echo "generate.sh: committed stubs are up to date"
  exit 0
fi

mkdir -p "$dest"
for f in "${files[@]}"; do cp "$out/$f" "$dest/$f"; done
echo "generate.sh: wrote ${files[*]} to $dest"
