#!/usr/bin/env bash
# tests/clients/lib.sh: shared pieces of the client end-to-end shell tests:
# start and stop a real furrballs_server on a free loopback port, find the Go
# tools, record test cases and write them as JUnit XML (so the project's test
# runner counts each case), and finish with "N passed, N failed".
#
# Source it; it sets no shell options of its own beyond what it documents.

CASES_PASSED=0
CASES_FAILED=0
CASES_XML=""
SERVER_PID=""
SERVER_PORT=""
SERVER_LOG=""
WORK_DIR=$(mktemp -d "${TEST_TMPDIR:-/tmp}/clients_e2e.XXXXXX")

xml_escape() {
  sed -e 's/&/\&amp;/g' -e 's/</\&lt;/g' -e 's/>/\&gt;/g' -e 's/"/\&quot;/g'
}

# pass NAME / fail NAME WHY: record one case.
pass() {
  CASES_PASSED=$((CASES_PASSED + 1))
  echo "PASS: $1"
  CASES_XML+="<testcase name=\"$(printf '%s' "$1" | xml_escape)\"/>"
}
fail() {
  CASES_FAILED=$((CASES_FAILED + 1))
  echo "FAIL: $1: $2" >&2
  CASES_XML+="<testcase name=\"$(printf '%s' "$1" | xml_escape)\"><failure message=\"$(printf '%s' "$2" | head -c 2000 | xml_escape)\"/></testcase>"
}

# expect NAME WANT_RC CMD...: runs CMD (stdout in $OUT, stderr in $ERR) and
# records whether it exited with WANT_RC.
OUT=""
ERR=""
expect() {
  local name=$1 want=$2
  shift 2
  "$@" >"$WORK_DIR/out" 2>"$WORK_DIR/err"
  local rc=$?
  OUT=$(cat "$WORK_DIR/out")
  ERR=$(cat "$WORK_DIR/err")
  if [ "$rc" -eq "$want" ]; then
    pass "$name"
    return 0
  fi
  fail "$name" "exit $rc, want $want; stdout: $OUT; stderr: $ERR"
  return 1
}

# start_server BINARY [FLAGS...]: starts the server on 127.0.0.1:0 with 4
# simulated nodes and no metrics listener, and sets SERVER_PORT from the line
# it prints when serving.
# Waits at most 60 s.
start_server() {
  local bin=$1
  shift
  SERVER_LOG="$WORK_DIR/server.log"
  # Metrics off: its fixed default port would collide between servers that
  # tests run side by side. Set through the server's FURRBALLS_<FLAG>
  # environment rather than a flag, which a server without metrics would
  # reject.
  FURRBALLS_METRICS_ADDRESS="" "$bin" --listen_address=127.0.0.1:0 --simulate_nodes=4 --memory_mb=64 \
    --shutdown_deadline_ms=2000 "$@" >"$SERVER_LOG" 2>&1 &
  SERVER_PID=$!
  local i
  for i in $(seq 600); do
    SERVER_PORT=$(sed -n 's/.*serving furrballs\.v1\.Cache on 127\.0\.0\.1:\([0-9]*\).*/\1/p' \
      "$SERVER_LOG" | head -n 1)
    [ -n "$SERVER_PORT" ] && return 0
    if ! kill -0 "$SERVER_PID" 2>/dev/null; then
      echo "server exited before serving:" >&2
      cat "$SERVER_LOG" >&2
      return 1
    fi
    sleep 0.1  # bounded wait for start-up (600 x 0.1 s)
  done
  echo "server did not report its port within 60 s:" >&2
  cat "$SERVER_LOG" >&2
  return 1
}

stop_server() {
  [ -n "$SERVER_PID" ] || return 0
  kill -TERM "$SERVER_PID" 2>/dev/null
  local i
  for i in $(seq 150); do
    kill -0 "$SERVER_PID" 2>/dev/null || break
    sleep 0.1  # bounded wait for the graceful stop (15 s)
  done
  kill -KILL "$SERVER_PID" 2>/dev/null
  wait "$SERVER_PID" 2>/dev/null
  SERVER_PID=""
}

# find_go_tool NAME: prints the path of grpcurl/ghz as installed by
# tools/install_go_tools.sh ($FURRBALLS_GO_BIN, else <home>/go/bin), or on
# PATH. Empty if not found.
find_go_tool() {
  local name=$1 home dir
  home=$(getent passwd "$(id -u)" 2>/dev/null | cut -d: -f6)
  for dir in "${FURRBALLS_GO_BIN:-}" "${home:-/nonexistent}/go/bin" "${HOME:-/nonexistent}/go/bin"; do
    if [ -n "$dir" ] && [ -x "$dir/$name" ]; then
      echo "$dir/$name"
      return 0
    fi
  done
  command -v "$name" 2>/dev/null || true
}

# finish SUITE: stops the server, writes the JUnit XML Bazel asked for, prints
# the closing count line, and exits 1 if any case failed (or none ran).
finish() {
  local suite=$1
  stop_server
  local total=$((CASES_PASSED + CASES_FAILED))
  if [ -n "${XML_OUTPUT_FILE:-}" ]; then
    printf '<?xml version="1.0" encoding="UTF-8"?>\n<testsuites><testsuite name="%s" tests="%d" failures="%d">%s</testsuite></testsuites>\n' \
      "$suite" "$total" "$CASES_FAILED" "$CASES_XML" >"$XML_OUTPUT_FILE"
  fi
  rm -rf "$WORK_DIR"
  echo "$CASES_PASSED passed, $CASES_FAILED failed"
  [ "$CASES_FAILED" -eq 0 ] && [ "$total" -gt 0 ]
  exit $?
}
