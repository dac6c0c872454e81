// bench/engine/locate_bench.cc: how a Get finds a key under round-robin
// routing (engine/furrball/key_locator.h): scan, broadcast race, each with
// and without the location cache, and the automatic choice, on simulated
// topologies with an injected remote delay (report §5.8's method).
//
// A quick driver, not the ablation harness (bench/topology): one FurrBall per
// configuration, keys written round-robin from the main thread, then one
// reader thread (not a node worker, so it may race) reading present keys
// uniformly at random for --seconds. Configurations of one round run one
// after another, rounds interleaved; the table shows medians over the
// rounds. Prints Gets/s, p50 and p99 (TSC-timed per Get), the process's CPU
// time per Get (the reader's and the workers' a race wakes: on a shared
// machine steadier than Gets/s, which follows what the scheduler gives), the
// share of Gets that raced and that found their node in the location cache.
//
//   bazel run -c opt //bench/engine:locate_bench -- --rounds=3
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <sys/resource.h>

#include <absl/flags/flag.h>
#include <absl/flags/parse.h>
#include <absl/strings/numbers.h>
#include <absl/strings/str_split.h>

#include "bench/engine/cycle_timer.h"
#include "bench/engine/latency_histogram.h"
#include "engine/furrball/furrball.h"

ABSL_FLAG(std::string, nodes, "2,4", "Simulated node counts.");
ABSL_FLAG(std::string, delays_ns, "70,140",
          "Injected remote-access delays (ns).");
ABSL_FLAG(int, rounds, 3, "Rounds; each runs every configuration once.");
ABSL_FLAG(double, seconds, 1.0, "Reading time per configuration and round.");
ABSL_FLAG(int, keys, 20000, "Keys written before reading.");
ABSL_FLAG(int, value_bytes, 64, "Value size.");

namespace furrballs::bench {
namespace {

struct Config {
  const char* name;
  LocatePolicy locate;
  bool cache;
};

constexpr Config kConfigs[] = {
    {"scan", LocatePolicy::kScan, false},
    {"race", LocatePolicy::kRace, false},
    {"scan+cache", LocatePolicy::kScan, true},
    {"race+cache", LocatePolicy::kRace, true},
    {"auto", LocatePolicy::kAuto, false},
    {"auto+cache", LocatePolicy::kAuto, true},
};

struct Sample {
  double gets_per_s = 0;
  double p50_ns = 0;
  double p99_ns = 0;
  double cpu_ns = 0;       // process CPU time per Get
  double raced = 0;        // races per Get
  double cache_hits = 0;   // location-cache hits per Get
};

std::vector<int> Ints(const std::string& list) {
  std::vector<int> out;
  for (absl::string_view part : absl::StrSplit(list, ',')) {
    int v = 0;
    if (absl::SimpleAtoi(part, &v)) out.push_back(v);
  }
  return out;
}

std::string Key(int i) { return "key:" + std::to_string(i); }

// User + system CPU time of the whole process, in ns.
double ProcessCpuNs() {
  rusage u;
  getrusage(RUSAGE_SELF, &u);
  auto ns = [](const timeval& t) { return t.tv_sec * 1e9 + t.tv_usec * 1e3; };
  return ns(u.ru_utime) + ns(u.ru_stime);
}

Sample RunOne(int nodes, int delay_ns, const Config& config,
              double ticks_per_ns) {
  FurrBallOptions o;
  o.node_count = nodes;
  o.simulate_topology = true;
  o.simulated_remote_delay_ns = static_cast<uint32_t>(delay_ns);
  o.routing = RoutingPolicy::kRoundRobin;
  o.locate = config.locate;
  o.location_cache = config.cache;
  o.memory_budget_bytes = size_t{64} << 20;
  absl::StatusOr<std::unique_ptr<FurrBall>> opened = FurrBall::Open(o);
  if (!opened.ok()) {
    std::fprintf(stderr, "open: %s\n", opened.status().ToString().c_str());
    std::exit(1);
  }
  FurrBall& ball = **opened;
  const int keys = absl::GetFlag(FLAGS_keys);
  const std::string value(absl::GetFlag(FLAGS_value_bytes), 'v');
  std::vector<KeyRef> refs;
  std::vector<std::string> names;
  names.reserve(keys);
  for (int i = 0; i < keys; ++i) names.push_back(Key(i));
  for (int i = 0; i < keys; ++i) {
    refs.push_back(ball.Ref(names[i]));
    ball.Set(refs[i], value);
  }
  // Cache hits and races so far (the writes' own lookups are not Gets).
  auto totals = [&] {
    uint64_t races = 0, hits = 0;
    for (const NodeStatsSnapshot& s : ball.Stats()) {
      races += s.races;
      hits += s.location_hits;
    }
    return std::make_pair(races, hits);
  };
  const auto before = totals();
  LatencyHistogram histogram;
  std::mt19937_64 rng(42);
  std::string out;
  uint64_t gets = 0, found = 0;
  const double cpu_start = ProcessCpuNs();
  const auto start = std::chrono::steady_clock::now();
  const auto end =
      start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                  std::chrono::duration<double>(absl::GetFlag(FLAGS_seconds)));
  while (true) {
    for (int i = 0; i < 256; ++i) {
      const KeyRef& k = refs[rng() % refs.size()];
      const uint64_t t0 = CycleTimer::Now();
      found += ball.Get(k, &out).found;
      histogram.Record(
          static_cast<uint64_t>((CycleTimer::Now() - t0) / ticks_per_ns));
      ++gets;
    }
    if (std::chrono::steady_clock::now() >= end) break;
  }
  const double elapsed = std::chrono::duration<double>(
                             std::chrono::steady_clock::now() - start)
                             .count();
  const double cpu_ns = ProcessCpuNs() - cpu_start;
  if (found != gets) {
    std::fprintf(stderr, "%s: %llu of %llu Gets missed a present key\n",
                 config.name,
                 static_cast<unsigned long long>(gets - found),
                 static_cast<unsigned long long>(gets));
    std::exit(1);
  }
  const auto after = totals();
  Sample s;
  s.gets_per_s = gets / elapsed;
  s.p50_ns = static_cast<double>(histogram.Percentile(0.50));
  s.p99_ns = static_cast<double>(histogram.Percentile(0.99));
  s.cpu_ns = cpu_ns / gets;
  s.raced = static_cast<double>(after.first - before.first) / gets;
  s.cache_hits = static_cast<double>(after.second - before.second) / gets;
  return s;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace
}  // namespace furrballs::bench

int main(int argc, char** argv) {
  using namespace furrballs::bench;
  absl::ParseCommandLine(argc, argv);
  if (!CycleTimer::InvariantTscAvailable()) {
    std::fprintf(stderr, "no invariant TSC: per-Get times would be wrong\n");
    return 1;
  }
  const double ticks_per_ns =
      CycleTimer::TicksPerNs(std::chrono::milliseconds(200));
  const std::vector<int> node_counts = Ints(absl::GetFlag(FLAGS_nodes));
  const std::vector<int> delays = Ints(absl::GetFlag(FLAGS_delays_ns));
  const int rounds = absl::GetFlag(FLAGS_rounds);
  constexpr size_t kN = sizeof(kConfigs) / sizeof(kConfigs[0]);
  std::printf("round-robin routing, %d keys of %d B, 1 reader, uniform; "
              "medians of %d rounds\n",
              absl::GetFlag(FLAGS_keys), absl::GetFlag(FLAGS_value_bytes),
              rounds);
  std::printf("%-5s %-6s %-11s %10s %8s %8s %9s %7s %9s\n", "nodes", "delay",
              "locate", "Gets/s", "p50 ns", "p99 ns", "CPU ns", "raced",
              "cache hit");
  for (int nodes : node_counts) {
    for (int delay : delays) {
      std::vector<std::vector<Sample>> samples(kN);
      for (int r = 0; r < rounds; ++r) {
        // Each round starts at another configuration, so that none always
        // runs first (or right after the same neighbour) while other load
        // on the machine comes and goes.
        for (size_t k = 0; k < kN; ++k) {
          const size_t c = (k + r) % kN;
          samples[c].push_back(RunOne(nodes, delay, kConfigs[c], ticks_per_ns));
        }
      }
      for (size_t c = 0; c < kN; ++c) {
        auto field = [&](double Sample::*f) {
          std::vector<double> v;
          for (const Sample& s : samples[c]) v.push_back(s.*f);
          return Median(v);
        };
        std::printf("%-5d %-6d %-11s %10.0f %8.0f %8.0f %9.0f %7.4f %9.3f\n",
                    nodes, delay, kConfigs[c].name, field(&Sample::gets_per_s),
                    field(&Sample::p50_ns), field(&Sample::p99_ns),
                    field(&Sample::cpu_ns), field(&Sample::raced),
                    field(&Sample::cache_hits));
      }
      std::fflush(stdout);
    }
  }
  return 0;
}
