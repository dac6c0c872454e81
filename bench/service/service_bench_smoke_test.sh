#!/usr/bin/env bash
# Smoke test of the service benchmark: a tiny run against every server
# configuration must finish, answer every operation without error, and print
# the report's tables. Timings are not checked (ratios are the benchmark's
# output, not a test's).
#   $1 service_bench  $2 furrballs_server  $3 empty_server
set -euo pipefail
bench=$1 server=$2 empty=$3
out=$(mktemp)
"$bench" --server_binary="$server" --empty_binary="$empty" --quick \
  --warmup_ms=20 --duration_ms=60 --threads=1 --keys=100 >"$out"
cat "$out"
for want in "| get | empty handler |" "| multiget | Furrballs direct |" \
            "| pipeline | Furrballs NodeJob, batch 1 |" \
            "| throughput | Furrballs/empty | direct/empty | NodeJob/direct | batch 16/1 | batch 64/1 |"; do
  grep -qF -- "$want" "$out" || { echo "FAIL: report lacks: $want"; exit 1; }
done
# The errors column (the last) is 0 in every row of the results table.
if awk -F'|' '$3 ~ /empty handler|Furrballs/ && $(NF-1) + 0 != 0' "$out" | grep -q .; then
  echo "FAIL: operations failed"
  exit 1
fi
echo PASS
