#include "service/call_backlog.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace furrballs::service {
namespace {

// Ends `n` calls; how many Ends reported a drained backlog.
int EndAll(CallBacklog& b, int n) {
  int drained = 0;
  for (int i = 0; i < n; ++i) drained += b.End() ? 1 : 0;
  return drained;
}

TEST(CallBacklogTest, SmallBacklogsNeverReportADrain) {
  CallBacklog b;
  for (int round = 0; round < 100; ++round) {
    for (int i = 0; i < CallBacklog::kBurst - 1; ++i) b.Read();
    EXPECT_EQ(EndAll(b, CallBacklog::kBurst - 1), 0);
  }
  EXPECT_EQ(b.live(), 0);
}

TEST(CallBacklogTest, ALargeBacklogReportsOneDrainWhenItFallsToAnEighth) {
  CallBacklog b;
  constexpr int kPeak = 512;
  for (int i = 0; i < kPeak; ++i) b.Read();
  // Down to just above an eighth: not yet.
  EXPECT_EQ(EndAll(b, kPeak - kPeak / CallBacklog::kDrained - 1), 0);
  EXPECT_TRUE(b.End());  // now at kPeak / 8
  EXPECT_EQ(EndAll(b, b.live()), 0);  // once per backlog
  EXPECT_EQ(b.live(), 0);
}

TEST(CallBacklogTest, TheNextBacklogIsMeasuredFromTheDrain) {
  CallBacklog b;
  for (int i = 0; i < 128; ++i) b.Read();
  EXPECT_EQ(EndAll(b, 128), 1);
  // A steady trickle of a few calls never reports again...
  for (int i = 0; i < 1000; ++i) {
    b.Read();
    b.Read();
    EXPECT_FALSE(b.End());
    EXPECT_FALSE(b.End());
  }
  // ...a second backlog does.
  for (int i = 0; i < 64; ++i) b.Read();
  EXPECT_EQ(EndAll(b, 64), 1);
}

// Reads and Ends from several threads at once (gRPC's reading and executor
// threads): the count ends at zero, and at most one drain is reported per
// backlog of kBurst or more (here at most every thread's calls / kBurst).
TEST(CallBacklogTest, ConcurrentReadsAndEndsBalance) {
  CallBacklog b;
  constexpr int kThreads = 4;
  constexpr int kCalls = 10000;
  std::atomic<int> drained{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&b, &drained] {
      for (int i = 0; i < kCalls; i += 100) {
        for (int j = 0; j < 100; ++j) b.Read();
        for (int j = 0; j < 100; ++j) drained += b.End() ? 1 : 0;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(b.live(), 0);
  EXPECT_LE(drained.load(), kThreads * kCalls / CallBacklog::kBurst);
}

}  // namespace
}  // namespace furrballs::service
