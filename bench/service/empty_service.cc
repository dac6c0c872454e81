#include "bench/service/empty_service.h"

#include <deque>
#include <memory>
#include <utility>

#include <absl/base/thread_annotations.h>
#include <absl/synchronization/mutex.h>

namespace furrballs::bench {
namespace {

grpc::ServerUnaryReactor* FinishOk(grpc::CallbackServerContext* ctx) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

// Reads keep going while fewer than max_in_flight answers wait to be written;
// one write is in flight at a time, like service/pipeline_reactor.cc's Pipeline
// (whose answers come from node workers instead of the read callback). gRPC
// reactions are issued outside mu_, since gRPC may run their callbacks inline.
class EmptyPipelineReactor final
    : public grpc::ServerBidiReactor<v1::PipelineRequest,
                                     v1::PipelineResponse> {
 public:
  explicit EmptyPipelineReactor(size_t max_in_flight)
      : max_in_flight_(max_in_flight) {
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      bool finish;
      {
        absl::MutexLock lock(&mu_);
        reads_done_ = true;
        finish = ShouldFinishLocked();
      }
      if (finish) Finish(grpc::Status::OK);
      return;
    }
    auto response = std::make_unique<v1::PipelineResponse>();
    response->set_id(request_.id());
    switch (request_.op_case()) {
      case v1::PipelineRequest::kGet:
        response->mutable_get();
        break;
      case v1::PipelineRequest::kSet:
        response->mutable_set();
        break;
      case v1::PipelineRequest::kDelete:
        response->mutable_delete_();
        break;
      case v1::PipelineRequest::kTouch:
        response->mutable_touch();
        break;
      case v1::PipelineRequest::OP_NOT_SET:
        break;
    }
    const v1::PipelineResponse* to_write = nullptr;
    bool read_more;
    {
      absl::MutexLock lock(&mu_);
      outbox_.push_back(std::move(response));
      if (!writing_) {
        writing_ = true;
        to_write = outbox_.front().get();
      }
      read_more = outbox_.size() < max_in_flight_;
      if (!read_more) reading_paused_ = true;
    }
    if (to_write != nullptr) StartWrite(to_write);
    if (read_more) StartRead(&request_);
  }

  void OnWriteDone(bool ok) override {
    const v1::PipelineResponse* next = nullptr;
    bool resume_read = false;
    bool finish = false;
    {
      absl::MutexLock lock(&mu_);
      outbox_.pop_front();
      if (!ok) broken_ = true;  // client went away: drop what is left
      if (broken_) outbox_.clear();
      if (reading_paused_ && !reads_done_ && outbox_.size() < max_in_flight_) {
        reading_paused_ = false;
        resume_read = true;
      }
      if (!outbox_.empty()) {
        next = outbox_.front().get();
      } else {
        writing_ = false;
        finish = ShouldFinishLocked();
      }
    }
    if (next != nullptr) StartWrite(next);
    if (resume_read) StartRead(&request_);
    if (finish) Finish(grpc::Status::OK);
  }

  void OnDone() override { delete this; }

 private:
  bool ShouldFinishLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_ || !reads_done_ || writing_ || !outbox_.empty()) return false;
    finished_ = true;
    return true;
  }

  const size_t max_in_flight_;
  v1::PipelineRequest request_;  // owned by the outstanding read

  absl::Mutex mu_;
  bool reading_paused_ ABSL_GUARDED_BY(mu_) = false;
  bool reads_done_ ABSL_GUARDED_BY(mu_) = false;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<std::unique_ptr<v1::PipelineResponse>> outbox_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace

grpc::ServerUnaryReactor* EmptyCacheService::Get(
    grpc::CallbackServerContext* ctx, const v1::GetRequest*,
    v1::GetResponse* response) {
  response->set_found(false);
  return FinishOk(ctx);
}

grpc::ServerUnaryReactor* EmptyCacheService::Set(
    grpc::CallbackServerContext* ctx, const v1::SetRequest*,
    v1::SetResponse*) {
  return FinishOk(ctx);
}

grpc::ServerUnaryReactor* EmptyCacheService::Delete(
    grpc::CallbackServerContext* ctx, const v1::DeleteRequest*,
    v1::DeleteResponse*) {
  return FinishOk(ctx);
}

grpc::ServerUnaryReactor* EmptyCacheService::Touch(
    grpc::CallbackServerContext* ctx, const v1::TouchRequest*,
    v1::TouchResponse*) {
  return FinishOk(ctx);
}

grpc::ServerUnaryReactor* EmptyCacheService::MultiGet(
    grpc::CallbackServerContext* ctx, const v1::MultiGetRequest* request,
    v1::MultiGetResponse* response) {
  for (int i = 0; i < request->keys_size(); ++i) response->add_results();
  return FinishOk(ctx);
}

grpc::ServerUnaryReactor* EmptyCacheService::MultiSet(
    grpc::CallbackServerContext* ctx, const v1::MultiSetRequest* request,
    v1::MultiSetResponse* response) {
  for (int i = 0; i < request->items_size(); ++i) response->add_results();
  return FinishOk(ctx);
}

grpc::ServerBidiReactor<v1::PipelineRequest, v1::PipelineResponse>*
EmptyCacheService::Pipeline(grpc::CallbackServerContext*) {
  return new EmptyPipelineReactor(max_pipeline_in_flight_);
}

grpc::ServerUnaryReactor* EmptyCacheService::Stats(
    grpc::CallbackServerContext* ctx, const v1::StatsRequest*,
    v1::StatsResponse*) {
  return FinishOk(ctx);
}

}  // namespace furrballs::bench
