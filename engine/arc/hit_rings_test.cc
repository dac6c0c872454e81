// engine/arc/hit_rings_test.cc: a ring gives its owner's hits back in order,
// each once, drops exactly what does not fit, and stays exact with the
// owner and a drainer running at once (and under TSAN, race-free).
#include "engine/arc/hit_rings.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "engine/common/thread_slot.h"

namespace furrballs {
namespace {

HashPair Key(uint64_t i) { return HashPair{i, ~i}; }

TEST(HitRingsTest, GivesHitsBackInOrderAndDropsWhatDoesNotFit) {
  auto rings = std::make_unique<HitRings>();
  const uint32_t slot = 3;
  uint64_t next = 0;
  std::vector<uint64_t> seen;
  const auto take = [&seen](const HashPair& h) {
    EXPECT_EQ(h.h2, ~h.h1);
    seen.push_back(h.h1);
  };
  // Every kDrainInterval-th hit asks for a drain.
  for (uint64_t i = 1; i <= HitRings::kSlots; ++i) {
    EXPECT_EQ(rings->Enqueue(slot, Key(next++)),
              i % HitRings::kDrainInterval == 0);
  }
  // Full: the next hits are dropped, counted, and ask for a drain.
  EXPECT_TRUE(rings->Enqueue(slot, Key(1000)));
  EXPECT_TRUE(rings->Enqueue(slot, Key(1001)));
  EXPECT_EQ(rings->dropped(), 2u);
  EXPECT_EQ(rings->Drain(slot, take), HitRings::kSlots);
  // Other rings are empty and untouched.
  for (size_t r = 0; r < HitRings::kRings; ++r) {
    if (r != slot) EXPECT_EQ(rings->Drain(r, take), 0u);
  }
  // Wrapping around the cells keeps the order.
  for (int round = 0; round < 5; ++round) {
    for (int i = 0; i < 40; ++i) rings->Enqueue(slot, Key(next++));
    EXPECT_EQ(rings->Drain(slot, take), 40u);
  }
  ASSERT_EQ(seen.size(), next);
  for (uint64_t i = 0; i < next; ++i) ASSERT_EQ(seen[i], i);
  EXPECT_EQ(rings->dropped(), 2u);
}

TEST(HitRingsTest, OwnerAndDrainerAtOnceLoseNothingUncounted) {
  auto rings = std::make_unique<HitRings>();
  constexpr uint64_t kHits = 200000;
  std::atomic<bool> done{false};
  std::atomic<uint32_t> owner_slot{0};
  std::thread owner([&] {
    const ThreadSlot& slot = ThisThreadSlot();
    ASSERT_TRUE(slot.exclusive);
    owner_slot.store(slot.index + 1, std::memory_order_release);
    for (uint64_t i = 0; i < kHits; ++i) rings->Enqueue(slot.index, Key(i));
    done.store(true, std::memory_order_release);
  });
  uint32_t slot = 0;
  while ((slot = owner_slot.load(std::memory_order_acquire)) == 0) {
    std::this_thread::yield();
  }
  --slot;
  uint64_t consumed = 0;
  int64_t last = -1;
  bool ordered = true;
  const auto take = [&](const HashPair& h) {
    if (h.h2 != ~h.h1 || static_cast<int64_t>(h.h1) <= last) ordered = false;
    last = static_cast<int64_t>(h.h1);
    ++consumed;
  };
  while (!done.load(std::memory_order_acquire)) rings->Drain(slot, take);
  owner.join();
  rings->Drain(slot, take);
  EXPECT_TRUE(ordered) << "a hit came back twice, out of order or torn";
  EXPECT_EQ(consumed + rings->dropped(), kHits);
  EXPECT_GT(consumed, 0u);
}

}  // namespace
}  // namespace furrballs
