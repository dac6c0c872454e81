// bench/engine/ycsb_runner.h: one benchmark cell (one backend, one workload,
// one configuration): load every record, run a fixed number of operations per
// thread, and measure.
//
// Thread safety: RunCell starts and joins its own threads; call it from one
// thread. The driver runs each cell in a fresh process so that the RSS growth
// it reports belongs to that backend alone.
//
// Method:
// - records = working_set_factor * memory_budget_bytes / (key + value bytes):
//   the working set is measured in key + value bytes against the budget.
// - Load: the threads insert every record once (disjoint ranges, in key
//   order). Bounded caches evict during the load when the working set is
//   larger than the budget.
// - Run: each thread performs ops_per_thread operations chosen by the
//   workload mix on keys chosen by the distribution. Keys and operation types
//   are drawn into a per-thread plan before the backend is created, so the
//   Zipfian generator's pow() is not in the run loop. Only the backend call is
//   timed (CycleTimer, LFENCE+RDTSC, around Get or Set); key formatting and value stamping
//   happen outside it. Each thread records into its own histograms, merged
//   after the join.
// - A read that misses counts a miss and then inserts the record
//   (read-through, as a cache in front of a database would); that insert is
//   timed as a Set. A read-modify-write (F) reads (timed as a Get), changes the
//   value's version stamp, and writes it back (timed as a Set); on a miss it
//   writes a fresh value.
// - Every value carries its key number in its first eight bytes; a hit whose
//   value has the wrong size or key number is counted as a bad value.
// - Throughput is the run phase's operations over its wall time (from the
//   common start to the last thread's end). An F read-modify-write counts as
//   one operation.
// - CPU share: each thread's CPU time (CLOCK_THREAD_CPUTIME_ID) over the
//   run, summed, over threads * run wall time; a noise indicator on a shared
//   machine.
// - Memory: VmRSS before the backend is created and after the run; the
//   efficiency is the live value bytes the backend reports over that growth.
#ifndef FURRBALLS_BENCH_ENGINE_YCSB_RUNNER_H_
#define FURRBALLS_BENCH_ENGINE_YCSB_RUNNER_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include <absl/status/statusor.h>

#include "bench/engine/cache_backend.h"
#include "bench/engine/ycsb_workload.h"

namespace furrballs::bench {

struct CellSpec {
  std::string backend;
  WorkloadMix workload;
  Distribution distribution = Distribution::kZipfian;
  size_t value_bytes = 64;
  int threads = 1;
  double working_set_factor = 0.5;

  size_t memory_budget_bytes = size_t{32} << 20;
  size_t key_bytes = 24;
  uint64_t ops_per_thread = 1000000;
  uint64_t seed = 1;
  double zipf_theta = 0.99;
  // TSC ticks per nanosecond (CycleTimer); 0 = measure it in RunCell.
  double ticks_per_ns = 0;
  int64_t furrball_keys_per_node = 0;  // see BackendConfig

  uint64_t RecordCount() const;
};

struct CellResult {
  uint64_t records = 0;
  uint64_t ops = 0;
  double load_seconds = 0;
  double run_seconds = 0;
  double ops_per_second = 0;
  uint64_t get_p50_ns = 0;
  uint64_t get_p99_ns = 0;
  uint64_t set_p50_ns = 0;
  uint64_t set_p99_ns = 0;
  uint64_t reads = 0;
  uint64_t read_hits = 0;
  uint64_t sets = 0;
  uint64_t refused_sets = 0;  // load and run
  uint64_t bad_values = 0;
  uint64_t live_value_bytes = 0;
  int64_t rss_growth_bytes = 0;
  // CPU time of the run-phase threads over threads * run wall time: below ~0.9
  // means other processes took the CPUs and the cell's numbers are diluted.
  double run_cpu_share = 0;

  // The backend's Describe() after the run; not part of Serialize().
  std::string note;

  double HitRatio() const {
    return reads == 0 ? 1.0
                      : static_cast<double>(read_hits) / static_cast<double>(reads);
  }
  double MemoryEfficiency() const {
    return rss_growth_bytes <= 0 ? 0.0
                                 : static_cast<double>(live_value_bytes) /
                                       static_cast<double>(rss_growth_bytes);
  }

  // One line of key=value pairs, and back (how a cell's process reports).
  std::string Serialize() const;
  static absl::StatusOr<CellResult> Parse(std::string_view line);
};

absl::StatusOr<CellResult> RunCell(const CellSpec& spec, BackendFactory factory);

// VmRSS in bytes of process `pid` (0: this process), from
// /proc/<pid>/status; -1 if unreadable.
int64_t ReadRssBytes(int pid = 0);
// User + system CPU seconds of process `pid` (every thread), from
// /proc/<pid>/stat; -1 if unreadable.
double ReadCpuSeconds(int pid);
// User + system CPU seconds of this process (every thread), from
// CLOCK_PROCESS_CPUTIME_ID: nanosecond resolution where /proc's is the
// clock tick (10 ms), for cells that run well under a second.
double ProcessCpuSeconds();

}  // namespace furrballs::bench

#endif  // FURRBALLS_BENCH_ENGINE_YCSB_RUNNER_H_
