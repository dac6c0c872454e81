#include "service/callback_threads.h"

#include <algorithm>

#include <absl/strings/match.h>
#include <absl/strings/str_cat.h>
#include <absl/time/time.h>
#include <grpc/support/cpu.h>
#include <grpcpp/grpcpp.h>

namespace furrballs::service {

// One parking call. Its buffers and context must outlive the call, i.e. the
// callback's return, which the destructor waits for.
struct CallbackThreadLimit::Call {
  grpc::ClientContext ctx;
  grpc::ByteBuffer request;  // an empty HealthCheckRequest: the server itself
  grpc::ByteBuffer response;
};

int CallbackThreadLimit::GrpcCallbackThreads() {
  // CallbackAlternativeCQ::Ref in gRPC 1.51's completion_queue_cc.cc.
  return static_cast<int>(std::clamp(gpr_cpu_num_cores() / 2, 2u, 16u));
}

int CallbackThreadLimit::Automatic() {
  return absl::StartsWith(grpc::Version(), "1.51.") && gpr_cpu_num_cores() <= 2
             ? 1
             : 0;
}

absl::StatusOr<std::unique_ptr<CallbackThreadLimit>> CallbackThreadLimit::Start(
    grpc::Server* server, int threads) {
  if (threads < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "gRPC callback threads: ", threads, " asked for, at least 1 needed"));
  }
  const int to_park = GrpcCallbackThreads() - threads;
  std::unique_ptr<CallbackThreadLimit> limit(new CallbackThreadLimit(
      to_park > 0 ? server->InProcessChannel(grpc::ChannelArguments())
                  : nullptr));
  if (to_park <= 0) return limit;
  if (!absl::StartsWith(grpc::Version(), "1.51.")) {
    return absl::FailedPreconditionError(absl::StrCat(
        "gRPC callback threads: only known for gRPC 1.51, this is gRPC ",
        grpc::Version(), "; 0 leaves gRPC's own number"));
  }
  limit->call_storage_ = std::make_unique<Call[]>(to_park);
  for (int i = 0; i < to_park; ++i) limit->Park(&limit->call_storage_[i]);
  absl::MutexLock lock(&limit->mu_);
  const int parked = to_park;
  auto all_parked = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(limit->mu_) {
    return limit->waiting_ == parked;
  };
  if (!limit->mu_.AwaitWithTimeout(absl::Condition(&all_parked),
                                   absl::Seconds(10))) {
    const int waiting = limit->waiting_;
    return absl::DeadlineExceededError(absl::StrCat(
        "gRPC callback threads: ", waiting, " of ", to_park,
        " parked after 10 s (gRPC runs fewer callback threads than ",
        GrpcCallbackThreads(), "?); 0 leaves gRPC's own number"));
  }
  return limit;
}

CallbackThreadLimit::CallbackThreadLimit(std::shared_ptr<grpc::Channel> channel)
    : channel_(std::move(channel)), stub_(channel_) {}

void CallbackThreadLimit::Park(Call* call) {
  ++calls_;
  // A default ByteBuffer is no message at all (gRPC aborts on it); one
  // empty slice is the empty HealthCheckRequest.
  grpc::Slice empty;
  call->request = grpc::ByteBuffer(&empty, 1);
  stub_.UnaryCall(&call->ctx, "/grpc.health.v1.Health/Check",
                  grpc::StubOptions(), &call->request, &call->response,
                  [this](const grpc::Status&) {
                    // Runs on one of gRPC's callback threads and keeps it
                    // until the limit is destroyed; a thread that waits here
                    // cannot take another parking callback, so each parks
                    // its own thread.
                    absl::MutexLock lock(&mu_);
                    ++waiting_;
                    mu_.Await(absl::Condition(&released_));
                    --waiting_;
                    ++returned_;
                  });
}

CallbackThreadLimit::~CallbackThreadLimit() {
  absl::MutexLock lock(&mu_);
  released_ = true;
  // A callback that has not started yet (Start failed: no thread was free
  // for it) runs on a released thread and returns at once.
  auto all_returned = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return returned_ == calls_;
  };
  mu_.Await(absl::Condition(&all_returned));
}

}  // namespace furrballs::service
