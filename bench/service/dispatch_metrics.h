// bench/service/dispatch_metrics.h: reads a furrballs_server's dispatcher
// counters from its Prometheus endpoint (docs/metrics.md), so that the
// benchmark can report how full the NodeJob batches actually were and which
// share of the hits was served on the key's own node.
//
// Thread safety: thread-safe (no shared state).
#ifndef FURRBALLS_BENCH_SERVICE_DISPATCH_METRICS_H_
#define FURRBALLS_BENCH_SERVICE_DISPATCH_METRICS_H_

#include <absl/status/statusor.h>

namespace furrballs::bench {

// Sums over nodes of furrballs_dispatch_batches_total,
// furrballs_dispatch_ops_total and furrballs_hits_total by locality.
struct DispatchCounters {
  double batches = 0;
  double ops = 0;
  double hits_local = 0;   // served by a thread on the key's node
  double hits_remote = 0;  // served to a thread on another node
};

// GET http://127.0.0.1:<port>/metrics and sum the counters.
absl::StatusOr<DispatchCounters> ScrapeDispatchCounters(int port);

// A loopback port that was free a moment ago (bound to port 0 and released),
// for a child's --metrics_address. Another process may take it in between;
// the child then fails to start and the caller may try again.
absl::StatusOr<int> PickFreeLoopbackPort();

}  // namespace furrballs::bench

#endif  // FURRBALLS_BENCH_SERVICE_DISPATCH_METRICS_H_
