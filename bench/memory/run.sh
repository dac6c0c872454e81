#!/usr/bin/env bash
# The memory fill test in one command (issue 13): Furrballs vs Redis 7 vs
# memcached 1.6 on loopback, the same budget for each; distinct 24-byte keys
# inserted until the resident count stops growing; keys resident, RSS, keys
# per MiB of RSS, idle RSS, a read-back check. Writes
# bench/results/<date>-memory[-small]/ with report.md and results.json.
#
#   bench/memory/run.sh                      64 MiB, 64 B and 1 KiB values (~1 min)
#   bench/memory/run.sh --budget_mb=128 --values=64,256,1024
#   bench/memory/run.sh --furrballs_flags="--expected_item_bytes=88"
#   bench/memory/run.sh --small              4 and 8 MiB, 1 KiB values, hit ratios
#   bench/memory/run.sh --help               every flag with its default
#
# It installs what is missing (tools/setup.sh), builds the server and the
# driver with Bazel, then runs bench/memory/run.py, which starts and stops
# every server itself. BAZEL_STARTUP_FLAGS and BAZEL_BUILD_FLAGS are passed to
# Bazel. Method: docs/memory_bench.md.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
for arg in "$@"; do
  case "$arg" in
    -h|--help)
      sed -n '2,17p' "$0"
      exec /usr/bin/python3 bench/memory/run.py --help ;;
    --bin_dir*|--command*)
      echo "run.sh: $arg is set by run.sh itself" >&2; exit 2 ;;
  esac
done

echo "[memory] installing what is missing (tools/setup.sh)" >&2
bash tools/setup.sh

# shellcheck disable=SC2086  # the flag variables are lists of words
bazel_cmd() { bazel ${BAZEL_STARTUP_FLAGS:-} "$@"; }

echo "[memory] building the server and the driver (Bazel)" >&2
bazel_cmd build ${BAZEL_BUILD_FLAGS:-} -c opt --symlink_prefix=/ \
  //service:furrballs_server //bench/memory:fill_bench \
  2> >(grep -v '^INFO\|^Loading\|^Analyzing' >&2)
bin_dir=$(bazel_cmd info -c opt bazel-bin 2>/dev/null)

exec /usr/bin/python3 bench/memory/run.py --bin_dir="$bin_dir" \
  --command="bench/memory/run.sh${*:+ $*}" "$@"
