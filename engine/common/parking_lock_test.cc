// ParkingLock: exclusion with more threads than cores (so waiters do park on
// the futex and must be woken), and try_lock never taking a held lock.
#include "engine/common/parking_lock.h"

#include <cstdint>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace furrballs {
namespace {

TEST(ParkingLockTest, ExcludesAndWakesEveryWaiter) {
  ParkingLock lock;
  uint64_t counter = 0;  // plain: only the lock orders the increments
  constexpr int kThreads = 8;
  constexpr int kRounds = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kRounds; ++i) {
        ParkingLockHolder l(lock);
        // A read-modify-write over a yield: a second holder in here would
        // lose increments (and ThreadSanitizer would report the race).
        const uint64_t seen = counter;
        if (i % 64 == 0) std::this_thread::yield();
        counter = seen + 1;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(counter, uint64_t{kThreads} * kRounds);
}

TEST(ParkingLockTest, TryLockFailsWhileHeldAndSucceedsAfter) {
  ParkingLock lock;
  ASSERT_TRUE(lock.try_lock());
  bool taken = true;
  std::thread other([&] { taken = lock.try_lock(); });
  other.join();
  EXPECT_FALSE(taken);
  lock.unlock();
  std::thread again([&] {
    taken = lock.try_lock();
    if (taken) lock.unlock();
  });
  again.join();
  EXPECT_TRUE(taken);
}

}  // namespace
}  // namespace furrballs
