// bench/engine/ycsb_bench.cc: the engine-level YCSB benchmark. Runs YCSB
// workloads against FurrBall and its peers at the same memory budget and
// prints one table per configuration (docs/engine_bench.md).
//
// Thread safety: a program. The driver runs every cell in a fresh copy of
// itself (/proc/self/exe --cell=...) so that each backend starts from a clean
// heap and its RSS growth is its own; the cell's process prints one RESULT
// line on stdout.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include <absl/flags/flag.h>
#include <absl/flags/parse.h>
#include <absl/flags/usage.h>
#include <absl/strings/numbers.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_format.h>
#include <absl/strings/str_join.h>
#include <absl/strings/str_split.h>

#include "bench/engine/cache_backend.h"
#include "bench/engine/cycle_timer.h"
#include "bench/engine/furrball_backend.h"
#include "bench/engine/latency_histogram.h"
#include "bench/engine/peer_backends.h"
#include "bench/engine/ycsb_report.h"
#include "bench/engine/ycsb_runner.h"
#include "bench/engine/ycsb_workload.h"

ABSL_FLAG(bool, quick, false,
          "Smoke matrix (<1 min on 2 idle cores): workloads A,C; zipfian; 64 "
          "and 1024 B; 2 threads; working sets 0.5,3; 16 MiB budget; 100000 "
          "ops per thread. "
          "Matrix flags given explicitly override the preset.");
ABSL_FLAG(std::string, backends, "",
          "Comma-separated backends, in table order. Empty = all: "
          "furrball,absl_mutex,tbb,rocksdb_lru,rocksdb_hcc (those built in).");
ABSL_FLAG(std::string, workloads, "",
          "Comma-separated YCSB workloads from A,B,C,F. Empty = A,B,C,F (full) "
          "or A,C (--quick).");
ABSL_FLAG(std::string, distributions, "",
          "Comma-separated key distributions from zipfian,uniform. Empty = "
          "zipfian,uniform (full) or zipfian (--quick).");
ABSL_FLAG(std::string, value_sizes, "",
          "Comma-separated value sizes in bytes. Empty = 64,1024.");
ABSL_FLAG(std::string, threads, "",
          "Comma-separated thread counts. Empty = 1,2 (full) or 2 (--quick).");
ABSL_FLAG(std::string, working_sets, "",
          "Comma-separated working-set sizes as multiples of the budget "
          "(key + value bytes of all records / budget). Empty = 0.5,3.");
ABSL_FLAG(uint64_t, budget_mb, 0,
          "Memory budget of every bounded cache, MiB (FurrBall's value pages, "
          "the RocksDB caches' capacity). 0 = 32 (full) or 16 (--quick).");
ABSL_FLAG(uint64_t, ops_per_thread, 0,
          "Run-phase operations per thread. 0 = 500000 (full) or 100000 "
          "(--quick).");
ABSL_FLAG(int, runs, 1,
          "Runs of the whole matrix; tables and the CSV's median rows report "
          "per-metric medians. Runs are interleaved (whole matrix, then again).");
ABSL_FLAG(uint64_t, key_bytes, 24,
          "Key length: \"user\" + zero-padded decimal record number.");
ABSL_FLAG(double, zipf_theta, 0.99, "Zipfian skew θ (0 < θ < 1).");
ABSL_FLAG(uint64_t, seed, 1, "Seed of the key and operation choices.");
ABSL_FLAG(std::string, csv, "",
          "Also write every run's rows and the median rows to this CSV file.");
ABSL_FLAG(int64_t, furrball_keys_per_node, 0,
          "FurrBall's key slots: 0 = as many as the budget holds with pages "
          "for entries of the workload's key + value size (the engine's "
          "expected_entry_bytes hint); -1 = the engine's default hint; N = "
          "N per node.");
ABSL_FLAG(double, tsc_ticks_per_ns, 0,
          "Internal: the TSC rate the driver measured, passed to each cell. "
          "0 = measure in the cell.");
ABSL_FLAG(std::string, cell, "",
          "Internal: run one cell in this process and print its RESULT line. "
          "Format backend:workload:distribution:value_bytes:threads:working_set.");

namespace furrballs::bench {
namespace {

struct BackendEntry {
  const char* name;
  BackendFactory factory;
};

// Every backend this binary can run, in default table order.
const std::vector<BackendEntry>& AllBackends() {
  static const std::vector<BackendEntry> kBackends = {
      {"furrball", &MakeFurrBallBackend},
      {"absl_mutex", &MakeAbslMutexBackend},
      {"tbb", &MakeTbbBackend},
      {"rocksdb_lru", &MakeRocksDbLruBackend},
      {"rocksdb_hcc", &MakeRocksDbHyperClockBackend},
  };
  return kBackends;
}

BackendFactory FindBackend(std::string_view name) {
  for (const BackendEntry& e : AllBackends()) {
    if (name == e.name) return e.factory;
  }
  return nullptr;
}

[[noreturn]] void Fail(const std::string& message) {
  std::fprintf(stderr, "ycsb_bench: %s\n", message.c_str());
  std::exit(2);
}

std::vector<std::string> SplitList(const std::string& value,
                                   const std::string& preset) {
  return absl::StrSplit(value.empty() ? preset : value, ',', absl::SkipEmpty());
}

template <typename T>
std::vector<T> ParseNumbers(const std::string& value, const std::string& preset,
                            const char* flag) {
  std::vector<T> out;
  for (const std::string& item : SplitList(value, preset)) {
    T v{};
    bool ok;
    if constexpr (std::is_floating_point_v<T>) {
      ok = absl::SimpleAtod(item, &v);
    } else {
      ok = absl::SimpleAtoi(item, &v);
    }
    if (!ok || v <= 0) Fail(absl::StrCat("--", flag, ": bad value '", item, "'"));
    out.push_back(v);
  }
  return out;
}

// The settings shared by every cell, from the flags.
CellSpec BaseSpec(bool quick) {
  CellSpec spec;
  uint64_t budget_mb = absl::GetFlag(FLAGS_budget_mb);
  if (budget_mb == 0) budget_mb = quick ? 16 : 32;
  spec.memory_budget_bytes = budget_mb << 20;
  spec.key_bytes = absl::GetFlag(FLAGS_key_bytes);
  spec.ops_per_thread = absl::GetFlag(FLAGS_ops_per_thread);
  if (spec.ops_per_thread == 0) spec.ops_per_thread = quick ? 100000 : 500000;
  spec.seed = absl::GetFlag(FLAGS_seed);
  spec.furrball_keys_per_node = absl::GetFlag(FLAGS_furrball_keys_per_node);
  spec.zipf_theta = absl::GetFlag(FLAGS_zipf_theta);
  if (spec.key_bytes < 12) {
    Fail("--key_bytes must be at least 12");
  }
  if (!(spec.zipf_theta > 0 && spec.zipf_theta < 1)) {
    Fail("--zipf_theta must be in (0, 1)");
  }
  return spec;
}

std::string CellFlag(const CellSpec& s) {
  return absl::StrCat(s.backend, ":", std::string(1, s.workload.name), ":",
                      DistributionName(s.distribution), ":", s.value_bytes, ":",
                      s.threads, ":", s.working_set_factor);
}

CellSpec ParseCellFlag(const std::string& cell, CellSpec spec) {
  const std::vector<std::string> parts = absl::StrSplit(cell, ':');
  if (parts.size() != 6) Fail(absl::StrCat("--cell: bad value '", cell, "'"));
  spec.backend = parts[0];
  absl::StatusOr<WorkloadMix> workload = ParseWorkload(parts[1]);
  absl::StatusOr<Distribution> distribution = ParseDistribution(parts[2]);
  if (!workload.ok()) Fail(std::string(workload.status().message()));
  if (!distribution.ok()) Fail(std::string(distribution.status().message()));
  spec.workload = *workload;
  spec.distribution = *distribution;
  if (!absl::SimpleAtoi(parts[3], &spec.value_bytes) ||
      !absl::SimpleAtoi(parts[4], &spec.threads) ||
      !absl::SimpleAtod(parts[5], &spec.working_set_factor)) {
    Fail(absl::StrCat("--cell: bad value '", cell, "'"));
  }
  return spec;
}

int RunCellMode(const CellSpec& spec) {
  const BackendFactory factory = FindBackend(spec.backend);
  if (factory == nullptr) Fail(absl::StrCat("unknown backend ", spec.backend));
  absl::StatusOr<CellResult> result = RunCell(spec, factory);
  if (!result.ok()) {
    std::fprintf(stderr, "ycsb_bench: %s: %s\n", CellFlag(spec).c_str(),
                 result.status().ToString().c_str());
    return 1;
  }
  if (!result->note.empty()) std::printf("NOTE %s\n", result->note.c_str());
  std::printf("RESULT %s\n", result->Serialize().c_str());
  return 0;
}

// Runs argv as a child process; returns its stdout, or an error describing
// how it ended. Its stderr goes to ours.
absl::StatusOr<std::string> RunChild(const std::vector<std::string>& args) {
  int fds[2];
  if (pipe(fds) != 0) return absl::InternalError("pipe failed");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, fds[0]);
  posix_spawn_file_actions_addclose(&actions, fds[1]);
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int spawn_error =
      posix_spawn(&pid, "/proc/self/exe", &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (spawn_error != 0) {
    close(fds[0]);
    return absl::InternalError(absl::StrCat("posix_spawn failed: ", spawn_error));
  }
  std::string output;
  char buffer[4096];
  ssize_t n;
  while ((n = read(fds[0], buffer, sizeof(buffer))) > 0) output.append(buffer, n);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFSIGNALED(status)) {
    return absl::InternalError(absl::StrCat("killed by signal ", WTERMSIG(status)));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::InternalError(absl::StrCat("exit status ", WEXITSTATUS(status)));
  }
  return output;
}

// p50 of back-to-back CycleTimer reads: the timer cost included in every
// latency the report prints.
uint64_t TimerOverheadNs(double ticks_per_ns) {
  LatencyHistogram h;
  for (int i = 0; i < 100000; ++i) {
    const uint64_t t0 = CycleTimer::Now();
    const uint64_t t1 = CycleTimer::Now();
    h.Record(static_cast<uint64_t>(static_cast<double>(t1 - t0) / ticks_per_ns + 0.5));
  }
  return h.Percentile(0.5);
}

// The first three fields of /proc/loadavg.
std::string LoadAverage() {
  FILE* f = std::fopen("/proc/loadavg", "r");
  if (f == nullptr) return "unknown";
  double a = 0, b = 0, c = 0;
  const int n = std::fscanf(f, "%lf %lf %lf", &a, &b, &c);
  std::fclose(f);
  return n == 3 ? absl::StrFormat("%.2f/%.2f/%.2f", a, b, c) : "unknown";
}

std::string CpuModel() {
  FILE* f = std::fopen("/proc/cpuinfo", "r");
  if (f == nullptr) return "unknown";
  char line[512];
  std::string model = "unknown";
  while (std::fgets(line, sizeof(line), f) != nullptr) {
    std::string_view l(line);
    if (l.rfind("model name", 0) == 0) {
      const size_t colon = l.find(':');
      if (colon != std::string_view::npos) {
        model = std::string(l.substr(colon + 2));
        if (!model.empty() && model.back() == '\n') model.pop_back();
      }
      break;
    }
  }
  std::fclose(f);
  return model;
}

int RunDriver(int argc, char** argv) {
  const bool quick = absl::GetFlag(FLAGS_quick);
  const CellSpec base = BaseSpec(quick);

  std::vector<std::string> all_names;
  for (const BackendEntry& e : AllBackends()) all_names.push_back(e.name);
  const std::vector<std::string> backends =
      SplitList(absl::GetFlag(FLAGS_backends), absl::StrJoin(all_names, ","));
  for (const std::string& b : backends) {
    if (FindBackend(b) == nullptr) {
      Fail(absl::StrCat("--backends: unknown backend '", b, "' (built: ",
                        absl::StrJoin(all_names, ","), ")"));
    }
  }
  std::vector<WorkloadMix> workloads;
  for (const std::string& w :
       SplitList(absl::GetFlag(FLAGS_workloads), quick ? "A,C" : "A,B,C,F")) {
    absl::StatusOr<WorkloadMix> mix = ParseWorkload(w);
    if (!mix.ok()) Fail(std::string(mix.status().message()));
    workloads.push_back(*mix);
  }
  std::vector<Distribution> distributions;
  for (const std::string& d : SplitList(absl::GetFlag(FLAGS_distributions),
                                        quick ? "zipfian" : "zipfian,uniform")) {
    absl::StatusOr<Distribution> dist = ParseDistribution(d);
    if (!dist.ok()) Fail(std::string(dist.status().message()));
    distributions.push_back(*dist);
  }
  const std::vector<size_t> value_sizes =
      ParseNumbers<size_t>(absl::GetFlag(FLAGS_value_sizes), "64,1024", "value_sizes");
  const std::vector<int> thread_counts =
      ParseNumbers<int>(absl::GetFlag(FLAGS_threads), quick ? "2" : "1,2", "threads");
  const std::vector<double> working_sets = ParseNumbers<double>(
      absl::GetFlag(FLAGS_working_sets), "0.5,3", "working_sets");
  const int runs = absl::GetFlag(FLAGS_runs);
  if (runs < 1) Fail("--runs must be at least 1");

  // Matrix order: configuration-major, backends adjacent, so that the peers
  // of one table run close together in time.
  std::vector<CellSpec> matrix;
  for (const WorkloadMix& w : workloads) {
    for (Distribution d : distributions) {
      for (size_t v : value_sizes) {
        for (int t : thread_counts) {
          for (double ws : working_sets) {
            for (const std::string& b : backends) {
              CellSpec spec = base;
              spec.backend = b;
              spec.workload = w;
              spec.distribution = d;
              spec.value_bytes = v;
              spec.threads = t;
              spec.working_set_factor = ws;
              matrix.push_back(spec);
            }
          }
        }
      }
    }
  }

  const std::vector<std::string> passthrough = {
      absl::StrCat("--budget_mb=", base.memory_budget_bytes >> 20),
      absl::StrCat("--key_bytes=", base.key_bytes),
      absl::StrCat("--ops_per_thread=", base.ops_per_thread),
      absl::StrCat("--seed=", base.seed),
      absl::StrCat("--furrball_keys_per_node=", absl::GetFlag(FLAGS_furrball_keys_per_node)),
      absl::StrCat("--zipf_theta=", absl::StrFormat("%.17g", base.zipf_theta)),
  };
  if (!CycleTimer::InvariantTscAvailable()) {
    Fail("needs an invariant TSC (constant_tsc, nonstop_tsc in /proc/cpuinfo)");
  }
  const double ticks_per_ns = CycleTimer::TicksPerNs(std::chrono::milliseconds(200));
  const std::string tsc_flag =
      absl::StrCat("--tsc_ticks_per_ns=", absl::StrFormat("%.17g", ticks_per_ns));
  const uint64_t timer_ns = TimerOverheadNs(ticks_per_ns);
  const std::string load_before = LoadAverage();
  const auto started = std::chrono::steady_clock::now();
  std::vector<Measurement> measurements;
  const size_t total = matrix.size() * static_cast<size_t>(runs);
  size_t done = 0;
  for (int run = 1; run <= runs; ++run) {
    for (const CellSpec& spec : matrix) {
      ++done;
      std::fprintf(stderr, "[%zu/%zu] run %d/%d %s ... ", done, total, run, runs,
                   CellFlag(spec).c_str());
      std::fflush(stderr);
      std::vector<std::string> args = {argv[0],
                                       absl::StrCat("--cell=", CellFlag(spec))};
      args.insert(args.end(), passthrough.begin(), passthrough.end());
      args.push_back(tsc_flag);
      Measurement m;
      m.spec = spec;
      m.run = run;
      absl::StatusOr<std::string> output = RunChild(args);
      if (output.ok()) {
        const size_t at = output->rfind("RESULT ");
        absl::StatusOr<CellResult> parsed =
            at == std::string::npos
                ? absl::InternalError("no RESULT line")
                : CellResult::Parse(std::string_view(*output).substr(at + 7));
        if (parsed.ok()) {
          m.ok = true;
          m.result = *parsed;
          const size_t note = output->find("NOTE ");
          if (note != std::string::npos) {
            const size_t end = output->find('\n', note);
            m.result.note = output->substr(note + 5, end == std::string::npos
                                                         ? std::string::npos
                                                         : end - note - 5);
          }
        } else {
          m.error = std::string(parsed.status().message());
        }
      } else {
        m.error = std::string(output.status().message());
      }
      if (m.ok) {
        std::fprintf(stderr, "%.2fM ops/s, hit %.1f%%, cpu %.0f%%, load %.1f s\n",
                     m.result.ops_per_second / 1e6, 100 * m.result.HitRatio(),
                     100 * m.result.run_cpu_share, m.result.load_seconds);
      } else {
        std::fprintf(stderr, "FAILED: %s\n", m.error.c_str());
      }
      measurements.push_back(std::move(m));
    }
  }
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();

  const std::string reference = "furrball";
  std::printf("## Engine YCSB benchmark\n\n");
  std::printf("- command: `%s`\n", absl::StrJoin(argv, argv + argc, " ").c_str());
  std::printf("- machine: %s, %u hardware threads\n", CpuModel().c_str(),
              std::thread::hardware_concurrency());
  std::printf("- budget %llu MiB per bounded cache; keys %zu B; %llu ops per "
              "thread; seed %llu; %d run(s), tables show per-metric medians\n",
              static_cast<unsigned long long>(base.memory_budget_bytes >> 20),
              base.key_bytes, static_cast<unsigned long long>(base.ops_per_thread),
              static_cast<unsigned long long>(base.seed), runs);
  std::printf("- latencies are LFENCE+RDTSC intervals (TSC %.3f GHz) and include "
              "one timer read: back-to-back reads take %llu ns (p50) here\n",
              ticks_per_ns, static_cast<unsigned long long>(timer_ns));
  std::printf("- %zu cells in %.0f s; load average (1/5/15 min) %s before, %s "
              "after; cpu %% = the run threads' CPU time over threads x wall "
              "time (low = other processes took the CPUs)\n\n",
              total, elapsed, load_before.c_str(), LoadAverage().c_str());
  std::printf("%s", FormatReport(measurements, backends, reference).c_str());

  const std::string csv = absl::GetFlag(FLAGS_csv);
  if (!csv.empty()) {
    const absl::Status status = WriteCsv(csv, measurements, backends);
    if (!status.ok()) Fail(std::string(status.message()));
    std::fprintf(stderr, "wrote %s\n", csv.c_str());
  }
  const bool any_failed = std::any_of(measurements.begin(), measurements.end(),
                                      [](const Measurement& m) { return !m.ok; });
  return any_failed ? 1 : 0;
}

}  // namespace
}  // namespace furrballs::bench

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "YCSB workloads A/B/C/F against FurrBall and its peers at one memory "
      "budget.\n  ycsb_bench [--quick] [--runs=N] [--csv=path] [matrix flags]\n"
      "Prints markdown tables on stdout and progress on stderr.");
  absl::ParseCommandLine(argc, argv);
  const std::string cell = absl::GetFlag(FLAGS_cell);
  if (!cell.empty()) {
    furrballs::bench::CellSpec spec = furrballs::bench::ParseCellFlag(
        cell, furrballs::bench::BaseSpec(/*quick=*/false));
    spec.ticks_per_ns = absl::GetFlag(FLAGS_tsc_ticks_per_ns);
    return furrballs::bench::RunCellMode(spec);
  }
  return furrballs::bench::RunDriver(argc, argv);
}
