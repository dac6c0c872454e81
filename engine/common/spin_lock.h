// engine/common/spin_lock.h: test-and-test-and-set spin lock (report §2.8.3).
//
// Thread safety: thread-safe; that is its purpose.
//
// Used only where critical sections are a few hundred nanoseconds and never
// block (ARC list mutation, per-page bookkeeping). lock() spins on a relaxed
// load with a pause instruction between attempts so that waiting cores do not
// hammer the cache line with failed exchanges.
//
// Protocol: one atomic<bool>. lock() = exchange(true, acquire) until it
// returns false; unlock() = store(false, release). The acquire exchange pairs
// with the release store of the previous holder, so everything written inside
// one critical section is visible inside the next.
#ifndef FURRBALLS_ENGINE_COMMON_SPIN_LOCK_H_
#define FURRBALLS_ENGINE_COMMON_SPIN_LOCK_H_

#include <atomic>

#include <absl/base/thread_annotations.h>
#include <emmintrin.h>

namespace furrballs {

class ABSL_LOCKABLE SpinLock {
 public:
  SpinLock() = default;
  SpinLock(const SpinLock&) = delete;
  SpinLock& operator=(const SpinLock&) = delete;

  void lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() {
    while (locked_.exchange(true, std::memory_order_acquire)) {
      // Spin on a plain load until the holder releases: the line stays
      // shared in our cache instead of bouncing on every failed exchange.
      while (locked_.load(std::memory_order_relaxed)) _mm_pause();
    }
  }

  bool try_lock() ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true) {
    // The relaxed pre-check avoids taking the line exclusive when it is
    // obviously held (cooperative PromoteBuf drains call this often).
    return !locked_.load(std::memory_order_relaxed) &&
           !locked_.exchange(true, std::memory_order_acquire);
  }

  void unlock() ABSL_UNLOCK_FUNCTION() {
    locked_.store(false, std::memory_order_release);
  }

 private:
  std::atomic<bool> locked_{false};
};

// RAII holder, so early returns cannot leak the lock.
class ABSL_SCOPED_LOCKABLE SpinLockHolder {
 public:
  explicit SpinLockHolder(SpinLock& lock) ABSL_EXCLUSIVE_LOCK_FUNCTION(lock)
      : lock_(lock) {
    lock_.lock();
  }
  ~SpinLockHolder() ABSL_UNLOCK_FUNCTION() { lock_.unlock(); }
  SpinLockHolder(const SpinLockHolder&) = delete;
  SpinLockHolder& operator=(const SpinLockHolder&) = delete;

 private:
  SpinLock& lock_;
};

}  // namespace furrballs

#endif  // FURRBALLS_ENGINE_COMMON_SPIN_LOCK_H_
