#include "bench/topology/ablation.h"

#include <sched.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <latch>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <absl/strings/str_cat.h>

#include "bench/engine/cycle_timer.h"
#include "bench/engine/latency_histogram.h"
#include "bench/engine/ycsb_runner.h"
#include "bench/engine/ycsb_workload.h"
#include "engine/furrball/furrball.h"

namespace furrballs::bench {
namespace {

constexpr size_t kKeyBytes = 24;  // as the engine benchmark's keys

// The table, one line per row. A feature that lands on main gets its row's
// `apply` here; until then the row is reported as not landed.
// The search rows set locate and location_cache explicitly: the engine's
// defaults for them (kAuto, cache on) would make round-robin and
// thread-local something other than the report's sequential probe.
void Scan(FurrBallOptions& o) {
  o.locate = LocatePolicy::kScan;
  o.location_cache = false;
}

constexpr std::array<AblationConfig, 8> kConfigs{{
    {"hash", "hash", [](FurrBallOptions& o) { o.routing = RoutingPolicy::kHash; },
     ""},
    {"round_robin", "round-robin",
     [](FurrBallOptions& o) {
       o.routing = RoutingPolicy::kRoundRobin;
       Scan(o);
     },
     ""},
    {"thread_local", "thread-local",
     [](FurrBallOptions& o) {
       o.routing = RoutingPolicy::kThreadLocal;
       Scan(o);
     },
     ""},
    {"thread_local_migrate", "thread-local + migration",
     [](FurrBallOptions& o) {
       o.routing = RoutingPolicy::kThreadLocal;
       Scan(o);
       o.migrate_to_readers = true;
     },
     ""},
    // Where migration has work to do: keys spread over the nodes but read
    // mostly from one.
    {"round_robin_migrate", "round-robin + migration",
     [](FurrBallOptions& o) {
       o.routing = RoutingPolicy::kRoundRobin;
       Scan(o);
       o.migrate_to_readers = true;
     },
     ""},
    // What --routing=round_robin gets by default since the location cache
    // landed: the cache's hint first, then scan or race as the fail-safe
    // decides (LocatePolicy::kAuto).
    {"round_robin_defaults", "round-robin + location cache (auto)",
     [](FurrBallOptions& o) { o.routing = RoutingPolicy::kRoundRobin; }, ""},
    // The report's Phase 4 rows, on thread-local placement.
    {"race", "thread-local + broadcast-race",
     [](FurrBallOptions& o) {
       o.routing = RoutingPolicy::kThreadLocal;
       o.locate = LocatePolicy::kRace;
       o.location_cache = false;
     },
     ""},
    {"race_location_cache", "thread-local + broadcast-race + location cache",
     [](FurrBallOptions& o) {
       o.routing = RoutingPolicy::kThreadLocal;
       o.locate = LocatePolicy::kRace;
       o.location_cache = true;
     },
     ""},
}};

// One operation of a thread's plan: the key's number, and whether it is a
// Set (high bit).
using PlannedOp = uint64_t;
constexpr PlannedOp kSetBit = uint64_t{1} << 63;

// Each on its own cache lines, so that the threads never write a shared
// line while they run.
struct alignas(64) ThreadOutcome {
  LatencyHistogram get_ticks;
  LatencyHistogram set_ticks;
  uint64_t gets = 0;
  uint64_t found = 0;
  uint64_t sets = 0;
  uint64_t refused_sets = 0;
  uint64_t bad_values = 0;
  std::chrono::steady_clock::time_point end;
  absl::Status status;
};

// Draws thread `t`'s operations. Thread t runs on node t / threads_per_node
// and wrote keys [t * keys_per_thread, (t + 1) * keys_per_thread).
std::vector<PlannedOp> Plan(const AblationCellSpec& spec, int t) {
  const int threads = spec.nodes * spec.threads_per_node;
  const int node = t / spec.threads_per_node;
  const uint64_t per_node = spec.keys_per_thread * spec.threads_per_node;
  const uint64_t total = per_node * spec.nodes;
  Rng rng(spec.seed * 0x9e3779b97f4a7c15ULL + static_cast<uint64_t>(t) + 1);
  std::vector<PlannedOp> plan(spec.ops_per_thread);
  for (PlannedOp& op : plan) {
    uint64_t key;
    if (spec.keys == KeyChoice::kUniform || threads == spec.threads_per_node) {
      key = rng.NextBelow(total);
    } else if (rng.NextDouble() < spec.cross_share) {
      // Any node but this one, then any key written there.
      int other = static_cast<int>(rng.NextBelow(spec.nodes - 1));
      if (other >= node) ++other;
      key = static_cast<uint64_t>(other) * per_node + rng.NextBelow(per_node);
    } else {
      key = static_cast<uint64_t>(node) * per_node + rng.NextBelow(per_node);
    }
    op = key | (rng.NextDouble() < spec.read_share ? 0 : kSetBit);
  }
  return plan;
}

// The value of key `key`: its number in the first 8 bytes, then filler.
void StampValue(uint64_t key, std::string* value) {
  std::memcpy(value->data(), &key, sizeof(key));
}

bool ValueIsOf(uint64_t key, const std::string& value, size_t size) {
  uint64_t stamped;
  if (value.size() != size) return false;
  std::memcpy(&stamped, value.data(), sizeof(stamped));
  return stamped == key;
}

struct LocalityCounters {
  uint64_t hits_local = 0;
  uint64_t hits_remote = 0;
  uint64_t misses = 0;
  uint64_t migrations = 0;
};

LocalityCounters SumLocality(const FurrBall& ball) {
  LocalityCounters c;
  for (const NodeStatsSnapshot& s : ball.Stats()) {
    c.hits_local += s.hits_local;
    c.hits_remote += s.hits_remote;
    c.misses += s.misses;
    c.migrations += s.migrations_in;
  }
  return c;
}

int AllowedCpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
  return std::max(1, CPU_COUNT(&set));
}

}  // namespace

std::span<const AblationConfig> AblationConfigs() { return kConfigs; }

const AblationConfig* FindAblationConfig(std::string_view name) {
  for (const AblationConfig& c : kConfigs) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

double AblationResult::LocalHitShare() const {
  const uint64_t hits = hits_local + hits_remote;
  return hits == 0 ? 0.0
                   : static_cast<double>(hits_local) / static_cast<double>(hits);
}

absl::Status AblationResult::CheckCounts() const {
  if (hits_local + hits_remote + misses != gets) {
    return absl::InternalError(absl::StrCat(
        "the engine counted ", hits_local, " local hits + ", hits_remote,
        " remote hits + ", misses, " misses for ", gets, " timed Gets"));
  }
  if (hits_local + hits_remote != found) {
    return absl::InternalError(absl::StrCat(
        "the engine counted ", hits_local + hits_remote, " hits, the harness ",
        found, " found values"));
  }
  if (bad_values != 0 || refused_sets != 0) {
    return absl::InternalError(absl::StrCat(bad_values, " wrong values, ",
                                            refused_sets, " refused writes"));
  }
  return absl::OkStatus();
}

absl::StatusOr<AblationResult> RunAblationCell(const AblationCellSpec& spec) {
  if (spec.config == nullptr || spec.config->apply == nullptr) {
    return absl::InvalidArgumentError("the row's feature is not on main");
  }
  if (spec.nodes < 1 || spec.threads_per_node < 1 ||
      spec.keys_per_thread < 1 || spec.value_bytes < sizeof(uint64_t)) {
    return absl::InvalidArgumentError(
        "nodes, threads per node and keys must be positive, values at least "
        "8 bytes (they carry their key's number)");
  }
  const int threads = spec.nodes * spec.threads_per_node;
  const uint64_t total_keys = spec.keys_per_thread * threads;

  std::vector<std::vector<PlannedOp>> plans(threads);
  for (int t = 0; t < threads; ++t) plans[t] = Plan(spec, t);
  std::vector<std::string> keys(total_keys);
  for (uint64_t k = 0; k < total_keys; ++k) FormatKey(k, kKeyBytes, &keys[k]);

  FurrBallOptions o;
  o.simulate_topology = true;
  o.node_count = spec.nodes;
  o.simulated_remote_delay_ns = spec.remote_delay_ns;
  // Any node may end up holding every key (thread-local routing with one
  // writer per node holds a node's share; a migration policy could gather
  // more): a fixed table for all of them, and a budget that maps it and the
  // entries twice over, so nothing is evicted and no growth runs mid-cell.
  // Mapped memory enters the RSS only where it is written.
  o.max_keys_per_node = total_keys;
  o.memory_budget_bytes =
      static_cast<size_t>(spec.nodes) *
      (total_keys * (256 + 2 * (kKeyBytes + spec.value_bytes)) +
       (size_t{64} << 20));
  spec.config->apply(o);
  absl::StatusOr<std::unique_ptr<FurrBall>> opened = FurrBall::Open(o);
  if (!opened.ok()) return opened.status();
  FurrBall& ball = **opened;

  const double ticks_per_ns =
      spec.ticks_per_ns > 0
          ? spec.ticks_per_ns
          : CycleTimer::TicksPerNs(std::chrono::milliseconds(50));
  AblationResult result;
  std::vector<ThreadOutcome> outcomes(threads);
  std::latch loaded(threads);
  std::latch go(1);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      ThreadOutcome& out = outcomes[t];
      const int node = ball.router().IdOf(t / spec.threads_per_node);
      out.status = ball.PinCurrentThreadToNode(node);
      std::string value(spec.value_bytes, 'v');
      std::string read;
      if (out.status.ok()) {
        const uint64_t first = static_cast<uint64_t>(t) * spec.keys_per_thread;
        for (uint64_t k = first; k < first + spec.keys_per_thread; ++k) {
          StampValue(k, &value);
          if (ball.Set(keys[k], value).error != Error::kOk) ++out.refused_sets;
        }
      }
      // The warm-up: the plan from its start, untimed, so that a policy
      // that learns from reads (migration) has seen them before the run.
      for (uint64_t i = 0; out.status.ok() && i < spec.warmup_ops_per_thread;
           ++i) {
        const PlannedOp op = plans[t][i % plans[t].size()];
        const uint64_t k = op & ~kSetBit;
        if (op & kSetBit) {
          StampValue(k, &value);
          if (ball.Set(keys[k], value).error != Error::kOk) ++out.refused_sets;
        } else {
          ball.Get(keys[k], &read);
        }
      }
      loaded.count_down();
      go.wait();
      if (!out.status.ok()) return;
      for (const PlannedOp op : plans[t]) {
        const uint64_t k = op & ~kSetBit;
        if (op & kSetBit) {
          StampValue(k, &value);
          const uint64_t start = CycleTimer::Now();
          const SetResult r = ball.Set(keys[k], value);
          out.set_ticks.Record(CycleTimer::Now() - start);
          ++out.sets;
          if (r.error != Error::kOk) ++out.refused_sets;
        } else {
          const uint64_t start = CycleTimer::Now();
          const GetResult r = ball.Get(keys[k], &read);
          out.get_ticks.Record(CycleTimer::Now() - start);
          ++out.gets;
          if (r.found) {
            ++out.found;
            if (!ValueIsOf(k, read, spec.value_bytes)) ++out.bad_values;
          }
        }
      }
      out.end = std::chrono::steady_clock::now();
    });
  }
  loaded.wait();
  const LocalityCounters before = SumLocality(ball);
  result.migrations_warmup = before.migrations;
  const double cpu_before = ProcessCpuSeconds();
  const std::chrono::steady_clock::time_point start =
      std::chrono::steady_clock::now();
  go.count_down();
  for (std::thread& w : workers) w.join();
  const double cpu_after = ProcessCpuSeconds();
  const LocalityCounters after = SumLocality(ball);

  LatencyHistogram gets;
  LatencyHistogram sets;
  std::chrono::steady_clock::time_point end = start;
  for (ThreadOutcome& out : outcomes) {
    if (!out.status.ok()) return out.status;
    gets.Merge(out.get_ticks);
    sets.Merge(out.set_ticks);
    result.gets += out.gets;
    result.found += out.found;
    result.sets += out.sets;
    result.refused_sets += out.refused_sets;
    result.bad_values += out.bad_values;
    end = std::max(end, out.end);
  }
  result.hits_local = after.hits_local - before.hits_local;
  result.hits_remote = after.hits_remote - before.hits_remote;
  result.misses = after.misses - before.misses;
  result.migrations_run = after.migrations - before.migrations;
  auto to_ns = [ticks_per_ns](uint64_t ticks) {
    return static_cast<uint64_t>(static_cast<double>(ticks) / ticks_per_ns);
  };
  result.get_p50_ns = to_ns(gets.Percentile(0.50));
  result.get_p99_ns = to_ns(gets.Percentile(0.99));
  result.get_trimmed_mean_ns = gets.MeanBetween(0.01, 0.99) / ticks_per_ns;
  result.set_p50_ns = to_ns(sets.Percentile(0.50));
  result.run_seconds = std::chrono::duration<double>(end - start).count();
  if (result.run_seconds > 0) {
    result.ops_per_second =
        static_cast<double>(result.gets + result.sets) / result.run_seconds;
    // The process's CPU (the run threads and the nodes' mostly idle
    // workers) over what the run threads could have had.
    result.cpu_share = (cpu_after - cpu_before) /
                       (std::min(threads, AllowedCpus()) * result.run_seconds);
  }
  if (result.gets + result.sets > 0) {
    result.cpu_ns_per_op = (cpu_after - cpu_before) * 1e9 /
                           static_cast<double>(result.gets + result.sets);
  }
  return result;
}

}  // namespace furrballs::bench
