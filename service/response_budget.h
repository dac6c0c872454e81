// service/response_budget.h: how many bytes of values one MultiGet or Batch
// answer may carry (--max_response_bytes), counted as its Gets complete.
//
// Thread safety: thread-safe; the ops of one answer complete on several
// threads at once (node workers, reload threads) and each calls Take.
//
// Why counted as the values arrive, not checked on the finished answer: the
// engine copies a found value into the op's string when the Get runs, so an
// answer checked only once encoded has already been built whole (a MultiGet
// of 1,000 keys of 1 MiB held 1 GiB before gRPC's send limit refused it).
// A Get whose value does not fit releases it at once and is answered
// RESOURCE_EXHAUSTED on its own; the values that fit are answered. So an
// answer holds at most the limit plus the values that are being copied at
// that moment (one per thread running its ops), and a caller always makes
// progress: the limit is at least one value of --max_value_bytes, so the
// first value to arrive always fits.
#ifndef FURRBALLS_SERVICE_RESPONSE_BUDGET_H_
#define FURRBALLS_SERVICE_RESPONSE_BUDGET_H_

#include <atomic>
#include <cstddef>
#include <string>

#include <absl/strings/str_cat.h>
#include <absl/strings/string_view.h>
#include <grpcpp/support/status.h>

namespace furrballs::service {

class ResponseBudget {
 public:
  // Starts a new answer that may carry `limit` bytes of values. Not
  // concurrent with Take (an answer is reset before its ops are handed over).
  void Reset(size_t limit) {
    limit_ = limit;
    used_.store(0, std::memory_order_relaxed);
  }

  // Counts `bytes` more if they fit; false (nothing counted) if they do not.
  bool Take(size_t bytes) {
    // Relaxed: the count guards no other memory; an op's value and code are
    // published to the thread that encodes the answer by the answer's own
    // count of ops still running (acq_rel).
    size_t used = used_.load(std::memory_order_relaxed);
    do {
      if (bytes > limit_ - used) return false;
    } while (!used_.compare_exchange_weak(used, used + bytes,
                                          std::memory_order_relaxed));
    return true;
  }

  // Takes a found value's bytes, or, when they do not fit, frees the value
  // and returns the answer for its Get. `name()` names the Get ("MultiGet
  // item 3"); it is called only then, since formatting a name for every
  // value that fits is work per op that nobody reads.
  template <typename Name>
  grpc::Status TakeValue(std::string* value, const Name& name) {
    if (Take(value->size())) return grpc::Status::OK;
    std::string().swap(*value);  // release the memory, not only the size
    return grpc::Status(
        grpc::StatusCode::RESOURCE_EXHAUSTED,
        absl::StrCat(name(), ": not answered: the values already in this "
                             "answer reach the limit of ",
                     limit_,
                     " bytes (--max_response_bytes); ask for this key "
                     "again in another call"));
  }

 private:
  size_t limit_ = 0;
  std::atomic<size_t> used_{0};
};

}  // namespace furrballs::service

#endif  // FURRBALLS_SERVICE_RESPONSE_BUDGET_H_
