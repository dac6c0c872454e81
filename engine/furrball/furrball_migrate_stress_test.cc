// Keys moving back and forth between 2 simulated nodes while readers on both
// nodes, a writer and a deleter run (migrate_to_readers, key_mover.h).
//
// Readers on node n read every key, heavily during the phases of node n
// and lightly otherwise, so the keys' remote reads dominate on one node
// and then the other and the keys keep moving. The injected remote delay
// (a busy-wait before each remote shard probe, report §5.8) widens the
// window a scan can fall into: probe the local shard, wait, probe the remote
// one, while the key moves the other way.
//
//   - stable keys are never deleted and never evicted (the cache is far
//     larger than they are): every read must hit, with a whole value of its
//     own key (self-validating values) and a sequence number at least the
//     one the writer had published before the read began (no stale value);
//   - volatile keys are written and deleted all the time: a hit must be a
//     whole value of its own key;
//   - afterwards each key is on one node (live keys add up) and enough moves
//     happened for the test to mean something.
// Op counts are bounded (readers run a number of phases; the writers stop
// when they are done); nothing sleeps. With the move's erase before its
// insert, or without the scan's move sequence re-check, stable keys miss
// (key_mover.h says why). The location cache (on by default) answers most
// reads from its hint, which a move updates, and hides the missing re-check
// (4 runs of 4 passed without it); so each routing runs with the cache off
// too, where a scan does the finding (4 runs of 4 failed without it).
#include <sched.h>

#include <atomic>
#include <cstdio>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "engine/furrball/furrball.h"
#include "engine/furrball/node_thread_testing.h"
#include "engine/furrball/self_validating_values_testing.h"

namespace furrballs {
namespace {

using furrball_testing::Check;
using furrball_testing::CpusOfNode;
using furrball_testing::MakeValue;
using furrball_testing::SplitMix;

// Phases each reader runs (the keys change sides about once a phase).
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
constexpr uint64_t kPhases = 8;  // sanitizers are 10-50x slower
#else
constexpr uint64_t kPhases = 40;
#endif
constexpr int kNodes = 2;
constexpr int kReadersPerNode = 2;
constexpr int kStableKeys = 32;
constexpr int kVolatileKeys = 16;
// Reads per phase by the readers of the phase's node, who read flat out;
// the other node's readers read once per kLightEvery of those.
constexpr uint64_t kPhaseReads = 8000;
constexpr uint64_t kLightEvery = 16;

std::string Key(int id) { return "key-" + std::to_string(id); }

// The routing, and whether the location cache is on.
using Param = std::tuple<RoutingPolicy, bool>;

class MigrateStressTest : public ::testing::TestWithParam<Param> {};

INSTANTIATE_TEST_SUITE_P(
    SearchRoutings, MigrateStressTest,
    ::testing::Combine(::testing::Values(RoutingPolicy::kThreadLocal,
                                         RoutingPolicy::kRoundRobin),
                       ::testing::Bool()));

TEST_P(MigrateStressTest, NoMissAndNoStaleValueWhileKeysMove) {
  FurrBallOptions o;
  o.node_count = kNodes;
  o.simulate_topology = true;
  o.routing = std::get<0>(GetParam());
  o.location_cache = std::get<1>(GetParam());
  o.migrate_to_readers = true;
  o.simulated_remote_delay_ns = 2000;
  o.memory_budget_bytes = size_t{8} << 20;
  o.page_size_bytes = size_t{64} << 10;
  absl::StatusOr<std::unique_ptr<FurrBall>> opened = FurrBall::Open(o);
  ASSERT_TRUE(opened.ok()) << opened.status();
  FurrBall& ball = **opened;

  // published[k]: the sequence of the last acknowledged write of stable key k.
  std::vector<std::atomic<uint64_t>> published(kStableKeys);
  for (int k = 0; k < kStableKeys; ++k) {
    ASSERT_EQ(ball.Set(Key(k), MakeValue(k, 1, 40)).error, Error::kOk);
    published[k].store(1);
  }

  std::atomic<bool> stop{false};  // the readers are done
  std::atomic<uint64_t> stable_misses{0}, stale{0}, corrupt{0}, reads{0};
  std::vector<std::thread> threads;
  std::vector<cpu_set_t> cpus;
  for (int n = 0; n < kNodes; ++n) cpus.push_back(CpusOfNode(ball, n));

  for (int n = 0; n < kNodes; ++n) {
    for (int r = 0; r < kReadersPerNode; ++r) {
      threads.emplace_back([&, n, r] {
        // Before the thread's first call: the cache caches its node then.
        sched_setaffinity(0, sizeof(cpus[n]), &cpus[n]);
        uint64_t rng = n * 100 + r;
        std::string v;
        uint64_t last = 0;
        for (;;) {
          // Every reader agrees on the phase: the reads of the phase's
          // node's readers, counted. The other node's readers keep reading,
          // one read per kLightEvery of those.
          const uint64_t now = reads.load(std::memory_order_relaxed);
          const uint64_t phase = now / kPhaseReads;
          if (phase >= kPhases) break;
          if (phase % kNodes == static_cast<uint64_t>(n)) {
            reads.fetch_add(1, std::memory_order_relaxed);
          } else if (now - last < kLightEvery) {
            std::this_thread::yield();
            continue;
          }
          last = now;
          const uint64_t x = SplitMix(rng);
          uint64_t seq = 0;
          if (x % 4 != 0) {
            const int k = static_cast<int>(x % kStableKeys);
            const uint64_t floor = published[k].load(std::memory_order_acquire);
            if (!ball.Get(Key(k), &v).found) {
              stable_misses.fetch_add(1);
            } else if (!Check(v, k, &seq).empty()) {
              corrupt.fetch_add(1);
            } else if (seq < floor) {
              stale.fetch_add(1);
            }
          } else {
            const int k = kStableKeys + static_cast<int>(x % kVolatileKeys);
            if (ball.Get(Key(k), &v).found && !Check(v, k, &seq).empty()) {
              corrupt.fetch_add(1);
            }
          }
        }
      });
    }
  }
  // One writer of the stable keys (values of varying sizes: in place and
  // out of place), and one writer-deleter of the volatile keys, on
  // alternating nodes.
  threads.emplace_back([&] {
    sched_setaffinity(0, sizeof(cpus[0]), &cpus[0]);
    uint64_t rng = 7;
    for (uint64_t seq = 2; !stop.load(std::memory_order_relaxed); ++seq) {
      const int k = static_cast<int>(SplitMix(rng) % kStableKeys);
      const uint64_t s = published[k].load(std::memory_order_relaxed) + 1;
      if (ball.Set(Key(k), MakeValue(k, s, 24 + seq % 64)).error == Error::kOk) {
        published[k].store(s, std::memory_order_release);
      }
      if (seq % 8 == 0) std::this_thread::yield();
    }
  });
  threads.emplace_back([&] {
    sched_setaffinity(0, sizeof(cpus[1]), &cpus[1]);
    uint64_t rng = 11;
    for (uint64_t seq = 1; !stop.load(std::memory_order_relaxed); ++seq) {
      const int k = kStableKeys + static_cast<int>(SplitMix(rng) % kVolatileKeys);
      if (seq % 3 == 0) {
        ball.Delete(Key(k));
      } else {
        ball.Set(Key(k), MakeValue(k, seq, 24 + seq % 64));
      }
      if (seq % 8 == 0) std::this_thread::yield();
    }
  });

  for (size_t i = 0; i < kNodes * kReadersPerNode; ++i) threads[i].join();
  stop.store(true);
  for (size_t i = kNodes * kReadersPerNode; i < threads.size(); ++i) {
    threads[i].join();
  }

  uint64_t migrations = 0, evictions = 0, live = 0;
  for (const NodeStatsSnapshot& s : ball.Stats()) {
    migrations += s.migrations_in;
    evictions += s.evictions_capacity + s.evictions_keys;
    live += s.live_keys;
  }
  uint64_t out = 0;
  for (const NodeStatsSnapshot& s : ball.Stats()) out += s.migrations_out;
  EXPECT_EQ(stable_misses.load(), 0u) << "a present key was missed";
  EXPECT_EQ(stale.load(), 0u) << "a read returned an older value";
  EXPECT_EQ(corrupt.load(), 0u);
  EXPECT_EQ(evictions, 0u) << "the no-miss check needs no evictions";
  EXPECT_EQ(out, migrations) << "every move erased its source";
  // Every key on exactly one node.
  std::string v;
  uint64_t present = 0;
  for (int k = 0; k < kStableKeys + kVolatileKeys; ++k) {
    present += ball.Get(Key(k), &v).found ? 1 : 0;
  }
  EXPECT_EQ(live, present);
  EXPECT_GE(migrations, kPhases * 4) << "too few moves for the test to mean much ("
                             << reads.load() << " reads)";
  std::printf("%llu reads, %llu moves\n",
              static_cast<unsigned long long>(reads.load()),
              static_cast<unsigned long long>(migrations));
}

}  // namespace
}  // namespace furrballs
