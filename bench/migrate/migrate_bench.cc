// bench/migrate/migrate_bench.cc: keys following their readers
// (FurrBallOptions::migrate_to_readers), a quick driver for issue 16's
// placement case: a simulated topology with an injected remote delay
// (report §5.8), one reader thread per node bound to it, thread-local
// routing, each thread preferring its own key set (Zipfian), read-mostly.
//
//   placement   one loader on node 0 writes every thread's keys, so they all
//               start on node 0 (the case migration is for): node 0's thread
//               reads locally, the others remotely until their keys move.
//   all_local   each thread writes its own keys from its own node and reads
//               only them: every hit is local, so this shows what counting
//               (one Get in 16 per thread) costs a local hit.
//
// Each configuration runs with migration off and on, interleaved, --runs
// times; the table shows medians of Get throughput and of the share of hits
// served locally during the run phase. Thread safety: single-threaded
// driver; the reader threads share only the cache and an atomic start flag.
#include <sched.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <absl/flags/flag.h>
#include <absl/flags/parse.h>
#include <absl/strings/str_cat.h>

#include "bench/engine/ycsb_workload.h"
#include "engine/furrball/furrball.h"
#include "engine/furrball/node_thread_testing.h"

ABSL_FLAG(int, nodes, 2, "simulated nodes (one reader thread each)");
ABSL_FLAG(uint32_t, remote_delay_ns, 140,
          "busy-wait injected on every simulated remote access");
ABSL_FLAG(int, runs, 3, "interleaved repetitions; the table shows medians");
ABSL_FLAG(uint64_t, keys_per_thread, 20000, "each thread's own key set");
ABSL_FLAG(uint64_t, ops_per_thread, 1000000, "run-phase operations");
ABSL_FLAG(double, other_share, 0.1,
          "share of a thread's Gets that read another thread's keys");
ABSL_FLAG(double, set_share, 0.05, "share of operations that are Sets");
ABSL_FLAG(uint32_t, value_bytes, 64, "value size");
ABSL_FLAG(std::vector<std::string>, cases,
          std::vector<std::string>({"placement", "all_local"}),
          "which cases to run: placement, all_local");

namespace furrballs {
namespace {

using bench::Rng;
using bench::ScrambledZipfianGenerator;

std::string Key(int thread, uint64_t i) {
  return absl::StrCat("t", thread, "-", i);
}

// Runs fn on node `node`'s worker and waits (the worker is pinned there).
void OnWorker(FurrBall& ball, int node, const std::function<void()>& fn) {
  if (furrball_testing::RunOnNode(ball, node, fn) != Error::kOk) {
    std::fprintf(stderr, "SubmitToNode(%d) failed\n", node);
    std::exit(1);
  }
}

// The calling thread's CPU time.
double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

struct Result {
  double gets_per_s = 0;
  // Gets per second of the reader threads' own CPU time, summed over
  // threads: what a busy shared machine disturbs least (wall-clock rates
  // move with other processes' load; this moves with cache interference
  // only).
  double gets_per_cpu_s = 0;
  double local_share = 0;
  uint64_t migrations = 0;
};

Result RunOnce(bool placement, bool migrate) {
  const int nodes = absl::GetFlag(FLAGS_nodes);
  const uint64_t keys = absl::GetFlag(FLAGS_keys_per_thread);
  const uint64_t ops = absl::GetFlag(FLAGS_ops_per_thread);
  const double other = placement ? absl::GetFlag(FLAGS_other_share) : 0;
  const double sets = absl::GetFlag(FLAGS_set_share);
  const std::string value(absl::GetFlag(FLAGS_value_bytes), 'v');

  FurrBallOptions o;
  o.node_count = nodes;
  o.simulate_topology = true;
  o.simulated_remote_delay_ns = absl::GetFlag(FLAGS_remote_delay_ns);
  o.routing = RoutingPolicy::kThreadLocal;
  o.migrate_to_readers = migrate;
  o.memory_budget_bytes = size_t{256} << 20;  // everything fits
  absl::StatusOr<std::unique_ptr<FurrBall>> opened = FurrBall::Open(o);
  if (!opened.ok()) {
    std::fprintf(stderr, "%s\n", opened.status().ToString().c_str());
    std::exit(1);
  }
  FurrBall& ball = **opened;

  std::vector<cpu_set_t> cpus(nodes);
  for (int n = 0; n < nodes; ++n) {
    cpus[n] = furrball_testing::CpusOfNode(ball, n);
  }
  for (int t = 0; t < nodes; ++t) {
    OnWorker(ball, placement ? 0 : t, [&] {
      for (uint64_t i = 0; i < keys; ++i) ball.Set(Key(t, i), value);
    });
  }
  uint64_t local0 = 0, remote0 = 0;
  for (const NodeStatsSnapshot& s : ball.Stats()) {
    local0 += s.hits_local;
    remote0 += s.hits_remote;
  }

  std::atomic<bool> go{false};
  std::atomic<uint64_t> gets{0};
  std::vector<double> cpu_secs(nodes);
  std::vector<std::thread> threads;
  for (int t = 0; t < nodes; ++t) {
    threads.emplace_back([&, t] {
      sched_setaffinity(0, sizeof(cpus[t]), &cpus[t]);
      const ScrambledZipfianGenerator zipf(keys, 0.99);
      Rng rng(1000 + t);
      std::string v;
      uint64_t my_gets = 0;
      while (!go.load(std::memory_order_acquire)) {
      }
      const double cpu0 = ThreadCpuSeconds();
      for (uint64_t i = 0; i < ops; ++i) {
        const double op = rng.NextDouble();
        int owner = t;
        if (op >= sets && rng.NextDouble() < other) {
          owner = static_cast<int>((t + 1 + rng.NextBelow(nodes - 1)) % nodes);
        }
        const std::string key = Key(owner, zipf.Next(rng));
        if (op < sets) {
          ball.Set(key, value);
        } else {
          ball.Get(key, &v);
          ++my_gets;
        }
      }
      cpu_secs[t] = ThreadCpuSeconds() - cpu0;
      gets.fetch_add(my_gets);
    });
  }
  const auto start = std::chrono::steady_clock::now();
  go.store(true, std::memory_order_release);
  for (std::thread& t : threads) t.join();
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();

  Result r;
  uint64_t local = 0, remote = 0;
  for (const NodeStatsSnapshot& s : ball.Stats()) {
    local += s.hits_local;
    remote += s.hits_remote;
    r.migrations += s.migrations_in;
  }
  local -= local0;
  remote -= remote0;
  r.gets_per_s = static_cast<double>(gets.load()) / secs;
  double cpu = 0;
  for (double c : cpu_secs) cpu += c;
  r.gets_per_cpu_s = static_cast<double>(gets.load()) / cpu * nodes;
  r.local_share = local + remote == 0
                      ? 0
                      : static_cast<double>(local) / (local + remote);
  return r;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace
}  // namespace furrballs

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  using furrballs::Result;
  struct Config {
    const char* name;
    bool placement;
    bool migrate;
    std::vector<Result> results;
  };
  std::vector<Config> configs;
  for (const std::string& name : absl::GetFlag(FLAGS_cases)) {
    if (name != "placement" && name != "all_local") {
      std::fprintf(stderr, "--cases: unknown case '%s'\n", name.c_str());
      return 2;
    }
    const bool placement = name == "placement";
    configs.push_back({placement ? "placement" : "all_local", placement, false, {}});
    configs.push_back({placement ? "placement" : "all_local", placement, true, {}});
  }
  const int runs = absl::GetFlag(FLAGS_runs);
  for (int run = 0; run < runs; ++run) {
    for (Config& c : configs) {
      c.results.push_back(furrballs::RunOnce(c.placement, c.migrate));
      const Result& r = c.results.back();
      std::fprintf(stderr,
                   "run %d %s migrate=%d: %.0f gets/s, %.0f per CPU-s x "
                   "threads, local %.3f, %llu moves\n",
                   run, c.name, c.migrate, r.gets_per_s, r.gets_per_cpu_s,
                   r.local_share,
                   static_cast<unsigned long long>(r.migrations));
    }
  }
  std::printf(
      "| case | migration | Get/s, wall (median of %d) | Get/s, per "
      "reader CPU time x threads | local share of hits | moves |\n",
      runs);
  std::printf("| --- | --- | --- | --- | --- | --- |\n");
  for (const Config& c : configs) {
    std::vector<double> gets, cpu, local, moves;
    for (const Result& r : c.results) {
      gets.push_back(r.gets_per_s);
      cpu.push_back(r.gets_per_cpu_s);
      local.push_back(r.local_share);
      moves.push_back(static_cast<double>(r.migrations));
    }
    std::printf("| %s | %s | %.0f | %.0f | %.3f | %.0f |\n", c.name,
                c.migrate ? "on" : "off", furrballs::Median(gets),
                furrballs::Median(cpu),
                furrballs::Median(local), furrballs::Median(moves));
  }
  return 0;
}
