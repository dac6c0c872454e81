// metrics/stats_collector.h: the Prometheus view of a running Furrballs
// server, built from statistics snapshots at scrape time.
//
// Thread safety: Collect() is thread-safe if the sources are (the server's
// are: FurrBall::Stats, Dispatcher::Stats and RequestStats::Snapshot may be
// called from any thread).
//
// metrics/ reads plain counters and knows neither the service nor gRPC: the
// request and dispatch counters arrive as the plain values below, which the
// binary's composition root (service/main.cc) fills from the service's
// snapshots. Only the engine's NodeStatsSnapshot is read as it is, because
// the engine is a layer below both.
//
// Why a Collectable and not prometheus-cpp counters: a prometheus-cpp Counter
// is one shared atomic, and the request path must not touch one (report
// §3.7). The engine, the dispatcher and the service keep their own counters,
// sharded per node or per thread and written by a single thread; this
// collector only reads their snapshots when Prometheus scrapes, and turns
// them into metric families. Every family is documented in docs/metrics.md.
#ifndef FURRBALLS_METRICS_STATS_COLLECTOR_H_
#define FURRBALLS_METRICS_STATS_COLLECTOR_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include "engine/furrball/stats.h"

namespace furrballs::metrics {

// Finished requests by operation and status code, with latency histograms.
struct RequestCounts {
  struct Op {
    std::string name;  // the `op` label value
    // Indexed like RequestCounts::code_names.
    std::vector<uint64_t> by_code;
    // Per bucket (not cumulative); one more than latency_bounds_ns, the last
    // being +Inf.
    std::vector<uint64_t> latency_buckets;
    uint64_t latency_sum_ns = 0;
  };
  // The `code` label value of each status code index.
  std::vector<std::string> code_names;
  // Upper bounds (inclusive, as Prometheus `le`) of the latency buckets.
  std::vector<uint64_t> latency_bounds_ns;
  std::vector<Op> ops;
};

// One node worker's dispatch counters.
struct WorkerCounts {
  int node = 0;  // the node's id, as NodeStatsSnapshot::node
  uint64_t batches = 0;
  uint64_t ops = 0;
  uint64_t merged_writes = 0;
  uint64_t deadline_expired = 0;
  uint64_t rejected_queue_full = 0;
  uint64_t queue_depth = 0;
};

// Where the collector reads. Each source is called once per scrape, on the
// HTTP server's thread; a null source leaves its families out.
struct StatsSources {
  // One snapshot per node (FurrBall::Stats).
  std::function<std::vector<NodeStatsSnapshot>()> engine;
  // One entry per node worker, each with its node id.
  std::function<std::vector<WorkerCounts>()> dispatch;
  // Request counts and latencies.
  std::function<RequestCounts()> requests;
  // The process_* families from /proc/self.
  bool process = true;
};

class StatsCollector final : public prometheus::Collectable {
 public:
  explicit StatsCollector(StatsSources sources);

  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  const StatsSources sources_;
};

}  // namespace furrballs::metrics

#endif  // FURRBALLS_METRICS_STATS_COLLECTOR_H_
