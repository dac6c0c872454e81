// engine/furrball/node_stats_test.cc: the counters stay exact when threads
// own their shards (plain load and store) and when more threads than owned
// shards count at once (the shared shards' fetch_add), and an exited thread's
// shard goes to the next thread.
#include "engine/furrball/node_stats.h"

#include <gtest/gtest.h>

#include <atomic>
#include <latch>
#include <memory_resource>
#include <set>
#include <thread>
#include <vector>

namespace furrballs {
namespace furrball_internal {
namespace {

TEST(NodeStatsTest, MoreThreadsThanShardsCountExactly) {
  NodeStats stats(std::pmr::new_delete_resource());
  constexpr int kThreads = 3 * NodeStats::kShards;
  constexpr uint64_t kAdds = 100000;
  std::latch start(kThreads + 1);
  std::atomic<bool> done{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      // Every thread claims its shard before any counts, so that all of
      // them hold one at once: kExclusiveShards at most own theirs, the
      // others share four.
      stats.Add(Counter::kHitsLocal, 0);
      start.arrive_and_wait();
      for (uint64_t i = 0; i < kAdds; ++i) {
        stats.Add(Counter::kHitsLocal);
        stats.AddSigned(Counter::kLiveKeys, (i & 1) != 0 ? -1 : 2);
      }
    });
  }
  // A reader summing while they count: every value it sees is one the
  // counter held, so it never goes down.
  std::thread reader([&] {
    start.arrive_and_wait();
    uint64_t last = 0;
    while (!done.load(std::memory_order_relaxed)) {
      const uint64_t now = stats.Sum(Counter::kHitsLocal);
      EXPECT_GE(now, last);
      last = now;
    }
  });
  for (std::thread& t : threads) t.join();
  done.store(true, std::memory_order_relaxed);
  reader.join();
  EXPECT_EQ(stats.Sum(Counter::kHitsLocal), kThreads * kAdds);
  EXPECT_EQ(stats.Sum(Counter::kLiveKeys), kThreads * kAdds / 2);
}

TEST(NodeStatsTest, ThreadsBeyondTheOwnedShardsShare) {
  NodeStats stats(std::pmr::new_delete_resource());
  constexpr int kThreads = NodeStats::kExclusiveShards + 4;
  std::latch claimed(kThreads);
  std::vector<StatShardClaim> claims(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      stats.Add(Counter::kSets);
      claims[t] = ThisThreadStatShard();
      claimed.arrive_and_wait();  // all hold their claims at once
    });
  }
  for (std::thread& t : threads) t.join();
  std::set<uint32_t> owned;
  int shared = 0;
  for (const StatShardClaim& c : claims) {
    ASSERT_TRUE(c.claimed);
    ASSERT_LT(c.index, NodeStats::kShards);
    if (c.exclusive) {
      EXPECT_LT(c.index, NodeStats::kExclusiveShards);
      EXPECT_TRUE(owned.insert(c.index).second) << "two owners of " << c.index;
    } else {
      EXPECT_GE(c.index, NodeStats::kExclusiveShards);
      ++shared;
    }
  }
  EXPECT_GE(shared, kThreads - static_cast<int>(NodeStats::kExclusiveShards));
  EXPECT_EQ(stats.Sum(Counter::kSets), static_cast<uint64_t>(kThreads));
}

TEST(NodeStatsTest, AnExitedThreadsShardGoesToTheNextThread) {
  NodeStats stats(std::pmr::new_delete_resource());
  // Many more threads than owned shards, one after another: each finds the
  // previous one's shard given back, and continues its counts.
  constexpr int kThreads = 4 * NodeStats::kShards;
  for (int t = 0; t < kThreads; ++t) {
    StatShardClaim claim;
    std::thread([&] {
      for (int i = 0; i < 100; ++i) stats.Add(Counter::kDeletes);
      claim = ThisThreadStatShard();
    }).join();
    EXPECT_TRUE(claim.exclusive) << "thread " << t;
  }
  EXPECT_EQ(stats.Sum(Counter::kDeletes), uint64_t{100} * kThreads);
}

}  // namespace
}  // namespace furrball_internal
}  // namespace furrballs
