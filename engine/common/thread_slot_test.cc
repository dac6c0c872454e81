// engine/common/thread_slot_test.cc: at most one live thread owns a slot,
// threads beyond the owned slots are told to share, and an exited thread's
// slot goes to the next thread.
#include "engine/common/thread_slot.h"

#include <gtest/gtest.h>

#include <latch>
#include <set>
#include <thread>
#include <vector>

namespace furrballs {
namespace {

TEST(ThreadSlotTest, ThreadsBeyondTheOwnedSlotsShare) {
  constexpr int kThreads = kOwnedThreadSlots + 4;
  std::latch claimed(kThreads);
  std::vector<ThreadSlot> slots(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      slots[t] = ThisThreadSlot();
      claimed.arrive_and_wait();  // all hold their slots at once
    });
  }
  for (std::thread& t : threads) t.join();
  std::set<uint32_t> owned;
  int shared = 0;
  for (const ThreadSlot& s : slots) {
    ASSERT_TRUE(s.claimed);
    if (s.exclusive) {
      EXPECT_LT(s.index, kOwnedThreadSlots);
      EXPECT_TRUE(owned.insert(s.index).second) << "two owners of " << s.index;
    } else {
      ++shared;
    }
  }
  EXPECT_GE(shared, kThreads - static_cast<int>(kOwnedThreadSlots));
}

TEST(ThreadSlotTest, AnExitedThreadsSlotGoesToTheNextThread) {
  // Many more threads than owned slots, one after another: each finds the
  // previous one's slot given back.
  for (int t = 0; t < 4 * static_cast<int>(kOwnedThreadSlots); ++t) {
    ThreadSlot slot;
    std::thread([&] { slot = ThisThreadSlot(); }).join();
    EXPECT_TRUE(slot.exclusive) << "thread " << t;
  }
}

TEST(ThreadSlotTest, TheAnswerStaysWhileTheThreadRuns) {
  const ThreadSlot first = ThisThreadSlot();
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(ThisThreadSlot().index, first.index);
    EXPECT_EQ(ThisThreadSlot().exclusive, first.exclusive);
  }
}

}  // namespace
}  // namespace furrballs
