// engine/furrball/clock.h: the monotonic millisecond clock that TTLs are
// measured against, a manual clock for tests, and OperationClock, the clock
// as one operation reads it.
//
// Thread safety: every Clock must be safe to call from any thread
// (SteadyClock and ManualClock are); an OperationClock is thread-compatible,
// one per operation on its thread's stack.
//
// TTLs use a monotonic clock, never wall time: an NTP step must not expire
// (or resurrect) a whole cache. The clock is injectable so that tests can
// move time forward without sleeping (FurrBallOptions::clock).
#ifndef FURRBALLS_ENGINE_FURRBALL_CLOCK_H_
#define FURRBALLS_ENGINE_FURRBALL_CLOCK_H_

#include <atomic>
#include <chrono>
#include <cstdint>

namespace furrballs {

class Clock {
 public:
  virtual ~Clock() = default;
  // Milliseconds since an arbitrary, fixed origin; never decreases.
  virtual uint64_t NowMs() const = 0;
};

// std::chrono::steady_clock in milliseconds. The default clock.
class SteadyClock final : public Clock {
 public:
  uint64_t NowMs() const override {
    return static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(
            std::chrono::steady_clock::now().time_since_epoch())
            .count());
  }

  // A process-wide instance (stateless, so sharing it is free).
  static const SteadyClock* Get() {
    static const SteadyClock clock;
    return &clock;
  }
};

// A clock that moves only when told to. Starts at 1 so that no deadline
// computed from it is 0, which KeyMeta reserves for "never expires".
class ManualClock final : public Clock {
 public:
  explicit ManualClock(uint64_t start_ms = 1) : now_ms_(start_ms) {}

  // Relaxed: the clock orders nothing; callers that need a happens-before
  // edge between advancing time and observing it provide it themselves.
  uint64_t NowMs() const override {
    return now_ms_.load(std::memory_order_relaxed);
  }
  void AdvanceMs(uint64_t ms) {
    now_ms_.fetch_add(ms, std::memory_order_relaxed);
  }

 private:
  std::atomic<uint64_t> now_ms_;
};

// The time of one operation: the clock is read at most once, and only when a
// deadline has to be compared or computed. Most keys have no TTL, and a clock
// read (~20 ns through the vDSO) is a large share of a Get that takes a few
// hundred.
class OperationClock {
 public:
  explicit OperationClock(const Clock* clock) : clock_(clock) {}

  // The time, read on the first call and the same on every later one.
  uint64_t NowMs() {
    if (!read_) {
      now_ms_ = clock_->NowMs();
      read_ = true;
    }
    return now_ms_;
  }
  // Whether `deadline_ms` has passed; 0 means never, without a clock read.
  bool Passed(uint64_t deadline_ms) {
    return deadline_ms != 0 && NowMs() >= deadline_ms;
  }

 private:
  const Clock* const clock_;
  bool read_ = false;
  uint64_t now_ms_ = 0;
};

}  // namespace furrballs

#endif  // FURRBALLS_ENGINE_FURRBALL_CLOCK_H_
