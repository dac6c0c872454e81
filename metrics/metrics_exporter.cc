#include "metrics/metrics_exporter.h"

#include <exception>
#include <utility>
#include <vector>

#include <absl/status/status.h>
#include <absl/strings/str_cat.h>
#include <prometheus/exposer.h>

namespace furrballs::metrics {

absl::StatusOr<std::unique_ptr<MetricsExporter>> MetricsExporter::Start(
    const std::string& address, StatsSources sources) {
  std::unique_ptr<MetricsExporter> exporter(new MetricsExporter);
  exporter->collector_ = std::make_shared<StatsCollector>(std::move(sources));
  // The Exposer (civetweb underneath) reports a failure to listen by
  // throwing; exceptions stop here and become a Status.
  try {
    // One HTTP thread: scrapes are rare, and a second would only let two
    // scrapes compete for the same snapshots.
    exporter->exposer_ =
        std::make_unique<prometheus::Exposer>(address, /*num_threads=*/1);
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat(
        "metrics: cannot listen on ", address,
        " (address in use, or not a valid host:port): ", e.what()));
  } catch (...) {
    return absl::UnavailableError(
        absl::StrCat("metrics: cannot listen on ", address));
  }
  exporter->exposer_->RegisterCollectable(exporter->collector_);
  const std::vector<int> ports = exporter->exposer_->GetListeningPorts();
  if (ports.empty()) {
    return absl::UnavailableError(
        absl::StrCat("metrics: no listening port for ", address));
  }
  exporter->port_ = ports.front();
  return exporter;
}

MetricsExporter::~MetricsExporter() {
  // The Exposer's destructor stops civetweb, which joins its threads; only
  // then may the collector (and what its sources point to) go away.
  exposer_.reset();
}

}  // namespace furrballs::metrics
