#!/usr/bin/env bash
# Runs every Furrballs test: installs what is missing, builds, runs the test
# suite in the optimized build and the engine's tests again under
# ThreadSanitizer, AddressSanitizer and UndefinedBehaviorSanitizer, runs each
# fuzz target briefly on its corpus, then prints one closing line
# "N passed, N failed" counting test cases.
#
#   tools/test.sh            everything (what CI runs)
#   tools/test.sh --quick    the optimized build only, no sanitizers, no
#                            fuzzing
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
bash tools/setup.sh || { echo "0 passed, 1 failed"; exit 1; }

quick=0
[ "${1:-}" = "--quick" ] && quick=1

# Each phase: a name, the bazel flags, the targets.
phases=("default||//...")
if [ $quick -eq 0 ]; then
  phases+=(
    "tsan|--config=tsan --test_tag_filters=-numa_guest,-no_tsan|//engine/... //service:dispatcher_test"
    "asan|--config=asan --test_tag_filters=-numa_guest,-no_asan|//engine/... //service:dispatcher_test"
    "ubsan|--config=ubsan --test_tag_filters=-numa_guest|//engine/... //service:dispatcher_test"
  )
fi

total_pass=0
total_fail=0
out=$(mktemp -d)
for phase in "${phases[@]}"; do
  IFS='|' read -r name flags targets <<<"$phase"
  echo "== $name: bazel test $flags $targets"
  start=$SECONDS
  # shellcheck disable=SC2086
  bazel test $flags --test_summary=short --keep_going $targets \
    >"$out/$name.log" 2>&1
  rc=$?
  grep -E '^//|^(ERROR|FAIL):' "$out/$name.log" | grep -v 'PASSED' | head -40
  # For each failed test, the lines that say why (a CI log is all a reader
  # of a failed run gets).
  grep -oE '^FAIL: //[^ ]+ \(see [^)]+\)' "$out/$name.log" | head -5 |
    while read -r _ target _ log; do
      log=${log%)}
      [ -f "$log" ] || continue
      echo "   --- $target:"
      grep -E -A4 'Failure|FAILED|ERROR|Sanitizer|runtime error|FAIL ' "$log" |
        head -30 | sed 's/^/   | /'
    done
  # shellcheck disable=SC2086
  testlogs=$(bazel info $flags bazel-testlogs 2>/dev/null)
  read -r p f < <(python3 tools/count_tests.py "$out/$name.log" "$testlogs")
  if ! grep -qE '^//' "$out/$name.log"; then
    echo "   no test ran; last lines of the log:"
    tail -20 "$out/$name.log"
    f=$((f + 1))
  fi
  # Exit 3 means "built, some tests failed" (already counted per case); any
  # other failure means something did not build or Bazel itself failed, which
  # per-target lines may not show, so it counts as a failure of its own.
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 3 ]; then
    echo "   bazel exited with $rc (build or analysis error):"
    grep -E '^ERROR' "$out/$name.log" | head -10
    f=$((f + 1))
  fi
  echo "   $name: $p passed, $f failed ($((SECONDS - start)) s)"
  total_pass=$((total_pass + p))
  total_fail=$((total_fail + f))
done

# The libFuzzer targets (docs/fuzzing.md), built with clang and run for a
# few seconds each on their checked-in corpus only: one case per target.
# (Their corpora also replay as NAME_corpus_test in every phase above.)
if [ $quick -eq 0 ]; then
  echo "== fuzz: tools/fuzz.sh --ci"
  start=$SECONDS
  bash tools/fuzz.sh --ci >"$out/fuzz.log" 2>&1
  grep -E '^== [a-z_]+:|^   ' "$out/fuzz.log" | grep -vE '^   ok:' | head -40
  counts=$(tail -1 "$out/fuzz.log" | grep -E '^[0-9]+ passed, [0-9]+ failed$')
  if [ -n "$counts" ]; then
    p=${counts%% passed*}
    f=${counts#*passed, }
    f=${f%% failed}
  else
    echo "   tools/fuzz.sh ended without its counts; last lines:"
    tail -20 "$out/fuzz.log"
    p=0 f=1
  fi
  echo "   fuzz: $p passed, $f failed ($((SECONDS - start)) s)"
  total_pass=$((total_pass + p))
  total_fail=$((total_fail + f))
fi

# The deployment test (tests/deploy, Go): builds the kustomizations in
# deploy/ and decodes them strictly, and starts the server built above with
# each pod's flag file. Its cases count like Bazel's.
echo "== deploy: go test ./... in tests/deploy"
start=$SECONDS
server="$(bazel info bazel-bin 2>/dev/null)/service/furrballs_server"
if [ ! -x "$server" ]; then
  bazel build //service:furrballs_server >"$out/deploy_build.log" 2>&1 ||
    tail -20 "$out/deploy_build.log"
fi
(cd tests/deploy && FURRBALLS_SERVER="$server" GOTOOLCHAIN=local GOFLAGS=-mod=readonly \
  go test -json -count=1 ./... >"$out/deploy.json" 2>"$out/deploy.err")
rc=$?
p=0 f=0
read -r p f < <(python3 tests/deploy/go_test_counts.py "$out/deploy.json")
if [ "$rc" -ne 0 ] && [ "${f:-0}" -eq 0 ]; then
  echo "   go test exited with $rc:"
  tail -20 "$out/deploy.err"
  f=1
fi
echo "   deploy: $p passed, $f failed ($((SECONDS - start)) s)"
total_pass=$((total_pass + p))
total_fail=$((total_fail + f))
rm -rf "$out"

echo "${total_pass} passed, ${total_fail} failed"
[ "$total_fail" -eq 0 ]
