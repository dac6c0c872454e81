#!/usr/bin/env bash
# Checks the shipped Prometheus files with Prometheus's own tool: the scrape
# configuration (and the rule file it loads) is valid, the rules are valid,
# and the alert rules' unit tests pass. Any warning fails the test too.
set -uo pipefail

dir=deploy/prometheus
failed=0

run() {
  local out
  out=$("$@" 2>&1)
  local rc=$?
  echo "$ $*"
  echo "$out"
  if [ $rc -ne 0 ]; then
    echo "FAIL: exit status $rc"
    failed=1
  elif grep -qi 'warning' <<<"$out"; then
    echo "FAIL: warnings"
    failed=1
  fi
}

command -v promtool >/dev/null || { echo "promtool not installed (Debian package prometheus; tools/setup.sh)"; exit 1; }
run promtool check config "$dir/prometheus.yml"
run promtool check rules "$dir/alerts.yml"
run promtool test rules "$dir/alerts_test.yml"
exit $failed
