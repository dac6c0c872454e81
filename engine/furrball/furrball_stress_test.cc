// Concurrency stress with self-validating values, over simulated 2- and
// 4-node topologies and all three routings, in a cache small enough that
// staging, relocation, drain, page eviction, ARC eviction and TTL
// reclamation all run while the threads read and write.
//
// Every value carries its key id, the writer's sequence number, its length
// and a checksum over all of it, so a reader detects a torn read (bytes of
// two writes), a foreign value (another key's bytes) or a value copied out
// of a recycled page. On top of that:
//   - hot keys are overwritten in place with same-size values by every
//     thread, the case where a missing seqlock re-validation shows first;
//   - each thread owns some keys; it must read back exactly its last write
//     or a miss, and after a miss nothing until it writes again (no
//     resurrection);
//   - with hash routing, the versions a reader sees for a key never go back.
// Op counts are bounded; nothing sleeps and nothing is timed.
#include <atomic>
#include <cinttypes>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "engine/common/hash_pair.h"
#include "engine/furrball/clock.h"
#include "engine/furrball/furrball.h"
#include "engine/furrball/self_validating_values_testing.h"

namespace furrballs {
namespace {

using furrball_testing::Check;
using furrball_testing::MakeValue;
using furrball_testing::SplitMix;

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
constexpr int kOpsPerThread = 6000;  // sanitizers are 10-50x slower
#else
constexpr int kOpsPerThread = 60000;
#endif
constexpr int kThreads = 4;
constexpr int kHotKeys = 16;
constexpr int kSharedKeys = 1500;
constexpr int kOwnedPerThread = 300;
using Param = std::tuple<int /*nodes*/, RoutingPolicy>;

class FurrBallStressTest : public ::testing::TestWithParam<Param> {};

TEST_P(FurrBallStressTest, SelfValidatingValuesUnderConcurrency) {
  // Not a structured binding: lambdas below capture these, which clang 14
  // (the fuzz and -Wthread-safety builds) refuses for bindings.
  const int nodes = std::get<0>(GetParam());
  const RoutingPolicy routing = std::get<1>(GetParam());
  ManualClock clock;
  FurrBallOptions o;
  o.node_count = nodes;
  o.simulate_topology = true;
  o.routing = routing;
  o.memory_budget_bytes = 4 << 20;  // 64 pages of 64 KiB in all
  o.page_size_bytes = 64 << 10;
  o.max_value_bytes = 16 << 10;
  o.max_keys_per_node = 1500 / nodes;
  o.clock = &clock;
  o.maintenance_interval = std::chrono::milliseconds(1);
  absl::StatusOr<std::unique_ptr<FurrBall>> opened = FurrBall::Open(o);
  ASSERT_TRUE(opened.ok()) << opened.status();
  FurrBall& ball = **opened;

  std::mutex failure_mu;
  std::string first_failure;
  std::atomic<uint64_t> failures{0}, hits{0}, misses{0}, writes{0};
  auto fail = [&](const std::string& what) {
    failures.fetch_add(1);
    std::lock_guard<std::mutex> l(failure_mu);
    if (first_failure.empty()) first_failure = what;
  };

  auto worker = [&](int t) {
    std::mt19937_64 rng(77 + t * 1000 + nodes * 10 + static_cast<int>(routing));
    // Owned keys: the last value this thread wrote (seq), or 0 = must miss.
    std::vector<uint64_t> owned_seq(kOwnedPerThread, 0);
    std::vector<uint64_t> last_version(kHotKeys + kSharedKeys, 0);
    uint64_t seq = 0;
    std::string v;
    for (int op = 0; op < kOpsPerThread; ++op) {
      const int cls = static_cast<int>(rng() % 10);
      if (cls < 3) {
        // Hot keys: same-size overwrites (in place) racing with reads.
        const uint64_t k = rng() % kHotKeys;
        const std::string key = "hot" + std::to_string(k);
        if (rng() % 2 == 0) {
          ball.Set(key, MakeValue(k, (uint64_t(t) << 48) | ++seq, 256));
          writes.fetch_add(1, std::memory_order_relaxed);
        } else {
          const GetResult g = ball.Get(key, &v);
          if (!g.found) continue;
          uint64_t s;
          const std::string bad = Check(v, k, &s);
          if (!bad.empty()) fail(key + ": " + bad);
          if (routing == RoutingPolicy::kHash) {
            if (g.version < last_version[k]) fail(key + ": version went back");
            last_version[k] = g.version;
          }
        }
      } else if (cls < 7) {
        // Shared keys: every operation, random sizes.
        const uint64_t k = kHotKeys + rng() % kSharedKeys;
        const std::string key = "shared" + std::to_string(k);
        const int what = static_cast<int>(rng() % 10);
        if (what < 4) {
          const GetResult g = ball.Get(key, &v);
          if (!g.found) {
            misses.fetch_add(1, std::memory_order_relaxed);
            continue;
          }
          hits.fetch_add(1, std::memory_order_relaxed);
          uint64_t s;
          const std::string bad = Check(v, k, &s);
          if (!bad.empty()) fail(key + ": " + bad);
          if (routing == RoutingPolicy::kHash) {
            if (g.version < last_version[k]) fail(key + ": version went back");
            last_version[k] = g.version;
          }
        } else if (what < 8) {
          WriteOptions w;
          if (rng() % 8 == 0) w.ttl_ms = 1 + rng() % 50;
          if (rng() % 6 == 0) {
            const GetResult g = ball.Get(key, &v);
            w.mode = SetMode::kIfVersion;
            w.expected_version = g.version;
          }
          const SetResult r = ball.Set(
              key, MakeValue(k, (uint64_t(t) << 48) | ++seq, rng() % 6000), w);
          if (r.error != Error::kOk && r.error != Error::kVersionMismatch &&
              r.error != Error::kKeyNotFound) {
            fail(key + ": Set failed with " + std::string(ErrorName(r.error)));
          }
          writes.fetch_add(1, std::memory_order_relaxed);
        } else if (what < 9) {
          ball.Delete(key);
        } else {
          ball.Touch(key, rng() % 2 == 0 ? 0 : 1 + rng() % 50);
        }
      } else {
        // Owned keys: read-your-writes, no resurrection.
        const int i = static_cast<int>(rng() % kOwnedPerThread);
        const uint64_t k = 1'000'000 + uint64_t(t) * kOwnedPerThread + i;
        const std::string key = "owned" + std::to_string(k);
        if (rng() % 3 == 0) {
          const uint64_t s = (uint64_t(t) << 48) | ++seq;
          const SetResult r = ball.Set(key, MakeValue(k, s, 16 + rng() % 2000));
          if (r.error != Error::kOk) {
            fail(key + ": Set failed with " + std::string(ErrorName(r.error)));
          }
          owned_seq[i] = s;
          writes.fetch_add(1, std::memory_order_relaxed);
        } else {
          const GetResult g = ball.Get(key, &v);
          if (!g.found) {
            owned_seq[i] = 0;  // evicted; must stay gone until rewritten
            continue;
          }
          uint64_t s = 0;
          const std::string bad = Check(v, k, &s);
          if (!bad.empty()) {
            fail(key + ": " + bad);
          } else if (owned_seq[i] == 0) {
            fail(key + ": a missed key came back");
          } else if (s != owned_seq[i]) {
            fail(key + ": not the owner's last write");
          }
        }
      }
      // One thread moves time so that TTLs expire under the readers.
      if (t == 0 && op % 256 == 0) clock.AdvanceMs(3);
    }
  };

  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(worker, t);
  for (std::thread& th : threads) th.join();

  EXPECT_EQ(failures.load(), 0u) << first_failure;
  NodeStatsSnapshot total;
  for (const NodeStatsSnapshot& s : ball.Stats()) {
    total.relocations += s.relocations;
    total.pages_recycled += s.pages_recycled;
    total.evictions_capacity += s.evictions_capacity;
    total.evictions_keys += s.evictions_keys;
    total.staging_sets += s.staging_sets;
    total.in_place_sets += s.in_place_sets;
    total.ttl_expirations += s.ttl_expirations;
    total.page_evictions += s.page_evictions;
  }
  EXPECT_GT(total.pages_recycled, 0u) << "pages must be recycled under the readers";
  EXPECT_GT(total.in_place_sets, 0u);
  EXPECT_GT(total.evictions_capacity + total.evictions_keys, 0u);
  std::printf(
      "nodes=%d routing=%d: writes=%" PRIu64 " shared hits=%" PRIu64
      " misses=%" PRIu64 " in_place=%" PRIu64 " staging=%" PRIu64
      " relocations=%" PRIu64 " recycled=%" PRIu64 " evict_cap=%" PRIu64
      " evict_keys=%" PRIu64 " page_evictions=%" PRIu64 " ttl=%" PRIu64 "\n",
      nodes, static_cast<int>(routing), writes.load(), hits.load(),
      misses.load(), total.in_place_sets, total.staging_sets,
      total.relocations, total.pages_recycled, total.evictions_capacity,
      total.evictions_keys, total.page_evictions, total.ttl_expirations);
}

std::string ParamName(const ::testing::TestParamInfo<Param>& info) {
  static const char* const kRouting[] = {"Hash", "RoundRobin", "ThreadLocal"};
  return std::to_string(std::get<0>(info.param)) + "Nodes" +
         kRouting[static_cast<int>(std::get<1>(info.param))];
}

INSTANTIATE_TEST_SUITE_P(
    Topologies, FurrBallStressTest,
    ::testing::Combine(::testing::Values(2, 4),
                       ::testing::Values(RoutingPolicy::kHash,
                                         RoutingPolicy::kRoundRobin,
                                         RoutingPolicy::kThreadLocal)),
    ParamName);

// Compare-and-set is atomic: threads increment shared counters only through
// CAS on the version they read, with room for everything (no eviction), so
// each counter ends at exactly the number of successful CASes on it.
TEST(FurrBallCasStressTest, CasIncrementsAreNeverLost) {
  FurrBallOptions o;
  o.node_count = 2;
  o.simulate_topology = true;
  o.memory_budget_bytes = 4 << 20;
  o.page_size_bytes = 64 << 10;
  o.max_value_bytes = 16 << 10;
  o.eviction_enabled = false;
  absl::StatusOr<std::unique_ptr<FurrBall>> opened = FurrBall::Open(o);
  ASSERT_TRUE(opened.ok()) << opened.status();
  FurrBall& ball = **opened;
  constexpr int kCounters = 4;
  for (int c = 0; c < kCounters; ++c) {
    ASSERT_EQ(ball.Set("counter" + std::to_string(c), "0").error, Error::kOk);
  }
  std::atomic<uint64_t> successes[kCounters] = {};
  std::atomic<uint64_t> bad{0};
  auto worker = [&](int t) {
    std::mt19937_64 rng(t);
    std::string v;
    for (int i = 0; i < kOpsPerThread / 8; ++i) {
      const int c = static_cast<int>(rng() % kCounters);
      const std::string key = "counter" + std::to_string(c);
      const GetResult g = ball.Get(key, &v);
      if (!g.found) {
        bad.fetch_add(1);
        continue;
      }
      WriteOptions cas;
      cas.mode = SetMode::kIfVersion;
      cas.expected_version = g.version;
      // Grow and shrink so both the in-place and the out-of-place paths run.
      std::string next = std::to_string(std::stoull(v) + 1);
      if (rng() % 2) next.append(rng() % 300, ' ');
      const SetResult r = ball.Set(key, next, cas);
      if (r.error == Error::kOk) {
        successes[c].fetch_add(1);
      } else if (r.error != Error::kVersionMismatch) {
        bad.fetch_add(1);
      }
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(worker, t);
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0u);
  for (int c = 0; c < kCounters; ++c) {
    std::string v;
    ASSERT_TRUE(ball.Get("counter" + std::to_string(c), &v).found);
    EXPECT_EQ(std::stoull(v), successes[c].load()) << "counter " << c;
  }
}

}  // namespace
}  // namespace furrballs
