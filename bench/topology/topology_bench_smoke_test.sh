#!/usr/bin/env bash
# Smoke test of the topology ablation: a tiny run of every row on 2 and 4
# simulated nodes must finish with its counts adding up (the binary exits 1
# otherwise) and print every table and the report's bar. Timings are not
# checked: they are the benchmark's output, not a test's.
#   $1 topology_bench
set -euo pipefail
out=$(mktemp)
"$1" --runs=1 --nodes=2,4 --delays=0,70 --keys_per_thread=300 --warmup_ops_per_thread=3000 \
  --ops_per_thread=3000 >"$out"
cat "$out"
for want in "## 2 nodes, remote delay 0 ns, placement" \
            "## 4 nodes, remote delay 70 ns, uniform" \
            "| hash |" "| round-robin |" "| thread-local |" \
            "| thread-local + migration |" "| thread-local + broadcast-race |" \
            "| thread-local + broadcast-race + location cache |" \
            "| CPU ns/op |" "- run 1: " \
            "## The report's bar: round-robin Get p50 / thread-local Get p50"; do
  grep -qF -- "$want" "$out" || { echo "FAIL: report lacks: $want"; exit 1; }
done
# One bar line per cell: 2 node counts x 2 delays x 2 workloads.
bar_rows=$(grep -cE '^\| [24] \| (0|70) \| (placement|uniform) \|' "$out")
[[ $bar_rows -eq 8 ]] || { echo "FAIL: $bar_rows bar rows, want 8"; exit 1; }
echo PASS
