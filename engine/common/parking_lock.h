// engine/common/parking_lock.h: a lock that spins briefly and then parks
// the waiter on a Linux futex, for critical sections that may block.
//
// Thread safety: thread-safe; that is its purpose.
//
// Why not SpinLock: a key's write lock is held through a whole Set, which
// may wait for the reclaim mutex, yield while other threads finish writes,
// or write a page to RocksDB. A waiter spinning on a SpinLock meanwhile
// burns its core, and on an oversubscribed machine can keep the holder from
// running at all. Why not Mutex (std::mutex): a ParkingLock is one 4-byte
// word, so 1,024 of them per node, one per cache line, cost nothing beyond
// the line; uncontended it is one exchange, like the SpinLock it replaces.
//
// Protocol (Drepper, "Futexes Are Tricky", mutex 2): one atomic<uint32_t>
// state_, 0 = free, 1 = held with no sleeper, 2 = held and a waiter may
// sleep on the futex.
//   lock      compare_exchange 0 -> 1 (acquire). Failing that, spin up to
//             kSpins rounds retrying 0 -> 1, then exchange(2) (acquire)
//             until it returns 0, sleeping on FUTEX_WAIT(2) between tries;
//             the waiter that wins leaves 2 behind, so an unlock after it
//             still wakes the next sleeper.
//   unlock    exchange(0) (release); if it returned 2, FUTEX_WAKE one.
//   try_lock  compare_exchange 0 -> 1 (acquire), never sleeps.
// The acquire exchange of the next holder pairs with the release exchange of
// the previous one, so ThreadSanitizer sees the happens-before edge through
// the atomics (it does not need to understand the futex). FUTEX_WAIT
// compares the word with 2 in the kernel, so a wake between our exchange and
// our sleep makes the wait return at once instead of being lost.
#ifndef FURRBALLS_ENGINE_COMMON_PARKING_LOCK_H_
#define FURRBALLS_ENGINE_COMMON_PARKING_LOCK_H_

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>

#include <absl/base/thread_annotations.h>
#include <emmintrin.h>

namespace furrballs {

class ABSL_LOCKABLE ParkingLock {
 public:
  ParkingLock() = default;
  ParkingLock(const ParkingLock&) = delete;
  ParkingLock& operator=(const ParkingLock&) = delete;

  void lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() {
    uint32_t c = kFree;
    if (state_.compare_exchange_strong(c, kHeld, std::memory_order_acquire,
                                       std::memory_order_relaxed)) {
      return;
    }
    // Most key-lock sections are a few hundred nanoseconds: spin a little
    // before paying for two system calls.
    for (int i = 0; i < kSpins; ++i) {
      _mm_pause();
      c = kFree;
      if (state_.load(std::memory_order_relaxed) == kFree &&
          state_.compare_exchange_weak(c, kHeld, std::memory_order_acquire,
                                       std::memory_order_relaxed)) {
        return;
      }
    }
    while (state_.exchange(kHeldWithWaiters, std::memory_order_acquire) !=
           kFree) {
      Futex(FUTEX_WAIT_PRIVATE, kHeldWithWaiters);
    }
  }

  bool try_lock() ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true) {
    uint32_t c = kFree;
    return state_.load(std::memory_order_relaxed) == kFree &&
           state_.compare_exchange_strong(c, kHeld, std::memory_order_acquire,
                                          std::memory_order_relaxed);
  }

  void unlock() ABSL_UNLOCK_FUNCTION() {
    if (state_.exchange(kFree, std::memory_order_release) ==
        kHeldWithWaiters) {
      Futex(FUTEX_WAKE_PRIVATE, 1);
    }
  }

 private:
  static constexpr uint32_t kFree = 0;
  static constexpr uint32_t kHeld = 1;
  static constexpr uint32_t kHeldWithWaiters = 2;
  static constexpr int kSpins = 100;
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t) &&
                    std::atomic<uint32_t>::is_always_lock_free,
                "the futex syscall reads the atomic's word as a plain int");

  void Futex(int op, uint32_t value) {
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&state_), op, value,
            nullptr, nullptr, 0);
  }

  std::atomic<uint32_t> state_{kFree};
};

// RAII holder, so early returns cannot leak the lock.
class ABSL_SCOPED_LOCKABLE ParkingLockHolder {
 public:
  explicit ParkingLockHolder(ParkingLock& lock)
      ABSL_EXCLUSIVE_LOCK_FUNCTION(lock)
      : lock_(lock) {
    lock_.lock();
  }
  ~ParkingLockHolder() ABSL_UNLOCK_FUNCTION() { lock_.unlock(); }
  ParkingLockHolder(const ParkingLockHolder&) = delete;
  ParkingLockHolder& operator=(const ParkingLockHolder&) = delete;

 private:
  ParkingLock& lock_;
};

}  // namespace furrballs

#endif  // FURRBALLS_ENGINE_COMMON_PARKING_LOCK_H_
