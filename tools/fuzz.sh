#!/usr/bin/env bash
# Builds the libFuzzer targets (cc_fuzz_target, tools/fuzz/fuzz.bzl) with
# clang, ASAN and UBSAN (--config=fuzz) and runs each for a given time, one
# after another. See docs/fuzzing.md.
#
#   tools/fuzz.sh [--time=SECONDS] [TARGET...]   fuzz (default 60 s each)
#   tools/fuzz.sh --ci [--time=SECONDS]          each briefly (default 4 s) on
#                                                its checked-in corpus only;
#                                                ends with "N passed, N failed"
#   tools/fuzz.sh --merge [TARGET...]            add to the checked-in corpus
#                                                the inputs of .fuzz/NAME/ that
#                                                reach code it does not (edges,
#                                                not hit counts: it stays small)
#   tools/fuzz.sh --list                         the targets
#
# TARGET is a name (page_blob_fuzz) or a label; default: every target.
# Fuzzing mode keeps what it finds in .fuzz/NAME/corpus (grown across runs,
# not checked in) next to the checked-in seeds in PKG/corpus/NAME/, and
# writes a crashing input to .fuzz/NAME/crash-*, the log to .fuzz/NAME.log.
# A crash ends that target's run and fails the command (exit 1).
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

mode=fuzz
time=""
names=()
for arg in "$@"; do
  case "$arg" in
    --time=*) time=${arg#--time=} ;;
    --ci) mode=ci ;;
    --merge) mode=merge ;;
    --list) mode=list ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "fuzz.sh: unknown flag $arg (see --help)" >&2; exit 2 ;;
    *) names+=("$arg") ;;
  esac
done
[ -n "$time" ] || { [ "$mode" = ci ] && time=4 || time=60; }
case "$time" in
  ''|*[!0-9]*) echo "fuzz.sh: --time=$time is not a number of seconds" >&2; exit 2 ;;
esac

all=$(bazel query 'attr(tags, "fuzz_target", //...)' 2>/dev/null)
if [ -z "$all" ]; then
  echo "fuzz.sh: bazel query found no fuzz targets" >&2
  [ "$mode" = ci ] && echo "0 passed, 1 failed"
  exit 1
fi
labels=()
if [ ${#names[@]} -eq 0 ]; then
  mapfile -t labels <<<"$all"
else
  for n in "${names[@]}"; do
    match=$(grep -E "(^|:)${n#*:}\$" <<<"$all" | head -1)
    if [ -z "$match" ]; then
      echo "fuzz.sh: no fuzz target $n; targets:" >&2
      sed 's/^/  /' <<<"$all" >&2
      exit 2
    fi
    labels+=("$match")
  done
fi
if [ "$mode" = list ]; then
  printf '%s\n' "${labels[@]}"
  exit 0
fi

mkdir -p .fuzz
echo "== building ${#labels[@]} fuzz target(s) with --config=fuzz"
if ! bazel build --config=fuzz "${labels[@]}" >.fuzz/build.log 2>&1; then
  grep -E '^ERROR|error:' .fuzz/build.log | head -20
  echo "fuzz.sh: the build failed; see .fuzz/build.log" >&2
  [ "$mode" = ci ] && echo "0 passed, ${#labels[@]} failed"
  exit 1
fi
bin=$(bazel info --config=fuzz bazel-bin 2>/dev/null)

passed=0
failed=0
for label in "${labels[@]}"; do
  pkg=${label#//}
  pkg=${pkg%%:*}
  name=${label##*:}
  seeds="$pkg/corpus/$name"
  work=".fuzz/$name"
  log=".fuzz/$name.log"
  mkdir -p "$work/corpus" "$seeds"
  case "$mode" in
    merge)
      echo "== $name: merging $work/corpus into $seeds"
      "$bin/$pkg/$name" -merge=1 -use_counters=0 "$seeds" "$work/corpus" \
        >"$log" 2>&1 ||
        { echo "   merge failed; see $log"; failed=$((failed + 1)); continue; }
      grep -E 'MERGE-OUTER: [0-9]+ new files' "$log" | sed 's/^/   /'
      passed=$((passed + 1))
      continue
      ;;
    ci)
      # A scratch corpus: the run must not grow the checked-in one.
      scratch=$(mktemp -d)
      dirs=("$scratch" "$seeds")
      ;;
    fuzz)
      dirs=("$work/corpus" "$seeds")
      ;;
  esac
  echo "== $name: ${time} s on $seeds"
  start=$SECONDS
  "$bin/$pkg/$name" -max_total_time="$time" -timeout=30 -print_final_stats=1 \
    -artifact_prefix="$work/" "${dirs[@]}" >"$log" 2>&1
  rc=$?
  [ "$mode" = ci ] && rm -rf "$scratch"
  execs=$(grep -oE 'stat::number_of_executed_units: [0-9]+' "$log" | grep -oE '[0-9]+$')
  speed=$(grep -oE 'stat::average_exec_per_sec: +[0-9]+' "$log" | grep -oE '[0-9]+$')
  cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+' "$log" | tail -1)
  if [ "$rc" -eq 0 ]; then
    echo "   ok: ${execs:-?} executions (${speed:-?}/s), ${cov:-no coverage line}, $((SECONDS - start)) s"
    passed=$((passed + 1))
  else
    echo "   FAILED (exit $rc) after $((SECONDS - start)) s; log $log"
    grep -E 'ERROR: |SUMMARY: |Test unit written to|fuzz: ' "$log" | head -8 | sed 's/^/   | /'
    failed=$((failed + 1))
  fi
done

if [ "$mode" = ci ]; then
  echo "${passed} passed, ${failed} failed"
fi
[ "$failed" -eq 0 ]
