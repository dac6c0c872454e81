#!/usr/bin/env bash
# The peers benchmark in one command: Furrballs vs Redis 7 vs memcached 1.6 on
# loopback (our C++ driver, YCSB 0.17.0, redis-benchmark as the driver's
# check, ghz for the gRPC transport limit). Writes
# bench/results/<date>-<host>[-short]/ with report.md, raw data and plots.
#
#   bench/peers/run.sh            full mode, about 12 minutes on 2 cores + builds
#   bench/peers/run.sh --short    smoke run, a few minutes
#
# It installs what is missing (tools/setup.sh: Debian packages, ghz), builds
# the server, the empty gRPC server and the driver with Bazel, the YCSB
# bindings with Maven, then runs bench/peers/run.py, which starts and stops
# every server itself. BAZEL_STARTUP_FLAGS (e.g. --output_base=...) and
# BAZEL_BUILD_FLAGS are passed to Bazel. Method: docs/peers_bench.md.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
short=""
for arg in "$@"; do
  case "$arg" in
    --short) short="--short" ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown argument '$arg' (use --short or nothing)" >&2; exit 2 ;;
  esac
done

echo "[peers] installing what is missing (tools/setup.sh)" >&2
bash tools/setup.sh

# shellcheck disable=SC2086  # the flag variables are lists of words
bazel_cmd() { bazel ${BAZEL_STARTUP_FLAGS:-} "$@"; }

echo "[peers] building the servers and the driver (Bazel)" >&2
bazel_cmd build ${BAZEL_BUILD_FLAGS:-} -c opt --symlink_prefix=/ \
  //service:furrballs_server //bench/service:empty_server //bench/peers:peers_bench \
  2> >(grep -v '^INFO\|^Loading\|^Analyzing' >&2)
bin_dir=$(bazel_cmd info -c opt bazel-bin 2>/dev/null)

echo "[peers] building the YCSB bindings (Maven)" >&2
mkdir -p bench/ycsb/target
if ! (cd bench/ycsb && mvn -q -B package -DskipTests >target/build.log 2>&1); then
  tail -40 bench/ycsb/target/build.log >&2
  echo "run.sh: the YCSB bindings did not build; see bench/ycsb/target/build.log" >&2
  exit 1
fi

exec /usr/bin/python3 bench/peers/run.py $short --bin_dir="$bin_dir"
