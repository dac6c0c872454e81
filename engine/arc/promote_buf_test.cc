#include "engine/arc/promote_buf.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "engine/common/hash_pair.h"
#include "engine/common/spin_lock.h"

namespace furrballs {
namespace {

// Item i of producer p, recognizable after the trip through the buffer.
HashPair Item(uint64_t producer, uint64_t i) {
  return HashPair{producer, (producer << 40) | i};
}

std::vector<HashPair> DrainAll(PromoteBuf& buf) {
  std::vector<HashPair> out;
  buf.Drain([&](const HashPair& h) { out.push_back(h); });
  return out;
}

TEST(PromoteBufTest, DrainsInFifoOrder) {
  PromoteBuf buf;
  for (uint64_t i = 0; i < 100; ++i) ASSERT_TRUE(buf.Enqueue(Item(0, i)).accepted);
  const std::vector<HashPair> got = DrainAll(buf);
  ASSERT_EQ(got.size(), 100u);
  for (uint64_t i = 0; i < 100; ++i) EXPECT_EQ(got[i], Item(0, i));
  EXPECT_TRUE(DrainAll(buf).empty());
  EXPECT_EQ(buf.drained(), 100u);
  EXPECT_EQ(buf.dropped(), 0u);
}

TEST(PromoteBufTest, AsksForADrainEvery64thEnqueue) {
  PromoteBuf buf;
  for (uint64_t i = 1; i <= 3 * PromoteBuf::kDrainInterval; ++i) {
    const PromoteBuf::EnqueueResult r = buf.Enqueue(Item(0, i));
    EXPECT_TRUE(r.accepted);
    EXPECT_EQ(r.should_drain, i % PromoteBuf::kDrainInterval == 0) << i;
  }
}

// The buffer wraps many times when drained regularly.
TEST(PromoteBufTest, WrapsAroundWhenDrained) {
  PromoteBuf buf;
  uint64_t next_expected = 0;
  for (uint64_t i = 0; i < 100000; ++i) {
    const PromoteBuf::EnqueueResult r = buf.Enqueue(Item(0, i));
    ASSERT_TRUE(r.accepted);
    if (r.should_drain) {
      buf.Drain([&](const HashPair& h) {
        ASSERT_EQ(h, Item(0, next_expected));
        ++next_expected;
      });
    }
  }
  DrainAll(buf);
  EXPECT_EQ(buf.drained(), 100000u);
}

// A full buffer drops new promotions (it never overwrites unread ones) and
// the drops are counted; the dropped tickets do not block later ones.
TEST(PromoteBufTest, OverflowDropsAndCounts) {
  PromoteBuf buf;
  constexpr uint64_t kExtra = 44;
  for (uint64_t i = 0; i < PromoteBuf::kSlots; ++i) {
    ASSERT_TRUE(buf.Enqueue(Item(0, i)).accepted);
  }
  for (uint64_t i = 0; i < kExtra; ++i) {
    const PromoteBuf::EnqueueResult r = buf.Enqueue(Item(1, i));
    EXPECT_FALSE(r.accepted);
    EXPECT_TRUE(r.should_drain);
  }
  const std::vector<HashPair> got = DrainAll(buf);
  ASSERT_EQ(got.size(), PromoteBuf::kSlots);
  for (uint64_t i = 0; i < PromoteBuf::kSlots; ++i) EXPECT_EQ(got[i], Item(0, i));

  // The next drain skips the dropped tickets and counts them.
  EXPECT_TRUE(DrainAll(buf).empty());
  EXPECT_EQ(buf.dropped(), kExtra);

  // And the buffer works normally afterwards.
  for (uint64_t i = 0; i < 10; ++i) ASSERT_TRUE(buf.Enqueue(Item(2, i)).accepted);
  const std::vector<HashPair> after = DrainAll(buf);
  ASSERT_EQ(after.size(), 10u);
  for (uint64_t i = 0; i < 10; ++i) EXPECT_EQ(after[i], Item(2, i));
  EXPECT_EQ(buf.dropped(), kExtra);
}

// Far more enqueues than slots without a drain: the drainer catches up in
// one visit per cell instead of walking every lost ticket, and still counts
// each lost ticket exactly once.
TEST(PromoteBufTest, CatchUpCountsEveryLostTicketOnce) {
  PromoteBuf buf;
  constexpr uint64_t kTotal = 10 * PromoteBuf::kSlots + 17;
  uint64_t rejected = 0;
  for (uint64_t i = 0; i < kTotal; ++i) {
    if (!buf.Enqueue(Item(0, i)).accepted) ++rejected;
  }
  EXPECT_EQ(rejected, kTotal - PromoteBuf::kSlots);
  const std::vector<HashPair> got = DrainAll(buf);
  ASSERT_EQ(got.size(), PromoteBuf::kSlots);
  for (uint64_t i = 0; i < PromoteBuf::kSlots; ++i) EXPECT_EQ(got[i], Item(0, i));
  EXPECT_TRUE(DrainAll(buf).empty());
  EXPECT_EQ(buf.dropped(), rejected);
  for (uint64_t i = 0; i < 300; ++i) {
    const PromoteBuf::EnqueueResult r = buf.Enqueue(Item(1, i));
    ASSERT_TRUE(r.accepted);
    if (r.should_drain) DrainAll(buf);
  }
  DrainAll(buf);
  EXPECT_EQ(buf.drained(), PromoteBuf::kSlots + 300);
  EXPECT_EQ(buf.dropped(), rejected);
}

// A drain stops at the first unready ticket; it is bounded even when the
// buffer is refilled while it runs.
TEST(PromoteBufTest, DrainIsBoundedPerCall) {
  PromoteBuf buf;
  size_t n = 0;
  for (uint64_t i = 0; i < PromoteBuf::kSlots; ++i) buf.Enqueue(Item(0, i));
  uint64_t refill = 0;
  buf.Drain([&](const HashPair&) {
    ++n;
    buf.Enqueue(Item(1, refill++));  // a producer that never stops
  });
  EXPECT_LE(n, PromoteBuf::kSlots);
}

struct ProducerLog {
  std::vector<uint64_t> accepted;  // item numbers, in enqueue order
  uint64_t rejected = 0;
};

// Producers race one drainer (or drain cooperatively under a SpinLock, the
// way ConcurrentARC does). Every accepted item is drained exactly once and
// every rejected item is counted as dropped, once. (Order across a stalled
// writer is not kept: a drain consumes what is ready around it.)
void RunConcurrent(bool cooperative) {
  constexpr int kProducers = 4;
  constexpr uint64_t kItems = 50000;
  PromoteBuf buf;
  SpinLock drain_lock;
  std::vector<std::vector<uint64_t>> drained(kProducers);  // under drain_lock
  uint64_t foreign = 0;                                      // under drain_lock
  auto on_item = [&](const HashPair& h) {
    const uint64_t p = h.h1;
    if (p >= kProducers || (h.h2 >> 40) != p) {
      ++foreign;
      return;
    }
    drained[p].push_back(h.h2 & ((uint64_t{1} << 40) - 1));
  };
  std::vector<ProducerLog> logs(kProducers);
  std::atomic<int> running{kProducers};
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int p = 0; p < kProducers; ++p) {
    threads.emplace_back([&, p] {
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      for (uint64_t i = 0; i < kItems; ++i) {
        const PromoteBuf::EnqueueResult r = buf.Enqueue(Item(p, i));
        if (r.accepted) {
          logs[p].accepted.push_back(i);
        } else {
          ++logs[p].rejected;
        }
        if (cooperative && r.should_drain && drain_lock.try_lock()) {
          buf.Drain(on_item);
          drain_lock.unlock();
        }
        // With more threads than cores, let the others (the drainer) run
        // now and then, or a producer finishes inside one time slice.
        if (i % 1024 == 1023) std::this_thread::yield();
      }
      running.fetch_sub(1, std::memory_order_release);
    });
  }
  if (!cooperative) {
    threads.emplace_back([&] {
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      while (running.load(std::memory_order_acquire) > 0) {
        SpinLockHolder hold(drain_lock);
        buf.Drain(on_item);
      }
    });
  }
  go.store(true, std::memory_order_release);
  for (auto& t : threads) t.join();
  // Quiescent: a drain marks the unclaimed tickets, the next skips them;
  // a few more calls cover the per-call step bound.
  SpinLockHolder hold(drain_lock);
  for (int i = 0; i < 64; ++i) buf.Drain(on_item);

  EXPECT_EQ(foreign, 0u);
  uint64_t accepted = 0, rejected = 0;
  for (int p = 0; p < kProducers; ++p) {
    std::sort(drained[p].begin(), drained[p].end());
    EXPECT_EQ(drained[p], logs[p].accepted) << "producer " << p;
    accepted += logs[p].accepted.size();
    rejected += logs[p].rejected;
  }
  EXPECT_EQ(buf.drained(), accepted);
  EXPECT_EQ(buf.dropped(), rejected);
  EXPECT_EQ(accepted + rejected, kProducers * kItems);
  std::printf("%s: %llu accepted, %llu dropped\n",
              cooperative ? "cooperative" : "one drainer",
              static_cast<unsigned long long>(accepted),
              static_cast<unsigned long long>(rejected));
}

TEST(PromoteBufTest, ConcurrentProducersOneDrainer) { RunConcurrent(false); }

TEST(PromoteBufTest, ConcurrentProducersCooperativeDrain) {
  RunConcurrent(true);
}

}  // namespace
}  // namespace furrballs
