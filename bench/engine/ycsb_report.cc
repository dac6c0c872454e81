// bench/engine/ycsb_report.cc: medians, markdown tables, CSV.
#include "bench/engine/ycsb_report.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>

#include <absl/strings/str_cat.h>
#include <absl/strings/str_format.h>
#include <absl/strings/str_replace.h>

namespace furrballs::bench {
namespace {

template <typename T>
T Median(std::vector<T> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  if (n == 0) return T{};
  if (n % 2 == 1) return values[n / 2];
  return static_cast<T>((static_cast<double>(values[n / 2 - 1]) +
                         static_cast<double>(values[n / 2])) /
                        2);
}

// Cells that differ only in backend and run share a group (one table).
std::string GroupKey(const CellSpec& s) {
  return absl::StrCat(std::string(1, s.workload.name), "|",
                      DistributionName(s.distribution), "|", s.value_bytes, "|",
                      s.threads, "|", s.working_set_factor);
}

std::string WithCommas(uint64_t v) {
  std::string digits = absl::StrCat(v);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return out;
}

std::string OpsPerSecond(double v) {
  if (v >= 1e6) return absl::StrFormat("%.2fM", v / 1e6);
  return absl::StrFormat("%.0fK", v / 1e3);
}

std::string WorkloadTitle(const WorkloadMix& w) {
  switch (w.name) {
    case 'A': return "YCSB-A (50% read, 50% update)";
    case 'B': return "YCSB-B (95% read, 5% update)";
    case 'C': return "YCSB-C (100% read)";
    case 'F': return "YCSB-F (50% read, 50% read-modify-write)";
  }
  return absl::StrCat("YCSB-", std::string(1, w.name));
}

struct Group {
  CellSpec spec;  // of the first cell seen, for the title
  std::map<std::string, std::vector<const Measurement*>> by_backend;
};

std::vector<std::pair<std::string, Group>> GroupMeasurements(
    const std::vector<Measurement>& measurements) {
  std::vector<std::pair<std::string, Group>> groups;
  for (const Measurement& m : measurements) {
    const std::string key = GroupKey(m.spec);
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&key](const auto& g) { return g.first == key; });
    if (it == groups.end()) {
      groups.push_back({key, Group{m.spec, {}}});
      it = groups.end() - 1;
    }
    it->second.by_backend[m.spec.backend].push_back(&m);
  }
  return groups;
}

std::vector<CellResult> OkResults(const std::vector<const Measurement*>& ms) {
  std::vector<CellResult> results;
  for (const Measurement* m : ms) {
    if (m->ok) results.push_back(m->result);
  }
  return results;
}

}  // namespace

CellResult MedianResult(const std::vector<CellResult>& results) {
  CellResult median;
  auto field = [&results](auto member) {
    using T = std::decay_t<decltype(results[0].*member)>;
    std::vector<T> values;
    for (const CellResult& r : results) values.push_back(r.*member);
    return Median(std::move(values));
  };
  median.records = field(&CellResult::records);
  median.ops = field(&CellResult::ops);
  median.load_seconds = field(&CellResult::load_seconds);
  median.run_seconds = field(&CellResult::run_seconds);
  median.ops_per_second = field(&CellResult::ops_per_second);
  median.get_p50_ns = field(&CellResult::get_p50_ns);
  median.get_p99_ns = field(&CellResult::get_p99_ns);
  median.set_p50_ns = field(&CellResult::set_p50_ns);
  median.set_p99_ns = field(&CellResult::set_p99_ns);
  median.reads = field(&CellResult::reads);
  median.read_hits = field(&CellResult::read_hits);
  median.sets = field(&CellResult::sets);
  median.refused_sets = field(&CellResult::refused_sets);
  median.bad_values = field(&CellResult::bad_values);
  median.live_value_bytes = field(&CellResult::live_value_bytes);
  median.rss_growth_bytes = field(&CellResult::rss_growth_bytes);
  median.run_cpu_share = field(&CellResult::run_cpu_share);
  return median;
}

std::string FormatReport(const std::vector<Measurement>& measurements,
                         const std::vector<std::string>& backend_order,
                         const std::string& reference) {
  std::string out;
  for (const auto& [key, group] : GroupMeasurements(measurements)) {
    const CellSpec& s = group.spec;
    size_t runs = 0;
    for (const auto& [name, ms] : group.by_backend) runs = std::max(runs, ms.size());
    absl::StrAppend(
        &out, "#### ", WorkloadTitle(s.workload), ", ",
        DistributionName(s.distribution),
        s.distribution == Distribution::kZipfian
            ? absl::StrFormat(" θ=%.2f", s.zipf_theta)
            : std::string(),
        ", ", s.value_bytes, " B values, ", s.threads,
        s.threads == 1 ? " thread" : " threads", ", working set ",
        absl::StrFormat("%.1fx", s.working_set_factor), " budget (",
        WithCommas(s.RecordCount()), " records, budget ",
        s.memory_budget_bytes >> 20, " MiB)",
        runs > 1 ? absl::StrCat(", median of ", runs, " runs") : "", "\n\n");
    absl::StrAppend(&out,
                    "| backend | ops/s | get p50 ns | get p99 ns | set p50 ns | "
                    "set p99 ns | hit % | RSS Δ MiB | mem eff | cpu % | ",
                    reference, "/peer ops |\n",
                    "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    double reference_ops = 0;
    if (auto it = group.by_backend.find(reference); it != group.by_backend.end()) {
      const std::vector<CellResult> ok = OkResults(it->second);
      if (!ok.empty()) reference_ops = MedianResult(ok).ops_per_second;
    }
    std::string notes;
    for (const std::string& backend : backend_order) {
      const auto it = group.by_backend.find(backend);
      if (it == group.by_backend.end()) continue;
      const std::vector<CellResult> ok = OkResults(it->second);
      for (const Measurement* m : it->second) {
        if (!m->ok) {
          absl::StrAppend(&notes, "- ", backend, " run ", m->run,
                          " failed: ", m->error, "\n");
        }
      }
      if (ok.empty()) {
        absl::StrAppend(&out, "| ", backend, " | failed | | | | | | | | | |\n");
        continue;
      }
      const CellResult r = MedianResult(ok);
      const bool has_sets = r.sets > 0;
      absl::StrAppend(
          &out, "| ", backend, " | ", OpsPerSecond(r.ops_per_second), " | ",
          WithCommas(r.get_p50_ns), " | ", WithCommas(r.get_p99_ns), " | ",
          has_sets ? WithCommas(r.set_p50_ns) : "-", " | ",
          has_sets ? WithCommas(r.set_p99_ns) : "-", " | ",
          absl::StrFormat("%.1f", 100.0 * r.HitRatio()), " | ",
          absl::StrFormat("%.1f", static_cast<double>(r.rss_growth_bytes) /
                                      (1 << 20)),
          " | ",
          r.rss_growth_bytes > 0 ? absl::StrFormat("%.2f", r.MemoryEfficiency())
                                 : "n/a",
          " | ", absl::StrFormat("%.0f", 100.0 * r.run_cpu_share), " | ",
          reference_ops > 0 && r.ops_per_second > 0
              ? absl::StrFormat("%.2f", reference_ops / r.ops_per_second)
              : "-",
          " |\n");
      if (!ok.front().note.empty()) {
        absl::StrAppend(&notes, "- ", backend, " (first run): ", ok.front().note, "\n");
      }
      if (r.refused_sets > 0) {
        absl::StrAppend(&notes, "- ", backend, ": ", WithCommas(r.refused_sets),
                        " refused sets (median)\n");
      }
      if (r.bad_values > 0) {
        absl::StrAppend(&notes, "- ", backend, ": ", WithCommas(r.bad_values),
                        " reads returned a wrong value (median)\n");
      }
    }
    absl::StrAppend(&out, notes.empty() ? "" : "\n", notes, "\n");
  }
  return out;
}

absl::Status WriteCsv(const std::string& path,
                      const std::vector<Measurement>& measurements,
                      const std::vector<std::string>& backend_order) {
  std::ofstream csv(path);
  if (!csv) return absl::UnavailableError(absl::StrCat("cannot write ", path));
  csv << "run,backend,workload,distribution,zipf_theta,value_bytes,threads,"
         "working_set_factor,budget_bytes,records,ops,ops_per_second,"
         "get_p50_ns,get_p99_ns,set_p50_ns,set_p99_ns,reads,read_hits,"
         "hit_ratio,sets,refused_sets,bad_values,live_value_bytes,"
         "rss_growth_bytes,memory_efficiency,run_cpu_share,load_seconds,"
         "run_seconds,error\n";
  auto row = [&csv](const std::string& run, const CellSpec& s, const CellResult& r,
                    const std::string& error) {
    csv << absl::StrFormat(
        "%s,%s,%c,%s,%.2f,%d,%d,%.2f,%d,%d,%d,%.0f,%d,%d,%d,%d,%d,%d,%.4f,%d,%d,"
        "%d,%d,%d,%.4f,%.3f,%.3f,%.3f,%s\n",
        run, s.backend, s.workload.name, DistributionName(s.distribution),
        s.zipf_theta, s.value_bytes, s.threads, s.working_set_factor,
        s.memory_budget_bytes, r.records, r.ops, r.ops_per_second, r.get_p50_ns,
        r.get_p99_ns, r.set_p50_ns, r.set_p99_ns, r.reads, r.read_hits,
        r.HitRatio(), r.sets, r.refused_sets, r.bad_values, r.live_value_bytes,
        r.rss_growth_bytes, r.MemoryEfficiency(), r.run_cpu_share, r.load_seconds, r.run_seconds,
        error);
  };
  for (const Measurement& m : measurements) {
    row(absl::StrCat(m.run), m.spec, m.ok ? m.result : CellResult{},
        m.ok ? "" : "\"" + absl::StrReplaceAll(m.error, {{"\"", "'"}}) + "\"");
  }
  for (const auto& [key, group] : GroupMeasurements(measurements)) {
    for (const std::string& backend : backend_order) {
      const auto it = group.by_backend.find(backend);
      if (it == group.by_backend.end()) continue;
      const std::vector<CellResult> ok = OkResults(it->second);
      if (ok.empty()) continue;
      row("median", it->second.front()->spec, MedianResult(ok), "");
    }
  }
  if (!csv) return absl::UnavailableError(absl::StrCat("error writing ", path));
  return absl::OkStatus();
}

}  // namespace furrballs::bench
