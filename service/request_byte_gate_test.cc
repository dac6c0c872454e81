#include "service/request_byte_gate.h"

#include <atomic>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace furrballs::service {
namespace {

// Records what the gate admitted it with.
struct Recorder : RequestByteGate::Waiter {
  void Admitted(size_t n) override { reserved = n; }
  size_t reserved = 0;
};

TEST(RequestByteGateTest, ARequestLargerThanTheCapRunsAlone) {
  RequestByteGate gate(10, 10);
  EXPECT_TRUE(gate.TryAcquireOrAlone(25)) << "nothing held: admitted alone";
  EXPECT_FALSE(gate.TryAcquireOrAlone(1)) << "the lone one is over the cap";
  EXPECT_EQ(gate.in_flight(), 25u);
  gate.Release(25);
  EXPECT_TRUE(gate.TryAcquireOrAlone(6));
  EXPECT_TRUE(gate.TryAcquireOrAlone(4));
  EXPECT_FALSE(gate.TryAcquireOrAlone(1)) << "6 + 4 + 1 is past 10";
  gate.Release(6);
  gate.Release(4);
  EXPECT_EQ(gate.in_flight(), 0u);
}

TEST(RequestByteGateTest, TheFirstReadReservesTheLargestMessageThenLearns) {
  RequestByteGate gate(100, 1000);
  Recorder a, b, c;
  size_t reserved = 0;
  ASSERT_TRUE(gate.Reserve(&a, &reserved));
  EXPECT_EQ(reserved, 100u) << "the largest message, capped at the gate";
  EXPECT_FALSE(gate.Reserve(&b, &reserved)) << "no room beside it: queued";
  EXPECT_EQ(gate.waiting(), 1u);
  // a's message was 20 bytes: b is admitted with the new estimate, and so
  // is c, beside a and b.
  gate.Settle(100, 20, /*read_ok=*/true);
  EXPECT_EQ(b.reserved, 20u);
  ASSERT_TRUE(gate.Reserve(&c, &reserved));
  EXPECT_EQ(reserved, 20u);
  EXPECT_EQ(gate.in_flight(), 60u);
  gate.Settle(20, 20, true);
  gate.Settle(20, 20, true);
  gate.Release(20);
  gate.Release(20);
  gate.Release(20);
  EXPECT_EQ(gate.in_flight(), 0u);
  EXPECT_EQ(gate.peak(), 100u);
}

TEST(RequestByteGateTest, ReadsWaitInArrivalOrderAndLeaveWhenCancelled) {
  RequestByteGate gate(100, 40);
  Recorder r[4];
  size_t reserved = 0;
  ASSERT_TRUE(gate.Reserve(&r[0], &reserved));
  ASSERT_TRUE(gate.Reserve(&r[1], &reserved));
  EXPECT_FALSE(gate.Reserve(&r[2], &reserved)) << "40 + 40 + 40 > 100";
  EXPECT_FALSE(gate.Reserve(&r[3], &reserved));
  EXPECT_FALSE(gate.TryAcquireOrAlone(30))
      << "a received request does not pass the waiting reads";
  EXPECT_TRUE(gate.CancelWait(&r[2]));
  EXPECT_FALSE(gate.CancelWait(&r[2])) << "not queued any more";
  EXPECT_EQ(gate.waiting(), 1u);
  gate.Settle(40, 0, /*read_ok=*/false);  // r[0]'s call ended
  EXPECT_EQ(r[3].reserved, 40u) << "the next in line, with the old estimate";
  EXPECT_EQ(r[2].reserved, 0u) << "a cancelled waiter is never admitted";
  EXPECT_FALSE(gate.CancelWait(&r[3])) << "admitted: not queued";
  gate.Settle(40, 40, true);
  gate.Settle(40, 40, true);
  gate.Release(40);
  gate.Release(40);
  EXPECT_EQ(gate.in_flight(), 0u);
}

TEST(RequestByteGateTest, EmptyMessagesDoNotOpenTheGate) {
  // Sixteen empty MultiSets once made the estimate 0, and every later read
  // was admitted with nothing reserved, free to receive any size.
  constexpr size_t kCap = 1600;
  RequestByteGate gate(kCap, kCap);
  Recorder r[RequestByteGate::kRecentReads + 1];
  size_t reserved = 0;
  for (size_t i = 0; i < RequestByteGate::kRecentReads; ++i) {
    ASSERT_TRUE(gate.Reserve(&r[i], &reserved));
    gate.Settle(reserved, 0, /*read_ok=*/true);
  }
  Recorder more[2 * RequestByteGate::kMaxSmallReads];
  size_t admitted = 0;
  for (Recorder& m : more) admitted += gate.Reserve(&m, &reserved);
  EXPECT_EQ(admitted, RequestByteGate::kMaxSmallReads);
  EXPECT_EQ(gate.in_flight(), kCap);
  EXPECT_EQ(gate.waiting(), RequestByteGate::kMaxSmallReads);
  for (size_t i = 0; i < admitted; ++i) {
    gate.Settle(kCap / RequestByteGate::kMaxSmallReads, 0, true);
  }
  EXPECT_EQ(gate.waiting(), 0u) << "the queued ones admitted as room came";
  for (size_t i = 0; i < RequestByteGate::kMaxSmallReads; ++i) {
    gate.Settle(kCap / RequestByteGate::kMaxSmallReads, 0, true);
  }
  EXPECT_EQ(gate.in_flight(), 0u);
}

TEST(RequestByteGateTest, UnaryRequestsDoNotOvertakeAQueuedRead) {
  // The first read reserves the whole cap, so it needs an empty gate;
  // overlapping unary requests used to keep the gate from ever emptying.
  RequestByteGate gate(100, 100);
  ASSERT_TRUE(gate.TryAcquireOrAlone(1));
  Recorder read;
  size_t reserved = 0;
  ASSERT_FALSE(gate.Reserve(&read, &reserved));
  for (int i = 0; i < 1000; ++i) {
    EXPECT_FALSE(gate.TryAcquireOrAlone(1)) << "overtook the queued read";
  }
  gate.Release(1);
  EXPECT_EQ(read.reserved, 100u) << "admitted once the gate emptied";
  EXPECT_EQ(gate.waiting(), 0u);
  gate.Settle(100, 10, true);
  EXPECT_TRUE(gate.TryAcquireOrAlone(1)) << "nothing waits: room is room";
  gate.Release(1);
  gate.Release(10);
  EXPECT_EQ(gate.in_flight(), 0u);
}

TEST(RequestByteGateTest, ZeroMeansNoCap) {
  RequestByteGate gate(0, 1 << 20);
  Recorder w;
  size_t reserved = 7;
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(gate.Reserve(&w, &reserved));
    EXPECT_EQ(reserved, 0u);
    EXPECT_TRUE(gate.TryAcquireOrAlone(size_t{1} << 30));
  }
  EXPECT_EQ(gate.waiting(), 0u);
}

// Readers on several threads, each waiting its turn through the queue: the
// bytes held and reserved never pass the cap once the estimate matches the
// messages, and every read is admitted exactly once.
TEST(RequestByteGateTest, ConcurrentReadersStayWithinTheCap) {
  constexpr size_t kLimit = 1000;
  constexpr size_t kMessage = 100;
  RequestByteGate gate(kLimit, kMessage);
  struct Reader : RequestByteGate::Waiter {
    void Admitted(size_t n) override {
      reserved.store(n, std::memory_order_release);
      admitted.fetch_add(1, std::memory_order_acq_rel);
    }
    std::atomic<size_t> reserved{0};
    std::atomic<int> admitted{0};
  };
  constexpr int kThreads = 8;
  constexpr int kReads = 2000;
  std::vector<std::thread> threads;
  std::atomic<int> reads{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kReads; ++i) {
        Reader r;
        size_t n = 0;
        if (!gate.Reserve(&r, &n)) {
          while (r.admitted.load(std::memory_order_acquire) == 0) {
            std::this_thread::yield();
          }
          n = r.reserved.load(std::memory_order_acquire);
        }
        gate.Settle(n, kMessage, true);
        gate.Release(kMessage);
        reads.fetch_add(1, std::memory_order_relaxed);
        ASSERT_LE(r.admitted.load(std::memory_order_acquire), 1);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(reads.load(), kThreads * kReads);
  EXPECT_EQ(gate.in_flight(), 0u);
  EXPECT_EQ(gate.waiting(), 0u);
  EXPECT_LE(gate.peak(), kLimit);
}

}  // namespace
}  // namespace furrballs::service
