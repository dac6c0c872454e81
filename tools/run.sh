#!/usr/bin/env bash
# Builds Furrballs and prints the NUMA topology it would serve on (real, or
# simulated with --simulate_nodes=N). Extra arguments go to the command.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash tools/setup.sh
exec bazel run //engine/numatic:furrballs_topology -- "$@"
