// service/in_flight_limit.h: InFlightLimit, a cap on what the service runs
// at once: cache operations (--max_in_flight), over every way they arrive
// (a unary RPC is one op, a MultiGet/MultiSet one per item, a Pipeline
// frame one, a Batch message one per op). The bytes of requests have their
// own cap (service/request_byte_gate.h). A request past a cap is
// answered RESOURCE_EXHAUSTED at once instead of queueing behind the
// others, so that the memory held by requests in the service stays
// bounded.
//
// Thread safety: thread-safe (one atomic counter).
#ifndef FURRBALLS_SERVICE_IN_FLIGHT_LIMIT_H_
#define FURRBALLS_SERVICE_IN_FLIGHT_LIMIT_H_

#include <atomic>
#include <cstddef>

namespace furrballs::service {

class InFlightLimit {
 public:
  // At most `limit` ops at once; 0 means no cap.
  explicit InFlightLimit(size_t limit) : limit_(limit) {}

  // Takes `n` slots, all or none; false (and nothing taken) if that would
  // pass the cap. Every true is matched by one Release(n).
  bool TryAcquire(size_t n) {
    if (limit_ == 0 || n == 0) return true;
    // Relaxed: the count only bounds concurrency; it orders no other data.
    // An over-shooting add is undone at once, so a concurrent TryAcquire
    // may see the cap reached for an instant and refuse: shedding errs on
    // the safe side.
    if (in_flight_.fetch_add(n, std::memory_order_relaxed) + n > limit_) {
      in_flight_.fetch_sub(n, std::memory_order_relaxed);
      return false;
    }
    return true;
  }

  void Release(size_t n) {
    if (limit_ != 0 && n != 0) {
      in_flight_.fetch_sub(n, std::memory_order_relaxed);
    }
  }

  size_t limit() const { return limit_; }
  // Ops holding a slot now (0 without a cap); for tests and metrics.
  size_t in_flight() const {
    return in_flight_.load(std::memory_order_relaxed);
  }

 private:
  const size_t limit_;
  std::atomic<size_t> in_flight_{0};
};

}  // namespace furrballs::service

#endif  // FURRBALLS_SERVICE_IN_FLIGHT_LIMIT_H_
