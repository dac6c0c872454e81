// Finding keys under round-robin and thread-local routing (key_locator.h):
// every written key is found and misses are misses with every LocatePolicy,
// with and without the location cache, on 2 and 4 simulated nodes; a
// stale or colliding hint is never a wrong answer; a race whose workers
// refuse the probe falls back; race Gets beside concurrent Sets only ever
// see values written for their key. Plus the cost model's decisions.
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "engine/furrball/furrball.h"
#include "engine/furrball/key_locator.h"
#include "engine/furrball/node_thread_testing.h"

namespace furrballs {
namespace {

using furrball_internal::KeyLocator;
using furrball_testing::RunOnNode;

using Param = std::tuple<int /*nodes*/, RoutingPolicy, LocatePolicy,
                         bool /*location_cache*/>;

FurrBallOptions Options(const Param& param) {
  const auto [nodes, routing, locate, location_cache] = param;
  FurrBallOptions o;
  o.node_count = nodes;
  o.simulate_topology = true;
  o.routing = routing;
  o.locate = locate;
  o.location_cache = location_cache;
  o.memory_budget_bytes = size_t{32} << 20;
  return o;
}

// One counter summed over the nodes.
uint64_t Sum(const FurrBall& ball, uint64_t NodeStatsSnapshot::*counter) {
  uint64_t total = 0;
  for (const NodeStatsSnapshot& s : ball.Stats()) total += s.*counter;
  return total;
}

std::string Key(int i) { return "key-" + std::to_string(i); }
std::string Value(int i, int round) {
  return "value-" + std::to_string(i) + "-" + std::to_string(round);
}

class FurrBallLocateTest : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<FurrBall>> opened =
        FurrBall::Open(Options(GetParam()));
    ASSERT_TRUE(opened.ok()) << opened.status();
    ball_ = *std::move(opened);
  }

  // Keys 0..keys-1, each written from the worker of node i % nodes, so that
  // thread-local routing spreads them over the nodes.
  void WriteFromEveryNode(int keys) {
    const int nodes = ball_->node_count();
    for (int node = 0; node < nodes; ++node) {
      ASSERT_EQ(RunOnNode(*ball_, node,
                          [&] {
                            for (int i = node; i < keys; i += nodes) {
                              ASSERT_EQ(ball_->Set(Key(i), Value(i, 0)).error,
                                        Error::kOk);
                            }
                          }),
                Error::kOk);
    }
  }

  std::unique_ptr<FurrBall> ball_;
};

TEST_P(FurrBallLocateTest, EveryWrittenKeyIsFoundAndMissesAreMisses) {
  const auto [nodes, routing, locate, cache] = GetParam();
  FurrBall& ball = *ball_;
  constexpr int kKeys = 400;
  WriteFromEveryNode(kKeys);
  std::string value;
  for (int pass = 0; pass < 2; ++pass) {
    for (int i = 0; i < kKeys; ++i) {
      const GetResult r = ball.Get(Key(i), &value);
      ASSERT_TRUE(r.found) << Key(i) << " pass " << pass;
      EXPECT_EQ(value, Value(i, 0));
    }
    for (int i = kKeys; i < kKeys + 100; ++i) {
      EXPECT_FALSE(ball.Get(Key(i), &value).found) << Key(i);
    }
  }
  // Deleted keys miss; rewritten ones are found with their new value,
  // wherever the rewrite put them.
  for (int i = 0; i < kKeys; i += 2) {
    ASSERT_TRUE(ball.Delete(Key(i)).deleted) << Key(i);
  }
  for (int i = 0; i < kKeys; i += 4) {
    ASSERT_EQ(ball.Set(Key(i), Value(i, 1)).error, Error::kOk);
  }
  for (int i = 0; i < kKeys; ++i) {
    const GetResult r = ball.Get(Key(i), &value);
    if (i % 4 == 0) {
      ASSERT_TRUE(r.found) << Key(i);
      EXPECT_EQ(value, Value(i, 1));
    } else if (i % 2 == 0) {
      EXPECT_FALSE(r.found) << Key(i);
    } else {
      ASSERT_TRUE(r.found) << Key(i);
      EXPECT_EQ(value, Value(i, 0));
    }
  }
  using N = NodeStatsSnapshot;
  const uint64_t location_hits = Sum(ball, &N::location_hits);
  const uint64_t location_misses = Sum(ball, &N::location_misses);
  const uint64_t location_stale = Sum(ball, &N::location_stale);
  const uint64_t races = Sum(ball, &N::races);
  // 2 x 400 + 400 hits; 2 x 100 + 100 misses.
  EXPECT_EQ(Sum(ball, &N::hits_local) + Sum(ball, &N::hits_remote),
            2u * kKeys + kKeys - kKeys / 4);
  EXPECT_EQ(Sum(ball, &N::misses), 300u);
  constexpr uint64_t kGets = 2 * (kKeys + 100) + kKeys;
  const uint64_t discoveries =
      cache ? location_misses + location_stale : kGets;
  if (cache) {
    // Writes named every key's node, so a Get of a written key finds its
    // hint unless another key took the entry (the cache is direct-mapped:
    // 400 keys in 2 x 16k or 4 x 16k entries collide a few times), and the
    // never-written and deleted keys have none.
    EXPECT_EQ(location_hits + location_misses + location_stale, kGets);
    EXPECT_GE(location_misses, 300u);
    EXPECT_GE(location_hits, 1100u - 20);
  } else {
    EXPECT_EQ(location_hits + location_misses + location_stale, 0u);
  }
  if (locate == LocatePolicy::kScan) {
    EXPECT_EQ(races, 0u);
  }
  if (locate == LocatePolicy::kRace) {
    // Every discovery races (the test thread is no worker) and those of
    // written keys win.
    EXPECT_EQ(races, discoveries);
    EXPECT_EQ(Sum(ball, &N::race_wins), discoveries - 300);
    EXPECT_EQ(Sum(ball, &N::race_fallbacks), 0u);
  }
}

TEST_P(FurrBallLocateTest, AStaleOrCollidingHintIsNeverAWrongAnswer) {
  const auto [nodes, routing, locate, cache] = GetParam();
  if (routing != RoutingPolicy::kThreadLocal || !cache) GTEST_SKIP();
  FurrBall& ball = *ball_;
  // Two keys whose hashes differ only in bits the location cache does not
  // look at: one entry, one tag. a goes to node 0, then b to the last node,
  // which leaves a's entry naming the last node.
  KeyRef a = ball.Ref("key-a");
  KeyRef b{a.hash, "key-b"};
  b.hash.h2 ^= 0x1;
  ASSERT_EQ(RunOnNode(ball, 0,
                      [&] {
                        ASSERT_EQ(ball.Set(a, "value-a").error, Error::kOk);
                      }),
            Error::kOk);
  ASSERT_EQ(RunOnNode(ball, nodes - 1,
                      [&] {
                        ASSERT_EQ(ball.Set(b, "value-b").error, Error::kOk);
                      }),
            Error::kOk);
  std::string value;
  GetResult r = ball.Get(a, &value);
  ASSERT_TRUE(r.found);
  EXPECT_EQ(value, "value-a");
  EXPECT_EQ(Sum(ball, &NodeStatsSnapshot::location_stale), 1u);
  // The discovery re-named a's node: the next Get hits the hint, and b's
  // is now the stale one.
  r = ball.Get(a, &value);
  ASSERT_TRUE(r.found);
  EXPECT_EQ(value, "value-a");
  EXPECT_EQ(Sum(ball, &NodeStatsSnapshot::location_stale), 1u);
  r = ball.Get(b, &value);
  ASSERT_TRUE(r.found);
  EXPECT_EQ(value, "value-b");
  EXPECT_EQ(Sum(ball, &NodeStatsSnapshot::location_stale), 2u);
  // A deleted key whose entry another key's write re-filled: a miss.
  ASSERT_TRUE(ball.Delete(a.hash).deleted);
  r = ball.Get(a, &value);
  EXPECT_FALSE(r.found);
}

TEST_P(FurrBallLocateTest, AClosedCacheIsStillSearchedCompletely) {
  const LocatePolicy locate = std::get<2>(GetParam());
  FurrBall& ball = *ball_;
  WriteFromEveryNode(64);
  // The workers stop; a race's probes are refused and made by the caller.
  ball.Close();
  std::string value;
  for (int i = 0; i < 64; ++i) {
    ASSERT_TRUE(ball.Get(Key(i), &value).found) << Key(i);
    EXPECT_EQ(value, Value(i, 0));
    EXPECT_FALSE(ball.Get(Key(1000 + i), &value).found);
  }
  if (locate == LocatePolicy::kRace) {
    const uint64_t races = Sum(ball, &NodeStatsSnapshot::races);
    EXPECT_GT(races, 0u);
    EXPECT_EQ(Sum(ball, &NodeStatsSnapshot::race_fallbacks), races);
  }
}

TEST_P(FurrBallLocateTest, GetsBesideConcurrentSetsSeeOnlyTheirKeysValues) {
  FurrBall& ball = *ball_;
  constexpr int kStable = 64;   // written once, before the readers
  constexpr int kChurn = 64;    // rewritten and deleted while they read
  for (int i = 0; i < kStable; ++i) {
    ASSERT_EQ(ball.Set(Key(i), Value(i, 0)).error, Error::kOk);
  }
  std::atomic<bool> stop{false};
  std::atomic<int> wrong{0}, lost{0};
  std::vector<std::thread> threads;
  threads.emplace_back([&] {
    for (int round = 1; !stop.load(std::memory_order_relaxed); ++round) {
      for (int i = kStable; i < kStable + kChurn; ++i) {
        if ((i + round) % 3 == 0) {
          ball.Delete(Key(i));
        } else {
          ball.Set(Key(i), Value(i, round));
        }
      }
    }
  });
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      std::string value;
      for (int round = 0; round < 30; ++round) {
        for (int i = 0; i < kStable + kChurn; ++i) {
          const GetResult r = ball.Get(Key((i + t * 7) % (kStable + kChurn)),
                                       &value);
          const int k = (i + t * 7) % (kStable + kChurn);
          if (k < kStable && (!r.found || value != Value(k, 0))) {
            lost.fetch_add(1);
          }
          if (r.found &&
              value.rfind("value-" + std::to_string(k) + "-", 0) != 0) {
            wrong.fetch_add(1);
          }
        }
      }
    });
  }
  for (size_t i = 1; i < threads.size(); ++i) threads[i].join();
  stop.store(true);
  threads[0].join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(lost.load(), 0);
}

std::string ParamName(const ::testing::TestParamInfo<Param>& info) {
  const auto [nodes, routing, locate, cache] = info.param;
  return std::to_string(nodes) + "Nodes" +
         (routing == RoutingPolicy::kRoundRobin ? "RoundRobin"
                                                : "ThreadLocal") +
         (locate == LocatePolicy::kScan   ? "Scan"
          : locate == LocatePolicy::kRace ? "Race"
                                          : "Auto") +
         (cache ? "Cache" : "NoCache");
}

INSTANTIATE_TEST_SUITE_P(
    All, FurrBallLocateTest,
    ::testing::Combine(::testing::Values(2, 4),
                       ::testing::Values(RoutingPolicy::kRoundRobin,
                                         RoutingPolicy::kThreadLocal),
                       ::testing::Values(LocatePolicy::kScan,
                                         LocatePolicy::kRace,
                                         LocatePolicy::kAuto),
                       ::testing::Bool()),
    ParamName);

// A race's probe runs on the holder's own worker, but the hit is the
// caller's: remote unless the caller is on the holder's node.
TEST(RaceHitLocalityTest, AHitIsCountedAsTheCallerSeesIt) {
  FurrBallOptions o = Options(
      Param{2, RoutingPolicy::kThreadLocal, LocatePolicy::kRace, false});
  absl::StatusOr<std::unique_ptr<FurrBall>> opened = FurrBall::Open(o);
  ASSERT_TRUE(opened.ok()) << opened.status();
  FurrBall& ball = **opened;
  ASSERT_EQ(RunOnNode(ball, 1,
                      [&] {
                        ASSERT_EQ(ball.Set("key", "value").error, Error::kOk);
                      }),
            Error::kOk);
  auto get_from_node = [&](int node) {
    std::thread reader([&] {
      ASSERT_TRUE(ball.PinCurrentThreadToNode(node).ok());
      std::string value;
      ASSERT_TRUE(ball.Get("key", &value).found);
      EXPECT_EQ(value, "value");
    });
    reader.join();
  };
  get_from_node(0);
  std::vector<NodeStatsSnapshot> stats = ball.Stats();
  EXPECT_EQ(stats[1].race_wins, 1u);
  EXPECT_EQ(stats[1].hits_remote, 1u);
  EXPECT_EQ(stats[1].hits_local, 0u);
  get_from_node(1);
  stats = ball.Stats();
  EXPECT_EQ(stats[1].hits_remote, 1u);
  EXPECT_EQ(stats[1].hits_local, 1u);
  EXPECT_EQ(stats[0].hits_local + stats[0].hits_remote, 0u);
}

TEST(LocationCachePlanTest, OnlySearchRoutingsPayForIt) {
  FurrBallOptions o = Options(
      Param{2, RoutingPolicy::kHash, LocatePolicy::kAuto, true});
  absl::StatusOr<std::unique_ptr<FurrBall>> opened = FurrBall::Open(o);
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_EQ((*opened)->memory_plan().location_cache_bytes, 0u);
  o.routing = RoutingPolicy::kRoundRobin;
  opened = FurrBall::Open(o);
  ASSERT_TRUE(opened.ok()) << opened.status();
  const MemoryPlan& plan = (*opened)->memory_plan();
  EXPECT_GE(plan.location_cache_bytes, 2u * plan.max_keys);
  EXPECT_LE(plan.location_cache_bytes, 4u * plan.max_keys);
  EXPECT_LE(plan.total_bytes(), plan.node_budget_bytes);
}

// ---- The cost model (key_locator.h) ----------------------------------------

TEST(KeyLocatorCostModelTest, RacesOnlyWhenTheSavingExceedsTheLosersCost) {
  // A 4-node scan of 1200 ns, 300 ns a probe: a 200 ns race saves 1000 ns
  // and its 3 losers cost 900 ns: race. 400 ns saves 800: scan.
  EXPECT_TRUE(KeyLocator::RaceGains({1200, 300, 200}, 4));
  EXPECT_FALSE(KeyLocator::RaceGains({1200, 300, 400}, 4));
  // What 2 cores measure: a race is a wake-up of every worker, tens of
  // microseconds against a scan of a few hundred nanoseconds.
  EXPECT_FALSE(KeyLocator::RaceGains({400, 200, 20000}, 2));
}

TEST(KeyLocatorCostModelTest, ExploringCostsAtMostAShareOfTheDiscoveries) {
  // A race 50x a scan is re-tried once in 64 x 50 discoveries.
  EXPECT_EQ(KeyLocator::ExplorePeriod({400, 200, 20000}, false),
            KeyLocator::kExploreShare * 50);
  // A winning race re-measures the scan once in kExploreShare.
  EXPECT_EQ(KeyLocator::ExplorePeriod({1200, 300, 200}, true),
            KeyLocator::kExploreShare);
  // Bounded, so a hugely slow race is still re-measured now and then.
  EXPECT_EQ(KeyLocator::ExplorePeriod({1, 1, 4000000000u}, false),
            uint64_t{1} << 20);
}

}  // namespace
}  // namespace furrballs
