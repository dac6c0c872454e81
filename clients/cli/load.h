// clients/cli/load.h: the load generator behind `furrballs load`: a fixed
// number of Get/Set operations from a number of threads over a key space,
// with exact latency percentiles.
//
// Thread safety: RunLoad is called from one thread and runs its own workers;
// the progress callback runs on the calling thread.
//
// Each worker issues one synchronous call at a time, so `concurrency` is the
// number of operations in flight (closed loop). Latencies are kept whole (8
// bytes per operation) and sorted once at the end, so p50/p99 are exact
// (nearest rank), not bucket estimates. Operations that fail still count as
// done and their status codes are tallied; the summary names the first error.
#ifndef FURRBALLS_CLIENTS_CLI_LOAD_H_
#define FURRBALLS_CLIENTS_CLI_LOAD_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <absl/status/status.h>

#include "clients/cpp/client.h"
#include "clients/cpp/cluster_client.h"

namespace furrballs::cli {

struct LoadOptions {
  uint64_t ops = 100000;     // operations in total
  int concurrency = 8;       // worker threads, one call in flight each
  uint64_t keys = 10000;     // key space: key_prefix + [0, keys)
  size_t value_size = 100;   // bytes per written value
  double get_ratio = 0.9;    // fraction of operations that are Gets
  std::string key_prefix = "load:";
  uint64_t seed = 1;         // workers' RNG seeds derive from it
  client::CallOptions call;  // deadline of each operation
};

// A snapshot while the run goes on.
struct LoadProgress {
  uint64_t done = 0;
  uint64_t errors = 0;
  double elapsed_s = 0;
};

struct LoadReport {
  uint64_t ops = 0;
  uint64_t gets = 0;
  uint64_t sets = 0;
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t errors = 0;
  std::map<absl::StatusCode, uint64_t> errors_by_code;
  std::string first_error;  // empty when errors == 0
  double seconds = 0;
  // Latency of every operation (successful or not), in microseconds.
  double p50_us = 0;
  double p99_us = 0;
  double p999_us = 0;
  double max_us = 0;

  double ops_per_second() const { return seconds > 0 ? ops / seconds : 0; }
};

// Runs the load. `progress` (if set) is called about once per
// `progress_period` and not after the run ends.
LoadReport RunLoad(client::ClusterClient& cluster, const LoadOptions& options,
                   const std::function<void(const LoadProgress&)>& progress,
                   std::chrono::milliseconds progress_period =
                       std::chrono::milliseconds(1000));

// The nearest-rank percentile (0 < p <= 1) of `sorted` (ascending). 0 for an
// empty input.
uint64_t Percentile(const std::vector<uint64_t>& sorted, double p);

// Multi-line human-readable summary of a report.
std::string FormatReport(const LoadReport& report);

}  // namespace furrballs::cli

#endif  // FURRBALLS_CLIENTS_CLI_LOAD_H_
