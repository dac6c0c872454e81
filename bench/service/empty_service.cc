#include "bench/service/empty_service.h"

#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <absl/base/thread_annotations.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/string_view.h>
#include <absl/synchronization/mutex.h>
#include <grpcpp/support/slice.h>

#include "service/batch_wire.h"
#include "service/raw_call.h"

namespace furrballs::bench {
namespace {

grpc::ServerUnaryReactor* FinishOk(grpc::CallbackServerContext* ctx) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

// A stream that answers each message it reads at once, in the read
// callback: the shape of service/pipeline_reactor.cc and batch_reactor.cc
// without the cache. The answer is queued for the one write in flight before
// the next read is posted (so the client's next message finds a read
// waiting, as on the real server), and reading pauses while `max_queued`
// answers wait for their write. Answers are reused from message to message.
// gRPC reactions are issued outside mu_, since gRPC may run their callbacks
// inline. `Answer` holds the message to write as its member `frame`.
template <typename Request, typename Response, typename Answer>
class AnsweringReactor : public grpc::ServerBidiReactor<Request, Response> {
 public:
  void OnWriteDone(bool ok) override {
    const Response* next = nullptr;
    bool resume_read = false;
    bool finish = false;
    grpc::Status final_status;
    {
      absl::MutexLock lock(&mu_);
      free_.push_back(std::move(outbox_.front()));
      outbox_.pop_front();
      if (!ok) broken_ = true;  // client went away: drop what is left
      if (broken_) {
        outbox_.clear();
        if (reading_paused_) reads_done_ = true;  // no read will resume
      }
      if (reading_paused_ && !reads_done_ && outbox_.size() < max_queued_) {
        reading_paused_ = false;
        resume_read = true;
      }
      if (!outbox_.empty()) {
        next = &outbox_.front()->frame;
      } else {
        writing_ = false;
      }
      finish = ShouldFinishLocked();
      final_status = final_status_;
    }
    if (next != nullptr) this->StartWrite(next);
    if (resume_read) this->StartRead(&request_);
    if (finish) this->Finish(final_status);
  }

  void OnDone() override { delete this; }

 protected:
  explicit AnsweringReactor(size_t max_queued) : max_queued_(max_queued) {}

  // Posts the first read; the derived constructor calls it once its own
  // members are ready, since the read may complete at once.
  void Begin() { this->StartRead(&request_); }

  // An answer to fill: a written one when there is one.
  std::unique_ptr<Answer> TakeAnswer() {
    absl::MutexLock lock(&mu_);
    if (free_.empty()) return std::make_unique<Answer>();
    std::unique_ptr<Answer> answer = std::move(free_.back());
    free_.pop_back();
    return answer;
  }

  // Queues the answer to the message just read, then reads the next one
  // unless max_queued answers wait.
  void AnswerAndReadMore(std::unique_ptr<Answer> answer) {
    const Response* to_write = nullptr;
    bool read_more;
    {
      absl::MutexLock lock(&mu_);
      outbox_.push_back(std::move(answer));
      if (!writing_) {
        writing_ = true;
        to_write = &outbox_.back()->frame;
      }
      read_more = outbox_.size() < max_queued_;
      if (!read_more) reading_paused_ = true;
    }
    if (to_write != nullptr) this->StartWrite(to_write);
    if (read_more) this->StartRead(&request_);
  }

  // No more messages will be read; the stream ends with `status` once every
  // answer is written.
  void EndReads(const grpc::Status& status) {
    bool finish;
    grpc::Status final_status;
    {
      absl::MutexLock lock(&mu_);
      reads_done_ = true;
      if (final_status_.ok()) final_status_ = status;
      finish = ShouldFinishLocked();
      final_status = final_status_;
    }
    if (finish) this->Finish(final_status);
  }

  Request request_;  // owned by the outstanding read

 private:
  bool ShouldFinishLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_ || !reads_done_ || writing_ || !outbox_.empty()) return false;
    finished_ = true;
    return true;
  }

  const size_t max_queued_;
  absl::Mutex mu_;
  bool reading_paused_ ABSL_GUARDED_BY(mu_) = false;
  bool reads_done_ ABSL_GUARDED_BY(mu_) = false;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status final_status_ ABSL_GUARDED_BY(mu_);
  std::deque<std::unique_ptr<Answer>> outbox_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<Answer>> free_ ABSL_GUARDED_BY(mu_);
};

struct PipelineAnswer {
  v1::PipelineResponse frame;
};

// Echoes each request's id with an empty result of its kind; reads pause
// while max_in_flight answers wait, like service/pipeline_reactor.cc (whose
// answers come from node workers instead of the read callback).
class EmptyPipelineReactor final
    : public AnsweringReactor<v1::PipelineRequest, v1::PipelineResponse,
                              PipelineAnswer> {
 public:
  explicit EmptyPipelineReactor(size_t max_in_flight)
      : AnsweringReactor(max_in_flight) {
    Begin();
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      EndReads(grpc::Status::OK);
      return;
    }
    std::unique_ptr<PipelineAnswer> answer = TakeAnswer();
    v1::PipelineResponse& response = answer->frame;
    response.Clear();
    response.set_id(request_.id());
    switch (request_.op_case()) {
      case v1::PipelineRequest::kGet:
        response.mutable_get();
        break;
      case v1::PipelineRequest::kSet:
        response.mutable_set();
        break;
      case v1::PipelineRequest::kDelete:
        response.mutable_delete_();
        break;
      case v1::PipelineRequest::kTouch:
        response.mutable_touch();
        break;
      case v1::PipelineRequest::OP_NOT_SET:
        break;
    }
    AnswerAndReadMore(std::move(answer));
  }
};

// The answer to a Batch op: what EmptyCacheService's header promises, built
// from constants so that nothing is allocated or looked up per op.
service::OpAnswer AnswerTo(const service::OpView& op) {
  static constexpr char kValue[EmptyCacheService::kValueBytes + 1] =
      "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
  using Kind = service::OpAnswer::Kind;
  service::OpAnswer a;
  a.id = op.id;
  switch (op.kind) {
    case service::OpView::Kind::kGet:
      a.kind = Kind::kGet;
      a.found = true;
      a.value = absl::string_view(kValue, EmptyCacheService::kValueBytes);
      a.version = 1;
      break;
    case service::OpView::Kind::kSet:
      a.kind = Kind::kSet;
      a.version = 1;
      break;
    case service::OpView::Kind::kDelete:
      a.kind = Kind::kDelete;
      a.deleted = true;
      break;
    case service::OpView::Kind::kTouch:
      a.kind = Kind::kTouch;
      break;
    case service::OpView::Kind::kNone:
      a.code = static_cast<int32_t>(grpc::StatusCode::INVALID_ARGUMENT);
      a.message = "Batch: the operation has no kind";
      break;
  }
  return a;
}

struct BatchAnswer {
  std::string bytes;  // the encoded BatchResponse; capacity kept
  grpc::ByteBuffer frame;
};

// Reads each message into views (service/batch_wire.h) and encodes its
// answer with the real service's encoder, as service/batch_reactor.cc does
// around the cache. The request's bytes and views are members: one read is
// outstanding at a time, and they are done with before the next is posted.
class EmptyBatchReactor final
    : public AnsweringReactor<grpc::ByteBuffer, grpc::ByteBuffer,
                              BatchAnswer> {
 public:
  EmptyBatchReactor(size_t max_batch_ops, std::atomic<uint64_t>* answered)
      : AnsweringReactor(EmptyCacheService::kMaxQueuedAnswers),
        max_batch_ops_(max_batch_ops),
        answered_(answered) {
    Begin();
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      EndReads(grpc::Status::OK);
      return;
    }
    uint64_t id = 0;
    uint64_t timeout_ms = 0;
    size_t op_count = 0;
    const bool flat = service::FlattenMessage(request_, &request_bytes_);
    request_.Clear();
    const bool parsed =
        flat && service::ParseBatchRequest(request_bytes_, max_batch_ops_, &id,
                                           &timeout_ms, &views_, &op_count);
    if (!parsed && (!flat || op_count <= max_batch_ops_)) {
      EndReads(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                            "Batch: a frame could not be parsed as a "
                            "furrballs.v1.BatchRequest"));
      return;
    }
    std::unique_ptr<BatchAnswer> answer = TakeAnswer();
    std::string& bytes = answer->bytes;
    bytes.clear();
    if (!parsed) {
      service::BeginBatchResponse(
          id, static_cast<int32_t>(grpc::StatusCode::INVALID_ARGUMENT),
          absl::StrCat("Batch: ", op_count, " operations, over the limit of ",
                       max_batch_ops_, " (--max_batch_ops)"),
          &bytes);
    } else {
      service::BeginBatchResponse(id, 0, {}, &bytes);
      for (const service::OpView& op : views_) {
        service::AppendOpAnswer(AnswerTo(op), &bytes);
      }
    }
    grpc::Slice slice(bytes.data(), bytes.size());
    answer->frame = grpc::ByteBuffer(&slice, 1);
    answered_->fetch_add(1, std::memory_order_relaxed);
    AnswerAndReadMore(std::move(answer));
  }

 private:
  const size_t max_batch_ops_;
  std::atomic<uint64_t>* const answered_;
  std::string request_bytes_;
  std::vector<service::OpView> views_;
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

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>*
EmptyCacheService::Batch(grpc::CallbackServerContext*) {
  return new EmptyBatchReactor(max_batch_ops_, &batch_messages_);
}

}  // namespace furrballs::bench
