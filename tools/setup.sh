#!/usr/bin/env bash
# Installs every Debian package Furrballs needs to build, test and benchmark.
#
# Idempotent and quiet: when everything is present it only checks and exits.
# Otherwise it runs `apt-get update` once and installs what is missing, with
# the full output in .setup.log at the repository root. On failure it names
# the packages it could not install and points at the log.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
log="$root/.setup.log"

packages=(
  # Build: Bazel from Debian, with the offline rule repositories it needs.
  bazel-bootstrap bazel-bootstrap-source g++ python3
  # llvm-bolt-15: lays the server's functions out after the link
  # (tools/bolt/bolt.bzl).
  bolt-15
  # Libraries. Their -dev packages hold the static archives that the
  # binaries link (third_party/BUILD); those of snappy, lz4, zstd, bzip2,
  # zlib, re2, c-ares and gRPC's C core come as their dependencies.
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libnuma-dev numactl libxxhash-dev librocksdb-dev libabsl-dev
  prometheus-cpp-dev
  # TLS: libcrypto for the server's certificate checks and token digests,
  # the openssl tool for the tests' certificates.
  libssl-dev openssl
  # Tests and micro-benchmarks.
  libgtest-dev libgmock-dev libbenchmark-dev libtbb-dev
  # Fuzzing (tools/fuzz.sh, docs/fuzzing.md): clang 14, its libFuzzer and
  # the sanitizer runtimes (-fsanitize=fuzzer,address links against them;
  # only a Recommends of clang, which --no-install-recommends skips).
  clang libfuzzer-14-dev libclang-rt-14-dev
  # A real Prometheus and promtool for the metrics tests (tests/metrics).
  prometheus
  # The Python client (python3-xxhash: the cluster client's rendezvous
  # hashing) and its tests (clients/python/install_deps.sh adds
  # grpcio-tools from PyPI for stub generation).
  python3-grpcio python3-xxhash python3-protobuf python3-pip
  # A real multi-node NUMA kernel under QEMU (tests/numa_guest).
  qemu-system-x86 linux-image-amd64 busybox-static cpio
  # The peers benchmark (bench/peers, bench/ycsb): the servers compared
  # against, their C client libraries, redis-benchmark, Maven and a JDK for
  # the YCSB bindings, and matplotlib for the report's plots.
  redis-server redis-tools memcached libhiredis-dev libmemcached-dev
  maven default-jdk-headless python3-matplotlib
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$p")
done

# Tools from other registries, each script idempotent and quiet: grpcurl and
# ghz from the Go module proxy, grpcio-tools from PyPI, the Go modules of the
# deployment test (tests/deploy).
install_others() {
  bash "$root/tools/install_go_tools.sh" || exit 1
  bash "$root/clients/python/install_deps.sh" || exit 1
  bash "$root/tests/deploy/fetch_modules.sh" || exit 1
}

if [ ${#missing[@]} -eq 0 ]; then
  install_others
  exit 0
fi

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"

echo "setup: installing ${#missing[@]} Debian package(s): ${missing[*]} (log: $log)"
if ! $sudo apt-get update >"$log" 2>&1; then
  echo "setup: 'apt-get update' failed; see $log" >&2
  exit 1
fi
if ! DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q \
    --no-install-recommends "${missing[@]}" >>"$log" 2>&1; then
  still=()
  for p in "${missing[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
      still+=("$p")
  done
  echo "setup: could not install: ${still[*]}; see $log" >&2
  exit 1
fi
install_others
echo "setup: done"
