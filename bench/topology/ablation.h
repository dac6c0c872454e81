// bench/topology/ablation.h: one cell of the topology ablation (issue 16;
// the Furrballs report's §5.6 routing comparison, §5.8 simulated remote
// latency, §5.10 ablation and Phase 4 dispatch models): a FurrBall on a
// simulated topology, one or more threads pinned to each node, a
// read-mostly load, every operation timed.
//
// Thread safety: RunAblationCell starts and joins its own threads; call it
// from one thread at a time.
//
// Method:
// - The cache: FurrBallOptions::simulate_topology with `nodes` virtual
//   nodes and simulated_remote_delay_ns (the busy-wait Numatic injects
//   wherever a thread touches another node's shard), a key table sized for
//   every key so that nothing is evicted, and the row's options
//   (AblationConfig::apply: routing and the Phase 4 features).
// - Threads: threads_per_node per node, each pinned to its node with
//   FurrBall::PinCurrentThreadToNode, so it places, searches and pays the
//   delay as that node's thread. On a machine with fewer CPUs than nodes,
//   virtual nodes share CPUs (docs/numatic.md); the pinning still decides
//   which node a thread is.
// - Load: each thread writes its own keys_per_thread keys, so under
//   thread-local routing a key starts on its writer's node.
// - Warm-up: each thread performs warmup_ops_per_thread untimed operations
//   from the start of its plan (below), so that migration has acted.
// - Run: each thread performs ops_per_thread operations from a plan drawn
//   before the cache is opened: read_share Gets, the rest Sets that
//   overwrite a key with a value of the same size. A key is chosen by
//   KeyChoice: kPlacement picks a key written by a thread of the reader's
//   node, except a cross_share of operations that pick a key of a thread on
//   another node (the placement case the report's §5.6 measures with
//   self-reads and cross-reads); kUniform picks any key (the control, where
//   placement cannot help).
// - Timing: only the FurrBall call, with CycleTimer (LFENCE+RDTSC) into a
//   per-thread LatencyHistogram, merged after the join. The key is hashed
//   inside the timed call, as a client's would be. Percentiles and a mean
//   trimmed to p1-p99.
// - Throughput: run-phase operations over the wall time from the common
//   start to the last thread's end. CPU share: the run threads' CPU time
//   over threads x wall time (below ~0.9 the machine's other load diluted
//   the cell); CPU per operation: the process's CPU time over the run's
//   operations.
// - Locality: the engine's own counters over the run phase
//   (NodeStatsSnapshot::hits_local / hits_remote / misses), so the local-hit
//   share is what the cache did, not what the harness intended.
// - Every value carries its key's number; a hit with the wrong one is
//   counted as a bad value.
#ifndef FURRBALLS_BENCH_TOPOLOGY_ABLATION_H_
#define FURRBALLS_BENCH_TOPOLOGY_ABLATION_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include <absl/status/status.h>
#include <absl/status/statusor.h>

#include "engine/furrball/options.h"

namespace furrballs::bench {

// A row of the ablation: the options it is about.
struct AblationConfig {
  std::string_view name;   // as --configs names it
  std::string_view label;  // as the report shows it
  // Sets the row's options on top of the cell's; nullptr while the feature
  // the row needs is not on main (the report then says "not landed yet"
  // rather than run something else under its name).
  void (*apply)(FurrBallOptions& options);
  std::string_view needs;  // what has to land for `apply` to exist
};

// Every row, in report order.
std::span<const AblationConfig> AblationConfigs();
// The row named `name`, or nullptr.
const AblationConfig* FindAblationConfig(std::string_view name);

enum class KeyChoice { kPlacement, kUniform };

struct AblationCellSpec {
  // REQUIRES: apply != nullptr.
  const AblationConfig* config = nullptr;
  int nodes = 2;
  uint32_t remote_delay_ns = 0;
  KeyChoice keys = KeyChoice::kPlacement;
  int threads_per_node = 1;
  uint64_t keys_per_thread = 5000;
  uint64_t ops_per_thread = 300000;
  // Untimed operations from the start of the plan after the load and
  // before the run, so that a policy that learns from reads (migration:
  // a key moves after 8 sampled remote reads, one Get in 16 sampled) has
  // acted before the run is timed. The same for every row.
  uint64_t warmup_ops_per_thread = 1000000;
  double read_share = 0.95;
  // kPlacement: the share of operations on another node's keys.
  double cross_share = 0.1;
  size_t value_bytes = 64;
  uint64_t seed = 1;
  // TSC ticks per nanosecond (CycleTimer::TicksPerNs); 0 = measure it here.
  double ticks_per_ns = 0;
};

struct AblationResult {
  uint64_t gets = 0;
  uint64_t found = 0;
  uint64_t sets = 0;
  uint64_t refused_sets = 0;  // load and run
  uint64_t bad_values = 0;
  // The engine's counters over the run phase, summed over nodes.
  uint64_t hits_local = 0;
  uint64_t hits_remote = 0;
  uint64_t misses = 0;
  // Keys moved to their readers' nodes (migrations_in) in the warm-up and
  // in the run.
  uint64_t migrations_warmup = 0;
  uint64_t migrations_run = 0;
  uint64_t get_p50_ns = 0;
  uint64_t get_p99_ns = 0;
  // The mean Get between p1 and p99: the timer advances in steps of ~10 ns
  // on the VMs this runs on, so p50 moves in such steps and this is the
  // finer figure (LatencyHistogram::MeanBetween).
  double get_trimmed_mean_ns = 0;
  uint64_t set_p50_ns = 0;
  double run_seconds = 0;
  double ops_per_second = 0;
  double cpu_share = 0;
  // The process's CPU time over the run's operations (ns): the run
  // threads' and the node workers' (a race's probes run on the workers),
  // so a row that shifts work to the workers pays here, and on a shared
  // machine it moves less than a latency does.
  double cpu_ns_per_op = 0;

  // Hits served on the reader's own node over all hits.
  double LocalHitShare() const;
  // The bookkeeping a valid cell satisfies: every Get the harness timed is
  // one hit or one miss in the engine's counters, every hit was found, no
  // value was wrong and no write refused. A broken harness or engine shows
  // here before it shows in a latency.
  absl::Status CheckCounts() const;
};

absl::StatusOr<AblationResult> RunAblationCell(const AblationCellSpec& spec);

}  // namespace furrballs::bench

#endif  // FURRBALLS_BENCH_TOPOLOGY_ABLATION_H_
