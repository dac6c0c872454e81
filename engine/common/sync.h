// engine/common/sync.h: an annotated blocking mutex, condition variable
// and one-shot notification over the standard library's pthread primitives.
//
// Thread safety: thread-safe; that is their purpose.
//
// Why not absl::Mutex: Debian's Abseil is not built with ThreadSanitizer, so
// TSAN cannot see the happens-before edges an absl::Mutex creates and would
// report races on everything it protects (and hiding them with suppressions
// would hide real ones too). pthread mutexes and condition variables are
// intercepted by TSAN. The Abseil annotations are kept, so clang's
// -Wthread-safety still checks every ABSL_GUARDED_BY against these.
//
// Users: NodeJob's queue and phases, a node's reclaim mutex (which a writer
// takes only when it found no room at all), the service's per-node dispatch
// queues and Pipeline streams.
#ifndef FURRBALLS_ENGINE_COMMON_SYNC_H_
#define FURRBALLS_ENGINE_COMMON_SYNC_H_

#include <chrono>
#include <condition_variable>
#include <mutex>

#include <absl/base/thread_annotations.h>

namespace furrballs {

class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }
  // Takes the mutex if it is free; never blocks.
  bool TryLock() ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true) {
    return mu_.try_lock();
  }

 private:
  friend class CondVar;
  std::mutex mu_;
};

class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) {
    mu_->Lock();
  }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

class CondVar {
 public:
  using Clock = std::chrono::steady_clock;

  // Atomically releases *mu and waits for a signal, then re-acquires *mu.
  // May wake spuriously: callers wait in a loop on their condition.
  void Wait(Mutex* mu) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::unique_lock<std::mutex> l(mu->mu_, std::adopt_lock);
    cv_.wait(l);
    l.release();  // the caller's lock stays held
  }
  // As Wait, but also returns at `deadline`.
  void WaitUntil(Mutex* mu, Clock::time_point deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::unique_lock<std::mutex> l(mu->mu_, std::adopt_lock);
    cv_.wait_until(l, deadline);
    l.release();
  }
  void Signal() { cv_.notify_one(); }
  void SignalAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

// A one-shot event: Notify once, any number of waiters.
class Notification {
 public:
  void Notify() {
    MutexLock l(&mu_);
    notified_ = true;
    cv_.SignalAll();
  }
  void WaitForNotification() {
    MutexLock l(&mu_);
    while (!notified_) cv_.Wait(&mu_);
  }

 private:
  Mutex mu_;
  CondVar cv_;
  bool notified_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace furrballs

#endif  // FURRBALLS_ENGINE_COMMON_SYNC_H_
