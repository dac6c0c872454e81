// metrics/stats_collector.h: the Prometheus view of a running Furrballs
// server, built from statistics snapshots at scrape time.
//
// Thread safety: Collect() is thread-safe if the sources are (the server's
// are: FurrBall::Stats, Dispatcher::Stats and RequestStats::Snapshot may be
// called from any thread).
//
// Why a Collectable and not prometheus-cpp counters: a prometheus-cpp Counter
// is one shared atomic, and the request path must not touch one (report
// §3.7). The engine, the dispatcher and the service keep their own counters,
// sharded per node or per thread and written by a single thread; this
// collector only reads their snapshots when Prometheus scrapes, and turns
// them into metric families. Every family is documented in docs/metrics.md.
#ifndef FURRBALLS_METRICS_STATS_COLLECTOR_H_
#define FURRBALLS_METRICS_STATS_COLLECTOR_H_

#include <functional>
#include <vector>

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include "engine/furrball/stats.h"
#include "service/dispatcher.h"
#include "service/request_stats.h"

namespace furrballs::metrics {

// Where the collector reads. Each source is called once per scrape, on the
// HTTP server's thread; a null source leaves its families out.
struct StatsSources {
  // One snapshot per node (FurrBall::Stats).
  std::function<std::vector<NodeStatsSnapshot>()> engine;
  // One entry per node worker, each with its node id (Dispatcher::Stats).
  std::function<std::vector<service::DispatchStats>()> dispatch;
  // Request counts and latencies (RequestStats::Snapshot).
  std::function<service::RequestStatsSnapshot()> requests;
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
