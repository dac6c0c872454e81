#!/usr/bin/env bash
# Builds and starts a Furrballs server on embedded defaults: gRPC on
# 127.0.0.1:50051, Prometheus metrics on 127.0.0.1:9464, a 256 MiB value
# budget, and, on a machine with a single NUMA node, a simulated 2-node
# topology so that the per-node machinery is exercised. Extra arguments are
# server flags (`tools/run.sh --help` lists them all); Ctrl-C stops it
# gracefully.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash tools/setup.sh
bazel build -c opt //service:furrballs_server //clients/cli:furrballs
bin=$(bazel info -c opt bazel-bin 2>/dev/null)

extra=()
nodes=$(ls -d /sys/devices/system/node/node[0-9]* 2>/dev/null | wc -l)
if [ "$nodes" -le 1 ] && [[ " $* " != *" --simulate_nodes"* ]] &&
   [[ " $* " != *" --help"* ]]; then
  extra+=(--simulate_nodes=2)
  echo "run: this machine has one NUMA node; simulating 2 (--simulate_nodes=N to change)"
fi
echo "run: talk to it from another terminal with the CLI:"
echo "       $bin/clients/cli/furrballs set greeting hello"
echo "       $bin/clients/cli/furrballs get greeting"
echo "       $bin/clients/cli/furrballs stats"
exec "$bin/service/furrballs_server" "${extra[@]}" "$@"
