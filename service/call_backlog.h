// service/call_backlog.h: CallBacklog, the MultiSet calls read and not yet
// ended by gRPC, and when a large backlog of them has drained.
//
// Thread safety: thread-safe (atomics); Read and End may be called from any
// thread.
//
// Why. gRPC 1.51 ends a callback call (OnDone: its gRPC call arena, the
// reactor, the reply) on its default-executor thread, which can fall behind
// the thread reading and answering the next calls (request_byte_gate.h,
// kCallStateBytes). The calls that pile up meanwhile are small allocations
// of the reading thread, in its malloc arena; once they have ended, glibc
// keeps most of that memory resident (free chunks under live ones: 7-11 MiB
// at the end of 64 B fills, bench/results/2026-11-25-arcrise). End reports
// the moment a backlog of at least kBurst calls has drained to a kDrained-th
// of its peak, once per backlog, so the caller can give the memory back
// (malloc_settings.h, GiveBackFreeHeap) then and not on every call.
#ifndef FURRBALLS_SERVICE_CALL_BACKLOG_H_
#define FURRBALLS_SERVICE_CALL_BACKLOG_H_

#include <atomic>
#include <cstdint>

namespace furrballs::service {

class CallBacklog {
 public:
  // A backlog worth giving memory back after: about 1.3 MiB of call state.
  static constexpr int64_t kBurst = 64;
  // Drained: at most peak / kDrained calls left.
  static constexpr int64_t kDrained = 8;

  // A call was read; it counts until End.
  void Read() {
    const int64_t now = live_.fetch_add(1, std::memory_order_relaxed) + 1;
    int64_t peak = peak_.load(std::memory_order_relaxed);
    while (now > peak &&
           !peak_.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
    }
  }

  // A call counted by Read ended. True for exactly one End per drained
  // backlog: the one that brings the count to peak / kDrained or below
  // after the count reached kBurst; the peak starts over (from the next
  // Read).
  bool End() {
    const int64_t now = live_.fetch_sub(1, std::memory_order_relaxed) - 1;
    int64_t peak = peak_.load(std::memory_order_relaxed);
    if (peak < kBurst || now > peak / kDrained) return false;
    // Only one End wins the reset for a given peak.
    return peak_.compare_exchange_strong(peak, 0, std::memory_order_relaxed);
  }

  int64_t live() const { return live_.load(std::memory_order_relaxed); }

 private:
  std::atomic<int64_t> live_{0};
  // The largest count since the last drained backlog.
  std::atomic<int64_t> peak_{0};
};

}  // namespace furrballs::service

#endif  // FURRBALLS_SERVICE_CALL_BACKLOG_H_
