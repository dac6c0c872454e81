// metrics/metrics_exporter.h: serves the Prometheus exposition of a
// StatsCollector over HTTP (prometheus-cpp's Exposer), at /metrics.
//
// Thread safety: Start() and the destructor are called by one controlling
// thread; scrapes run on the Exposer's own HTTP threads.
#ifndef FURRBALLS_METRICS_METRICS_EXPORTER_H_
#define FURRBALLS_METRICS_METRICS_EXPORTER_H_

#include <memory>
#include <string>

#include <absl/status/statusor.h>

#include "metrics/stats_collector.h"

namespace prometheus {
class Exposer;
}  // namespace prometheus

namespace furrballs::metrics {

class MetricsExporter {
 public:
  // Listens on `address` ("host:port"; port 0 picks a free port) and serves
  // GET /metrics from `sources`. Fails, with the address, when it cannot
  // listen. The sources must stay valid until the exporter is destroyed.
  static absl::StatusOr<std::unique_ptr<MetricsExporter>> Start(
      const std::string& address, StatsSources sources);

  // Stops the HTTP server and waits for scrapes in progress, so no source is
  // called once it returns. civetweb's threads notice the stop on their next
  // poll, so this can take up to about 2 s after a scrape.
  ~MetricsExporter();
  MetricsExporter(const MetricsExporter&) = delete;
  MetricsExporter& operator=(const MetricsExporter&) = delete;

  // The port actually listened on.
  int port() const { return port_; }

 private:
  MetricsExporter() = default;

  std::shared_ptr<StatsCollector> collector_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  int port_ = 0;
};

}  // namespace furrballs::metrics

#endif  // FURRBALLS_METRICS_METRICS_EXPORTER_H_
