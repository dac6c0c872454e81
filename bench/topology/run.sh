#!/usr/bin/env bash
# bench/topology/run.sh OUT_DIR [--runs=N] [--service_runs=N]: every figure
# of docs/topology.md, into OUT_DIR:
#   engine.md, engine.csv       the ablation (//bench/topology:topology_bench),
#                               every row, with a warm-up
#   service-<delay>.md, .csv    the routes through gRPC
#                               (//bench/service:service_bench) on a simulated
#                               2-node server with <delay> ns of remote delay
#   run.txt                     commit, commands, load average before/after
# The binaries are copied out of bazel-bin first, so that a rebuild by
# someone else cannot replace one in the middle of the run.
set -euo pipefail
out=${1:?usage: bench/topology/run.sh OUT_DIR [--runs=N] [--service_runs=N]}
shift
runs=5
service_runs=5
for arg in "$@"; do
  case "$arg" in
    --runs=*) runs=${arg#*=} ;;
    --service_runs=*) service_runs=${arg#*=} ;;
    *) echo "unknown argument: $arg" >&2; exit 2 ;;
  esac
done
cd "$(dirname "$0")/../.."
mkdir -p "$out"
bazel build //bench/topology:topology_bench //bench/service:service_bench \
  //bench/service:empty_server //service:furrballs_server
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
for t in bench/topology/topology_bench bench/service/service_bench \
         bench/service/empty_server service/furrballs_server; do
  cp "bazel-bin/$t" "$bin/"
done

log() { echo "$*" | tee -a "$out/run.txt"; }
: >"$out/run.txt"
log "commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . || echo ' (with uncommitted changes)')"
log "start $(date -u +%FT%TZ), load average $(cut -d' ' -f1-3 /proc/loadavg)"

# Every row of the ablation in the same runs, so that every ratio compares
# rows of one run: the routings, both migration rows, round-robin's
# defaults (location cache, kAuto) and the race rows, at 70 and 140 ns.
# 1,000 keys per thread so that a 250,000-operation warm-up reads each key
# about 240 times (the policy moves a key after 8 sampled remote reads,
# one Get in 16 sampled); the same warm-up for every row.
engine=("$bin/topology_bench" "--runs=$runs" "--delays=70,140"
  "--keys_per_thread=1000" "--warmup_ops_per_thread=250000"
  "--ops_per_thread=100000"
  "--configs=hash,round_robin,thread_local,thread_local_migrate,round_robin_migrate,round_robin_defaults,race,race_location_cache"
  "--csv=$out/engine.csv")
log "${engine[*]}"
"${engine[@]}" >"$out/engine.md" 2>"$out/engine.log"
log "engine done $(date -u +%FT%TZ), load average $(cut -d' ' -f1-3 /proc/loadavg)"

for delay in 0 140; do
  service=("$bin/service_bench" "--server_binary=$bin/furrballs_server"
    "--empty_binary=$bin/empty_server" "--runs=$service_runs"
    "--configs=nodejob64,direct,direct_thread_local,direct_round_robin,direct_round_robin_migrate"
    "--cells=get,multiget,pipeline" "--keys=1000"
    "--server_flags=--memory_mb=64 --simulate_nodes=2 --simulated_remote_delay_ns=$delay"
    "--csv=$out/service-$delay.csv")
  log "${service[*]}"
  "${service[@]}" >"$out/service-$delay.md" 2>"$out/service-$delay.log"
  log "service $delay done $(date -u +%FT%TZ), load average $(cut -d' ' -f1-3 /proc/loadavg)"
done
log "end $(date -u +%FT%TZ), load average $(cut -d' ' -f1-3 /proc/loadavg)"
