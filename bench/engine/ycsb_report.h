// bench/engine/ycsb_report.h: medians over runs, the report tables and CSV.
//
// Thread safety: pure functions over their arguments.
#ifndef FURRBALLS_BENCH_ENGINE_YCSB_REPORT_H_
#define FURRBALLS_BENCH_ENGINE_YCSB_REPORT_H_

#include <string>
#include <vector>

#include <absl/status/status.h>

#include "bench/engine/ycsb_runner.h"

namespace furrballs::bench {

// One cell's outcome in one run of the matrix.
struct Measurement {
  CellSpec spec;
  int run = 0;  // 1-based
  bool ok = false;
  std::string error;  // when !ok
  CellResult result;
};

// The per-field median (mean of the two middle values for an even count).
CellResult MedianResult(const std::vector<CellResult>& results);

// One markdown table per workload / distribution / value size / threads /
// working set, rows in `backend_order`, each metric the median over runs.
// `reference` names the backend the last column divides by (FurrBall).
std::string FormatReport(const std::vector<Measurement>& measurements,
                         const std::vector<std::string>& backend_order,
                         const std::string& reference);

// Every run's rows, then the medians (run = "median").
absl::Status WriteCsv(const std::string& path,
                      const std::vector<Measurement>& measurements,
                      const std::vector<std::string>& backend_order);

}  // namespace furrballs::bench

#endif  // FURRBALLS_BENCH_ENGINE_YCSB_REPORT_H_
