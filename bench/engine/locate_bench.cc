// bench/engine/locate_bench.cc: how a Get finds a key under round-robin
// routing (engine/furrball/key_locator.h): scan, broadcast race, each with
// and without the location cache, and the automatic choice, on simulated
// topologies with an injected remote delay (report §5.8's method).
//
// A quick driver, not the ablation harness (bench/topology): one FurrBall per
// configuration, keys written round-robin from the main thread, then one
// reader thread (not a node worker, so it may race) reading present keys
// uniformly at random for --seconds per configuration. In a round every
// configuration's cache is open at once and they are read in turns of
// --seconds / 20, so that load from elsewhere on a shared machine falls on
// all of them alike; the table shows medians over the rounds. Prints Gets/s, p50 and p99 (TSC-timed per Get), the process's CPU
// time per Get (the reader's and the workers' a race wakes: on a shared
// machine steadier than Gets/s, which follows what the scheduler gives),
// races per million Gets and the share of Gets that found their node in the
// location cache.
//
//   bazel run -c opt //bench/engine:locate_bench -- --rounds=3
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <absl/flags/flag.h>
#include <absl/flags/parse.h>
#include <absl/strings/numbers.h>
#include <absl/strings/str_split.h>

#include "bench/engine/cycle_timer.h"
#include "bench/engine/latency_histogram.h"
#include "bench/engine/ycsb_runner.h"
#include "engine/furrball/furrball.h"

ABSL_FLAG(std::string, nodes, "2,4", "Simulated node counts.");
ABSL_FLAG(std::string, delays_ns, "70,140",
          "Injected remote-access delays (ns).");
ABSL_FLAG(int, rounds, 3, "Rounds; each runs every configuration once.");
ABSL_FLAG(double, seconds, 1.0,
          "Reading time per configuration and round, in 20 slices taken in "
          "turn with the other configurations.");
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
  double raced = 0;        // races per million Gets
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

// User + system CPU time of the whole process, in ns (ycsb_runner.h's
// clock, finer than getrusage's ticks).
double ProcessCpuNs() { return ProcessCpuSeconds() * 1e9; }

// One configuration's cache, its keys, and what its slices measured.
struct Subject {
  const Config* config = nullptr;
  std::unique_ptr<FurrBall> ball;
  std::vector<std::string> names;
  std::vector<KeyRef> refs;
  LatencyHistogram histogram;
  uint64_t gets = 0;
  uint64_t found = 0;
  double seconds = 0;
  double cpu_ns = 0;
  uint64_t races_before = 0, hits_before = 0;
};

// Races and location-cache hits so far, over the nodes.
std::pair<uint64_t, uint64_t> Totals(const FurrBall& ball) {
  uint64_t races = 0, hits = 0;
  for (const NodeStatsSnapshot& s : ball.Stats()) {
    races += s.races;
    hits += s.location_hits;
  }
  return {races, hits};
}

std::unique_ptr<FurrBall> OpenFor(int nodes, int delay_ns,
                                  const Config& config) {
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
  return *std::move(opened);
}

// Reads random present keys of `s` for `seconds`.
void ReadSlice(Subject& s, double seconds, double ticks_per_ns,
               std::mt19937_64& rng) {
  std::string out;
  const double cpu_start = ProcessCpuNs();
  const auto start = std::chrono::steady_clock::now();
  const auto end =
      start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                  std::chrono::duration<double>(seconds));
  do {
    for (int i = 0; i < 64; ++i) {
      const KeyRef& k = s.refs[rng() % s.refs.size()];
      const uint64_t t0 = CycleTimer::Now();
      s.found += s.ball->Get(k, &out).found;
      s.histogram.Record(
          static_cast<uint64_t>((CycleTimer::Now() - t0) / ticks_per_ns));
      ++s.gets;
    }
  } while (std::chrono::steady_clock::now() < end);
  s.seconds += std::chrono::duration<double>(
                   std::chrono::steady_clock::now() - start)
                   .count();
  s.cpu_ns += ProcessCpuNs() - cpu_start;
}

// One round: every configuration's cache opened and filled, then read in
// kSlices slices each, the configurations taking turns, so that load from
// elsewhere on the machine falls on all of them alike.
std::vector<Sample> RunRound(int nodes, int delay_ns, double ticks_per_ns,
                             int round) {
  constexpr int kSlices = 20;
  const int keys = absl::GetFlag(FLAGS_keys);
  const std::string value(absl::GetFlag(FLAGS_value_bytes), 'v');
  std::vector<Subject> subjects(sizeof(kConfigs) / sizeof(kConfigs[0]));
  for (size_t c = 0; c < subjects.size(); ++c) {
    Subject& s = subjects[c];
    s.config = &kConfigs[c];
    s.ball = OpenFor(nodes, delay_ns, kConfigs[c]);
    for (int i = 0; i < keys; ++i) s.names.push_back(Key(i));
    for (int i = 0; i < keys; ++i) {
      s.refs.push_back(s.ball->Ref(s.names[i]));
      s.ball->Set(s.refs[i], value);
    }
    // The writes' own lookups are not Gets.
    std::tie(s.races_before, s.hits_before) = Totals(*s.ball);
  }
  std::mt19937_64 rng(42 + round);
  const double slice = absl::GetFlag(FLAGS_seconds) / kSlices;
  for (int k = 0; k < kSlices; ++k) {
    for (size_t j = 0; j < subjects.size(); ++j) {
      ReadSlice(subjects[(j + k + round) % subjects.size()], slice,
                ticks_per_ns, rng);
    }
  }
  std::vector<Sample> out;
  for (Subject& s : subjects) {
    if (s.found != s.gets) {
      std::fprintf(stderr, "%s: %llu of %llu Gets missed a present key\n",
                   s.config->name,
                   static_cast<unsigned long long>(s.gets - s.found),
                   static_cast<unsigned long long>(s.gets));
      std::exit(1);
    }
    const auto [races, hits] = Totals(*s.ball);
    Sample r;
    r.gets_per_s = s.gets / s.seconds;
    r.p50_ns = static_cast<double>(s.histogram.Percentile(0.50));
    r.p99_ns = static_cast<double>(s.histogram.Percentile(0.99));
    r.cpu_ns = s.cpu_ns / s.gets;
    r.raced = 1e6 * static_cast<double>(races - s.races_before) / s.gets;
    r.cache_hits = static_cast<double>(hits - s.hits_before) / s.gets;
    out.push_back(r);
  }
  return out;
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
  std::printf("%-5s %-6s %-11s %10s %8s %8s %9s %9s %9s\n", "nodes", "delay",
              "locate", "Gets/s", "p50 ns", "p99 ns", "CPU ns", "races/1M",
              "cache hit");
  for (int nodes : node_counts) {
    for (int delay : delays) {
      std::vector<std::vector<Sample>> samples(kN);
      for (int r = 0; r < rounds; ++r) {
        const std::vector<Sample> round =
            RunRound(nodes, delay, ticks_per_ns, r);
        for (size_t c = 0; c < kN; ++c) samples[c].push_back(round[c]);
      }
      for (size_t c = 0; c < kN; ++c) {
        auto field = [&](double Sample::*f) {
          std::vector<double> v;
          for (const Sample& s : samples[c]) v.push_back(s.*f);
          return Median(v);
        };
        std::printf("%-5d %-6d %-11s %10.0f %8.0f %8.0f %9.0f %9.0f %9.3f\n",
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
