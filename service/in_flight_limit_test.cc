#include "service/in_flight_limit.h"

#include <atomic>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace furrballs::service {
namespace {

TEST(InFlightLimitTest, TakesAllOrNothingAndGivesBack) {
  InFlightLimit limit(4);
  EXPECT_TRUE(limit.TryAcquire(3));
  EXPECT_FALSE(limit.TryAcquire(2)) << "3 + 2 is past the cap of 4";
  EXPECT_EQ(limit.in_flight(), 3u) << "a refused acquire takes nothing";
  EXPECT_TRUE(limit.TryAcquire(1));
  EXPECT_FALSE(limit.TryAcquire(1));
  limit.Release(3);
  EXPECT_TRUE(limit.TryAcquire(3));
  limit.Release(3);
  limit.Release(1);
  EXPECT_EQ(limit.in_flight(), 0u);
}

TEST(InFlightLimitTest, ZeroMeansNoCap) {
  InFlightLimit limit(0);
  EXPECT_TRUE(limit.TryAcquire(size_t{1} << 40));
  limit.Release(size_t{1} << 40);
  EXPECT_EQ(limit.in_flight(), 0u);
}

// Threads racing for the slots never hold more than the cap between them.
TEST(InFlightLimitTest, ConcurrentHoldersNeverPassTheCap) {
  constexpr size_t kCap = 8;
  InFlightLimit limit(kCap);
  std::atomic<size_t> holders{0};
  std::atomic<size_t> most{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 20000; ++i) {
        if (!limit.TryAcquire(2)) continue;
        const size_t now = holders.fetch_add(2) + 2;
        size_t seen = most.load();
        while (now > seen && !most.compare_exchange_weak(seen, now)) {
        }
        holders.fetch_sub(2);
        limit.Release(2);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_LE(most.load(), kCap);
  EXPECT_EQ(limit.in_flight(), 0u);
}

}  // namespace
}  // namespace furrballs::service
