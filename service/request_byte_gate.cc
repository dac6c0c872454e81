#include "service/request_byte_gate.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace furrballs::service {

RequestByteGate::RequestByteGate(size_t limit, size_t first_estimate)
    : limit_(limit), first_estimate_(first_estimate) {}

size_t RequestByteGate::EstimateLocked() const {
  size_t estimate = first_estimate_;
  if (recent_count_ > 0) {
    estimate = *std::max_element(recent_.begin(),
                                 recent_.begin() + recent_count_);
  }
  // At least a kMaxSmallReads-th of the cap: with empty or tiny recent
  // messages the estimate would otherwise admit any number of reads, each
  // free to receive a message of any size. And at most the cap: a larger
  // reservation could only be admitted alone, which a read no larger than
  // the cap need not wait for.
  return std::min(std::max(estimate, limit_ / kMaxSmallReads), limit_);
}

bool RequestByteGate::FitsLocked(size_t n) const {
  return in_flight_ == 0 || in_flight_ + n <= limit_;
}

void RequestByteGate::TakeLocked(size_t n) {
  in_flight_ += n;
  peak_ = std::max(peak_, in_flight_);
}

bool RequestByteGate::TryAcquireOrAlone(size_t n) {
  if (limit_ == 0 || n == 0) return true;
  MutexLock lock(&mu_);
  // Queued reads came first: a received request does not overtake them
  // unless it fits beside the head's reservation too (it is refused
  // instead, freeing its bytes at once). Without this, overlapping unary
  // requests could keep a read that needs an empty gate waiting forever.
  if (!waiters_.empty()) {
    if (in_flight_ + n + EstimateLocked() > limit_) return false;
  } else if (!FitsLocked(n)) {
    return false;
  }
  TakeLocked(n);
  return true;
}

void RequestByteGate::Release(size_t n) {
  if (limit_ == 0 || n == 0) return;
  {
    MutexLock lock(&mu_);
    in_flight_ -= n;
    if (waiters_.empty()) return;
  }
  AdmitWaiters();
}

bool RequestByteGate::Reserve(Waiter* waiter, size_t* reserved) {
  *reserved = 0;
  if (limit_ == 0) return true;
  MutexLock lock(&mu_);
  const size_t n = EstimateLocked();
  // Arrival order: nobody passes a read that waits.
  if (waiters_.empty() && FitsLocked(n)) {
    TakeLocked(n);
    *reserved = n;
    return true;
  }
  waiters_.push_back(waiter);
  return false;
}

bool RequestByteGate::CancelWait(Waiter* waiter) {
  if (limit_ == 0) return false;
  bool removed = false;
  {
    MutexLock lock(&mu_);
    auto it = std::find(waiters_.begin(), waiters_.end(), waiter);
    if (it != waiters_.end()) {
      waiters_.erase(it);
      removed = true;
    }
  }
  // The waiter removed may have been the head that did not fit, with
  // smaller ones behind it; they may fit now.
  if (removed) AdmitWaiters();
  return removed;
}

void RequestByteGate::Settle(size_t reserved, size_t actual, bool read_ok) {
  if (limit_ == 0) return;
  {
    MutexLock lock(&mu_);
    in_flight_ -= reserved;
    TakeLocked(actual);
    if (read_ok) {
      recent_[recent_next_] = actual;
      recent_next_ = (recent_next_ + 1) % kRecentReads;
      recent_count_ = std::min(recent_count_ + 1, kRecentReads);
    }
    if (waiters_.empty()) return;
  }
  AdmitWaiters();
}

void RequestByteGate::AdmitWaiters() {
  std::vector<std::pair<Waiter*, size_t>> admitted;
  {
    MutexLock lock(&mu_);
    while (!waiters_.empty()) {
      const size_t n = EstimateLocked();
      if (!FitsLocked(n)) break;
      TakeLocked(n);
      admitted.emplace_back(waiters_.front(), n);
      waiters_.pop_front();
    }
  }
  // Outside the lock: a waiter starts its read, and gRPC may complete it
  // (and the waiter Settle) on this thread.
  for (const auto& [waiter, n] : admitted) waiter->Admitted(n);
}

size_t RequestByteGate::in_flight() const {
  MutexLock lock(&mu_);
  return in_flight_;
}

size_t RequestByteGate::waiting() const {
  MutexLock lock(&mu_);
  return waiters_.size();
}

size_t RequestByteGate::peak() const {
  MutexLock lock(&mu_);
  return peak_;
}

}  // namespace furrballs::service
