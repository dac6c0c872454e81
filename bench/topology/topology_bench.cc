// bench/topology/topology_bench.cc: the topology ablation (issue 16,
// docs/topology.md): every routing and Phase 4 row of ablation.h on
// simulated 2- and 4-node topologies with 0, 70 and 140 ns of injected
// remote delay, a placement load and a uniform control; medians of
// interleaved runs; the report's bar, thread-local Get p50 against
// round-robin's.
//
// Markdown report on stdout, one progress line per cell on stderr, every
// run's rows with --csv. Exits 1 if a cell fails or its counts do not add
// up (AblationResult::CheckCounts).
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include <absl/flags/flag.h>
#include <absl/flags/parse.h>
#include <absl/flags/usage.h>
#include <absl/strings/numbers.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_format.h>
#include <absl/strings/str_join.h>
#include <absl/strings/str_split.h>

#include "bench/engine/cycle_timer.h"
#include "bench/topology/ablation.h"

ABSL_FLAG(bool, quick, false,
          "Smoke preset: 2 nodes, delays 0 and 140 ns, 1 run, 2,000 keys and "
          "20,000 operations per thread (explicit flags still win).");
ABSL_FLAG(std::string, nodes, "2,4", "Simulated node counts.");
ABSL_FLAG(std::string, delays, "0,70,140",
          "Injected remote delays in ns (report §5.8: 70 models a Xeon "
          "cross-socket access; 0 is the control).");
ABSL_FLAG(std::string, workloads, "placement,uniform",
          "placement: a thread reads keys of its own node but for "
          "--cross_share; uniform: any key (the control).");
ABSL_FLAG(std::string, configs,
          "hash,round_robin,thread_local,thread_local_migrate,race,"
          "race_location_cache",
          "Rows, in report order; a row whose feature is not on main is "
          "reported as not landed.");
ABSL_FLAG(int, runs, 0, "Interleaved runs; the tables show medians (5; quick 1).");
ABSL_FLAG(int, threads_per_node, 1, "Pinned load threads per node.");
ABSL_FLAG(uint64_t, keys_per_thread, 0,
          "Keys each thread writes in the load phase (5,000, as the report's "
          "§5.6 and §5.10; quick 2,000).");
ABSL_FLAG(uint64_t, ops_per_thread, 0,
          "Run-phase operations per thread (300,000; quick 20,000).");
ABSL_FLAG(uint64_t, warmup_ops_per_thread, 0,
          "Untimed operations per thread before the run, from the start of "
          "the plan, so that migration has acted (1,000,000; quick 20,000).");
ABSL_FLAG(double, read_share, 0.95, "Share of run-phase operations that are Gets.");
ABSL_FLAG(double, cross_share, 0.1,
          "placement: share of operations on another node's keys.");
ABSL_FLAG(uint64_t, value_bytes, 64, "Value size.");
ABSL_FLAG(uint64_t, seed, 1, "Seed of the operation plans.");
ABSL_FLAG(std::string, csv, "", "Also write every run's rows here.");

namespace furrballs::bench {
namespace {

// The report's bar (issue 16): thread-local at least 1.26x round-robin at
// Get p50.
constexpr double kBar = 1.26;

struct Cell {
  int nodes;
  int delay_ns;
  KeyChoice keys;
  auto Key() const { return std::make_tuple(nodes, delay_ns, keys); }
};

const char* WorkloadName(KeyChoice k) {
  return k == KeyChoice::kPlacement ? "placement" : "uniform";
}

template <typename T>
bool ParseList(const std::string& text, std::vector<T>* out) {
  for (const std::string& part :
       std::vector<std::string>(absl::StrSplit(text, ',', absl::SkipEmpty()))) {
    T v;
    if (!absl::SimpleAtoi(part, &v) || v < 0) return false;
    out->push_back(v);
  }
  return !out->empty();
}

template <typename T>
T OrDefault(const absl::Flag<T>& flag, T normal, T quick) {
  const T v = absl::GetFlag(flag);
  if (v != 0) return v;
  return absl::GetFlag(FLAGS_quick) ? quick : normal;
}

// The 1, 5 and 15-minute load averages, as /proc/loadavg has them: the
// machine is shared, and a run is read against the load it had.
std::string LoadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string one, five, fifteen;
  if (!(in >> one >> five >> fifteen)) return "unknown";
  return absl::StrCat(one, " ", five, " ", fifteen);
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

using RunResults = std::vector<AblationResult>;  // one per run
// cell key -> row name -> runs
using Results = std::map<std::tuple<int, int, KeyChoice>,
                         std::map<std::string_view, RunResults>>;

template <typename F>
double MedianOf(const RunResults& runs, F field) {
  std::vector<double> v;
  for (const AblationResult& r : runs) v.push_back(field(r));
  return Median(v);
}

void PrintReport(const AblationCellSpec& base, int runs,
                 const std::vector<std::string>& loads,
                 const std::vector<Cell>& cells,
                 const std::vector<const AblationConfig*>& rows,
                 const Results& results) {
  std::printf(
      "# Topology ablation\n\nSimulated topology, %d pinned thread(s) per node, "
      "%llu keys of %zu B per thread, %llu untimed then %llu timed operations "
      "per thread (%.0f%% Gets), "
      "cross-node share %.2f (placement); medians of %d interleaved run(s).\n",
      base.threads_per_node,
      static_cast<unsigned long long>(base.keys_per_thread), base.value_bytes,
      static_cast<unsigned long long>(base.warmup_ops_per_thread),
      static_cast<unsigned long long>(base.ops_per_thread),
      base.read_share * 100, base.cross_share, runs);
  std::printf("\nLoad average (1, 5, 15 min) at each run's start and end:\n\n");
  for (size_t i = 0; i < loads.size(); ++i) {
    std::printf("- run %zu: %s\n", i + 1, loads[i].c_str());
  }
  for (const Cell& cell : cells) {
    std::printf("\n## %d nodes, remote delay %d ns, %s\n\n", cell.nodes,
                cell.delay_ns, WorkloadName(cell.keys));
    std::printf(
        "| row | Get p50 ns | Get p99 ns | Get mean p1-p99 ns | Set p50 ns | "
        "Mops/s | CPU ns/op | local hits | moved (warm-up + run) | cpu |\n"
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    const auto& by_row = results.at(cell.Key());
    for (const AblationConfig* row : rows) {
      if (row->apply == nullptr) {
        std::printf("| %s | not landed yet: %s | | | | | | | | |\n",
                    std::string(row->label).c_str(),
                    std::string(row->needs).c_str());
        continue;
      }
      const RunResults& r = by_row.at(row->name);
      std::printf(
          "| %s | %.0f | %.0f | %.1f | %.0f | %.2f | %.0f | %.1f%% | %.0f + %.0f | "
          "%.2f |\n",
          std::string(row->label).c_str(),
          MedianOf(r, [](const AblationResult& a) { return a.get_p50_ns; }),
          MedianOf(r, [](const AblationResult& a) { return a.get_p99_ns; }),
          MedianOf(r, [](const AblationResult& a) {
            return a.get_trimmed_mean_ns;
          }),
          MedianOf(r, [](const AblationResult& a) { return a.set_p50_ns; }),
          MedianOf(r, [](const AblationResult& a) { return a.ops_per_second; }) /
              1e6,
          MedianOf(r, [](const AblationResult& a) { return a.cpu_ns_per_op; }),
          100 * MedianOf(r, [](const AblationResult& a) {
            return a.LocalHitShare();
          }),
          MedianOf(r, [](const AblationResult& a) {
            return a.migrations_warmup;
          }),
          MedianOf(r, [](const AblationResult& a) { return a.migrations_run; }),
          MedianOf(r, [](const AblationResult& a) { return a.cpu_share; }));
    }
  }

  std::printf(
      "\n## The report's bar: round-robin Get p50 / thread-local Get p50 "
      ">= %.2f\n\n",
      kBar);
  auto ran = [&rows](std::string_view name) {
    return std::any_of(rows.begin(), rows.end(), [name](const AblationConfig* r) {
      return r->name == name && r->apply != nullptr;
    });
  };
  if (!ran("round_robin") || !ran("thread_local")) {
    std::printf("(needs the round_robin and thread_local rows)\n");
    return;
  }
  std::printf(
      "The timer advances in steps of about 10 ns here, so a p50 moves in "
      "such steps; the ratio of the trimmed means (p1-p99) is the finer "
      "figure beside it.\n\n"
      "| nodes | delay ns | workload | RR p50 ns | TL p50 ns | RR/TL | per-run "
      "RR/TL | bar | RR/TL trimmed mean |\n"
      "|---:|---:|---|---:|---:|---:|---|---|---:|\n");
  for (const Cell& cell : cells) {
    const auto& by_row = results.at(cell.Key());
    const RunResults& rr_runs = by_row.at("round_robin");
    const RunResults& tl_runs = by_row.at("thread_local");
    const double rr_p50 =
        MedianOf(rr_runs, [](const AblationResult& a) { return a.get_p50_ns; });
    const double tl_p50 =
        MedianOf(tl_runs, [](const AblationResult& a) { return a.get_p50_ns; });
    std::vector<std::string> per_run;
    for (size_t i = 0; i < rr_runs.size() && i < tl_runs.size(); ++i) {
      per_run.push_back(absl::StrFormat(
          "%.2f", static_cast<double>(rr_runs[i].get_p50_ns) /
                      std::max<uint64_t>(1, tl_runs[i].get_p50_ns)));
    }
    const double ratio = tl_p50 > 0 ? rr_p50 / tl_p50 : 0;
    auto trimmed = [](const AblationResult& a) { return a.get_trimmed_mean_ns; };
    const double tl_mean = MedianOf(tl_runs, trimmed);
    std::printf("| %d | %d | %s | %.0f | %.0f | %.3f | %s | %s | %.3f |\n",
                cell.nodes, cell.delay_ns, WorkloadName(cell.keys), rr_p50,
                tl_p50, ratio, absl::StrJoin(per_run, " ").c_str(),
                ratio >= kBar ? "met" : "not met",
                tl_mean > 0 ? MedianOf(rr_runs, trimmed) / tl_mean : 0);
  }
}

int Main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "The topology ablation (docs/topology.md): routing rows x simulated "
      "nodes x remote delays x workloads, medians of interleaved runs.\n"
      "  topology_bench [--quick] [--runs=N] [--nodes=2,4] [--delays=0,70,140] "
      "[--csv=FILE]");
  absl::ParseCommandLine(argc, argv);
  const bool quick = absl::GetFlag(FLAGS_quick);

  std::vector<int> nodes;
  std::vector<int> delays;
  if (!ParseList(quick && absl::GetFlag(FLAGS_nodes) == "2,4"
                     ? std::string("2")
                     : absl::GetFlag(FLAGS_nodes),
                 &nodes) ||
      !ParseList(quick && absl::GetFlag(FLAGS_delays) == "0,70,140"
                     ? std::string("0,140")
                     : absl::GetFlag(FLAGS_delays),
                 &delays)) {
    std::fprintf(stderr,
                 "topology_bench: --nodes and --delays take lists of "
                 "non-negative integers\n");
    return 2;
  }
  std::vector<KeyChoice> workloads;
  for (const std::string& w : std::vector<std::string>(absl::StrSplit(
           absl::GetFlag(FLAGS_workloads), ',', absl::SkipEmpty()))) {
    if (w == "placement") {
      workloads.push_back(KeyChoice::kPlacement);
    } else if (w == "uniform") {
      workloads.push_back(KeyChoice::kUniform);
    } else {
      std::fprintf(stderr,
                   "topology_bench: --workloads: unknown \"%s\" (expected "
                   "placement, uniform)\n",
                   w.c_str());
      return 2;
    }
  }
  std::vector<const AblationConfig*> rows;
  for (const std::string& name : std::vector<std::string>(absl::StrSplit(
           absl::GetFlag(FLAGS_configs), ',', absl::SkipEmpty()))) {
    const AblationConfig* row = FindAblationConfig(name);
    if (row == nullptr) {
      std::fprintf(stderr, "topology_bench: --configs: unknown row \"%s\"\n",
                   name.c_str());
      return 2;
    }
    rows.push_back(row);
  }

  AblationCellSpec base;
  base.threads_per_node = absl::GetFlag(FLAGS_threads_per_node);
  base.keys_per_thread = OrDefault(FLAGS_keys_per_thread, uint64_t{5000},
                                   uint64_t{2000});
  base.ops_per_thread = OrDefault(FLAGS_ops_per_thread, uint64_t{300000},
                                  uint64_t{20000});
  base.warmup_ops_per_thread = OrDefault(
      FLAGS_warmup_ops_per_thread, uint64_t{1000000}, uint64_t{20000});
  base.read_share = absl::GetFlag(FLAGS_read_share);
  base.cross_share = absl::GetFlag(FLAGS_cross_share);
  base.value_bytes = absl::GetFlag(FLAGS_value_bytes);
  base.seed = absl::GetFlag(FLAGS_seed);
  const int runs = OrDefault(FLAGS_runs, 5, 1);
  if (runs < 1 || base.threads_per_node < 1 || workloads.empty() ||
      rows.empty() || base.read_share < 0 || base.read_share > 1 ||
      base.cross_share < 0 || base.cross_share > 1) {
    std::fprintf(stderr,
                 "topology_bench: runs, threads per node, workloads and rows "
                 "must be positive; shares in [0, 1]\n");
    return 2;
  }
  for (int n : nodes) {
    if (n < 1) {
      std::fprintf(stderr, "topology_bench: --nodes: at least 1 node\n");
      return 2;
    }
  }
  if (!CycleTimer::InvariantTscAvailable()) {
    std::fprintf(stderr,
                 "topology_bench: no invariant TSC (constant_tsc, nonstop_tsc); "
                 "latencies would be wrong\n");
    return 2;
  }
  base.ticks_per_ns = CycleTimer::TicksPerNs(std::chrono::milliseconds(200));

  FILE* csv = nullptr;
  if (const std::string path = absl::GetFlag(FLAGS_csv); !path.empty()) {
    csv = std::fopen(path.c_str(), "w");
    if (csv == nullptr) {
      std::fprintf(stderr, "topology_bench: cannot write %s\n", path.c_str());
      return 2;
    }
    std::fprintf(csv,
                 "run,nodes,delay_ns,workload,row,get_p50_ns,get_p99_ns,"
                 "set_p50_ns,ops_per_s,gets,hits_local,hits_remote,misses,"
                 "sets,cpu_share,get_trimmed_mean_ns,migrations_warmup,"
                 "migrations_run,cpu_ns_per_op\n");
  }

  std::vector<Cell> cells;
  for (int n : nodes) {
    for (int d : delays) {
      for (KeyChoice w : workloads) cells.push_back({n, d, w});
    }
  }
  std::vector<const AblationConfig*> landed;
  for (const AblationConfig* row : rows) {
    if (row->apply != nullptr) landed.push_back(row);
  }
  Results results;
  std::vector<std::string> loads;
  for (int run = 0; run < runs; ++run) {
    const std::string load_at_start = LoadAverage();
    std::fprintf(stderr, "run %d/%d start, load average %s\n", run + 1, runs,
                 load_at_start.c_str());
    for (const Cell& cell : cells) {
      // Rows take turns within a cell, in an order rotated per run, so that
      // configurations are compared seconds apart and none always follows
      // the same one.
      for (size_t k = 0; k < landed.size(); ++k) {
        const AblationConfig* row = landed[(k + run) % landed.size()];
        AblationCellSpec spec = base;
        spec.config = row;
        spec.nodes = cell.nodes;
        spec.remote_delay_ns = static_cast<uint32_t>(cell.delay_ns);
        spec.keys = cell.keys;
        absl::StatusOr<AblationResult> r = RunAblationCell(spec);
        absl::Status valid = r.ok() ? r->CheckCounts() : r.status();
        if (!valid.ok()) {
          std::fprintf(stderr, "topology_bench: %d nodes, %d ns, %s, %s: %s\n",
                       cell.nodes, cell.delay_ns, WorkloadName(cell.keys),
                       std::string(row->name).c_str(),
                       std::string(valid.message()).c_str());
          return 1;
        }
        std::fprintf(stderr,
                     "run %d/%d  %d nodes %3d ns %-9s %-32s Get p50 %5llu ns "
                     "p99 %6llu ns  %6.2f Mops/s  %6.0f CPU ns/op  local "
                     "%5.1f%%  cpu %.2f\n",
                     run + 1, runs, cell.nodes, cell.delay_ns,
                     WorkloadName(cell.keys), std::string(row->label).c_str(),
                     static_cast<unsigned long long>(r->get_p50_ns),
                     static_cast<unsigned long long>(r->get_p99_ns),
                     r->ops_per_second / 1e6, r->cpu_ns_per_op,
                     100 * r->LocalHitShare(),
                     r->cpu_share);
        if (csv != nullptr) {
          std::fprintf(csv,
                       "%d,%d,%d,%s,%s,%llu,%llu,%llu,%.0f,%llu,%llu,%llu,%llu,"
                       "%llu,%.3f,%.1f,%llu,%llu,%.0f\n",
                       run + 1, cell.nodes, cell.delay_ns,
                       WorkloadName(cell.keys), std::string(row->name).c_str(),
                       static_cast<unsigned long long>(r->get_p50_ns),
                       static_cast<unsigned long long>(r->get_p99_ns),
                       static_cast<unsigned long long>(r->set_p50_ns),
                       r->ops_per_second,
                       static_cast<unsigned long long>(r->gets),
                       static_cast<unsigned long long>(r->hits_local),
                       static_cast<unsigned long long>(r->hits_remote),
                       static_cast<unsigned long long>(r->misses),
                       static_cast<unsigned long long>(r->sets), r->cpu_share,
                       r->get_trimmed_mean_ns,
                       static_cast<unsigned long long>(r->migrations_warmup),
                       static_cast<unsigned long long>(r->migrations_run),
                       r->cpu_ns_per_op);
          std::fflush(csv);
        }
        results[cell.Key()][row->name].push_back(*r);
      }
    }
    const std::string load_at_end = LoadAverage();
    std::fprintf(stderr, "run %d/%d end, load average %s\n", run + 1, runs,
                 load_at_end.c_str());
    loads.push_back(absl::StrCat(load_at_start, " -> ", load_at_end));
  }
  if (csv != nullptr) std::fclose(csv);
  PrintReport(base, runs, loads, cells, rows, results);
  return 0;
}

}  // namespace
}  // namespace furrballs::bench

int main(int argc, char** argv) { return furrballs::bench::Main(argc, argv); }
