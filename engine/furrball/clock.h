// engine/furrball/clock.h: the monotonic millisecond clock that TTLs are
// measured against, and a manual clock for tests.
//
// Thread safety: every Clock must be safe to call from any thread
// (SteadyClock and ManualClock are).
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

}  // namespace furrballs

#endif  // FURRBALLS_ENGINE_FURRBALL_CLOCK_H_
