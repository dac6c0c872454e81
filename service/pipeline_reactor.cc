// The Pipeline stream's reactor (see CacheService::Pipeline).
#include <deque>
#include <memory>
#include <optional>
#include <utility>

#include <absl/base/thread_annotations.h>
#include <absl/strings/str_cat.h>

#include "engine/common/sync.h"
#include "service/cache_service.h"
#include "service/raw_call.h"
#include "service/request_codec.h"
#include "service/unary_call.h"

namespace furrballs::service {
namespace {

using grpc::Status;
using grpc::StatusCode;

constexpr size_t kAnswerOverheadBytes = CacheService::kAnswerOverheadBytes;

const char* PipelineOpName(v1::PipelineRequest::OpCase op) {
  switch (op) {
    case v1::PipelineRequest::kGet:
      return "Pipeline Get";
    case v1::PipelineRequest::kSet:
      return "Pipeline Set";
    case v1::PipelineRequest::kDelete:
      return "Pipeline Delete";
    case v1::PipelineRequest::kTouch:
      return "Pipeline Touch";
    case v1::PipelineRequest::OP_NOT_SET:
      break;
  }
  return "Pipeline";
}

// The Pipeline stream. Reads are processed as they arrive; completions, which
// arrive on node workers in any order, queue their responses and one write is
// in flight at a time. An op counts as in flight from its read until its
// answer is written, charged its request's bytes and the largest answer it
// can have (a Get: --max_value_bytes) until it completes, then its answer's
// bytes; reading pauses while --max_pipeline_in_flight ops are in flight or
// their charges reach --max_stream_bytes (flow control back to the client).
// So a client that stops reading holds at most that on the server, not a
// queue of answers that grows with what it keeps sending. The stream
// finishes once the client half-closed and every op was answered, with OK;
// or, after a frame that does not parse, once every op read before it was
// answered, with INVALID_ARGUMENT (nothing after that frame is read: its id
// is unknown, so it cannot be answered on its own).
//
// Frames are raw bytes (service/raw_call.h): requests are parsed here and
// responses serialized in Complete.
//
// gRPC reactions (StartRead/StartWrite/Finish) are issued outside mu_, since
// gRPC may run the matching callback inline.
class PipelineReactor final
    : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  PipelineReactor(CacheService* service, grpc::CallbackServerContext* ctx)
      : service_(service), ctx_(ctx), token_(service->TokenOf(*ctx)) {
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      EndReads(Status::OK);
      return;
    }
    ++frames_read_;
    auto item = std::make_unique<Item>();
    item->charge = request_.Length() + kAnswerOverheadBytes;
    item->start = RequestStats::Clock::now();
    item->reactor = this;
    const bool parsed = ParseMessage(request_, &item->request);
    request_.Clear();
    if (!parsed) {
      const Status bad = BadFrame(item->request);
      service_->RecordRequest(RequestOp::kPipeline, item->start, bad);
      EndReads(bad);
      return;
    }
    item->response.set_id(item->request.id());
    if (item->request.has_get()) {
      item->charge += service_->limits().max_value_bytes;
    }
    Status s = Prepare(*item);
    // Each op takes a slot of the service's in-flight cap once admitted and
    // decoded; one past it is answered on its own and the stream goes on.
    if (s.ok()) {
      item->holds_in_flight_slot = service_->in_flight().TryAcquire(1);
      if (!item->holds_in_flight_slot) {
        s = service_->AtInFlightLimit(
            PipelineOpName(item->request.op_case()));
      }
    }
    bool read_more;
    {
      MutexLock lock(&mu_);
      ++in_flight_;
      held_bytes_ += item->charge;
      read_more = !OverLimitsLocked();
      if (!read_more) reading_paused_ = true;
    }
    if (!s.ok()) {
      Complete(item.release(), s);
    } else {
      Item* raw = item.release();
      if (Error e = service_->dispatcher()->Submit(&raw->op); e != Error::kOk) {
        Complete(raw, service_->codec().SubmitStatus(e, "Pipeline"));
      }
    }
    if (read_more) StartRead(&request_);
  }

  void OnWriteDone(bool ok) override {
    const grpc::ByteBuffer* next = nullptr;
    bool resume_read = false;
    bool finish = false;
    Status final_status;
    {
      MutexLock lock(&mu_);
      Release(outbox_.front());
      outbox_.pop_front();
      if (!ok) broken_ = true;  // client went away: drop what is left
      if (broken_) {
        // A paused read will not be started again: the stream ends once
        // the ops in flight are done.
        if (reading_paused_) reads_done_ = true;
        for (const Answer& a : outbox_) Release(a);
        outbox_.clear();
      }
      if (!outbox_.empty()) {
        next = outbox_.front().frame.get();
      } else {
        writing_ = false;
      }
      resume_read = MayResumeReadingLocked();
      finish = ShouldFinishLocked();
      final_status = final_status_;
    }
    if (next != nullptr) StartWrite(next);
    if (resume_read) StartRead(&request_);
    if (finish) Finish(final_status);
  }

  void OnDone() override { delete this; }

 private:
  struct Item {
    PipelineReactor* reactor = nullptr;
    v1::PipelineRequest request;
    v1::PipelineResponse response;
    CacheOp op;
    RequestStats::Clock::time_point start;  // when its read completed
    size_t charge = 0;  // bytes counted against --max_stream_bytes
    bool holds_in_flight_slot = false;
  };

  // An answer waiting to be written, with its op's charge.
  struct Answer {
    std::unique_ptr<grpc::ByteBuffer> frame;
    size_t charge = 0;
  };

  Status Prepare(Item& item) {
    // Each op is admitted like a new RPC: a stream opened before a drain
    // began stays open but its new ops are refused, and a token removed from
    // the token file stops working on open streams too. Only Gets are reads.
    const v1::PipelineRequest::OpCase op_case = item.request.op_case();
    if (Status s = service_->Admit(
            token_,
            op_case == v1::PipelineRequest::kGet ? Access::kRead
                                                 : Access::kWrite,
            PipelineOpName(op_case));
        !s.ok()) {
      return s;
    }
    CacheOp& op = item.op;
    op.deadline = SteadyDeadline(ctx_);
    op.on_done = [](CacheOp* o, void* context) {
      auto* it = static_cast<Item*>(context);
      it->reactor->Complete(
          it, it->reactor->service_->codec().StatusOf(*o, "Pipeline"));
    };
    op.done_context = &item;
    return service_->codec().Decode(item.request, op, &item.response);
  }

  // Queues the answer to `item` (taking ownership) and starts a write if none
  // is in flight. Runs on a node worker, or on a gRPC thread for rejections.
  void Complete(Item* item, const Status& status) {
    std::unique_ptr<Item> owned(item);
    if (item->holds_in_flight_slot) service_->in_flight().Release(1);
    service_->RecordRequest(RequestOp::kPipeline, item->start, status);
    v1::PipelineResponse& resp = item->response;
    RequestCodec::Encode(item->op, status, &resp);
    auto frame = std::make_unique<grpc::ByteBuffer>();
    if (Status s = SerializeMessage(resp, frame.get()); !s.ok()) {
      // Only a response over protobuf's size limit fails; the op is then
      // answered with why, which is small enough to always serialize.
      v1::PipelineResponse failed;
      failed.set_id(resp.id());
      failed.set_code(static_cast<int>(StatusCode::INTERNAL));
      failed.set_message(absl::StrCat("Pipeline: the answer could not be "
                                      "serialized: ", s.error_message()));
      SerializeMessage(failed, frame.get());
    }
    // From here the op holds its answer's bytes only (the Item goes), and
    // is charged those instead of the largest answer it could have had.
    const size_t charged = item->charge;
    Answer answer{std::move(frame), 0};
    answer.charge = answer.frame->Length() + kAnswerOverheadBytes;
    owned.reset();
    const grpc::ByteBuffer* to_write = nullptr;
    bool resume_read = false;
    bool finish = false;
    Status final_status;
    {
      MutexLock lock(&mu_);
      held_bytes_ = held_bytes_ - charged + answer.charge;
      resume_read = MayResumeReadingLocked();
      if (broken_) {
        Release(answer);
      } else {
        outbox_.push_back(std::move(answer));
        if (!writing_) {
          writing_ = true;
          to_write = outbox_.front().frame.get();
        }
      }
      finish = ShouldFinishLocked();
      final_status = final_status_;
    }
    if (to_write != nullptr) StartWrite(to_write);
    if (resume_read) StartRead(&request_);
    if (finish) Finish(final_status);
  }

  // No more frames will be read; the stream ends with `status` once every op
  // read so far is answered.
  void EndReads(const Status& status) {
    bool finish = false;
    Status final_status;
    {
      MutexLock lock(&mu_);
      reads_done_ = true;
      if (final_status_.ok()) final_status_ = status;
      finish = ShouldFinishLocked();
      final_status = final_status_;
    }
    if (finish) Finish(final_status);
  }

  // Why the stream ends at frame frames_read_, which did not parse.
  Status BadFrame(const v1::PipelineRequest& request) const {
    return Status(
        StatusCode::INVALID_ARGUMENT,
        absl::StrCat("Pipeline: frame ", frames_read_,
                     " of the stream could not be parsed as a ",
                     request.GetTypeName(), "; the stream ends after the "
                     "answers to the frames before it, and nothing after it "
                     "was read"));
  }

  // An answer was written or dropped: its op is no longer in flight.
  void Release(const Answer& answer) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    --in_flight_;
    held_bytes_ -= answer.charge;
  }

  bool OverLimitsLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return in_flight_ >= service_->max_pipeline_in_flight() ||
           held_bytes_ >= service_->stream_limits().max_stream_bytes;
  }

  bool MayResumeReadingLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!reading_paused_ || reads_done_ || OverLimitsLocked()) return false;
    reading_paused_ = false;
    return true;
  }

  bool ShouldFinishLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_ || !reads_done_ || in_flight_ != 0 || writing_ ||
        !outbox_.empty()) {
      return false;
    }
    finished_ = true;
    return true;
  }

  CacheService* const service_;
  grpc::CallbackServerContext* const ctx_;
  // The stream's bearer token, read once from its metadata.
  const std::optional<TokenDigest> token_;
  grpc::ByteBuffer request_;  // owned by the outstanding read
  // Frames read so far, for error messages; touched only by OnReadDone (gRPC
  // runs a stream's read callbacks one at a time).
  uint64_t frames_read_ = 0;

  Mutex mu_;
  size_t in_flight_ ABSL_GUARDED_BY(mu_) = 0;  // read, answer not written
  size_t held_bytes_ ABSL_GUARDED_BY(mu_) = 0;  // their charges
  bool reading_paused_ ABSL_GUARDED_BY(mu_) = false;
  bool reads_done_ ABSL_GUARDED_BY(mu_) = false;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  // The stream's final status: OK, or why it ended early.
  Status final_status_ ABSL_GUARDED_BY(mu_);
  std::deque<Answer> outbox_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>*
CacheService::Pipeline(grpc::CallbackServerContext* ctx) {
  if (Status s = Admit(TokenOf(*ctx), Access::kRead, "Pipeline"); !s.ok()) {
    RecordRequest(RequestOp::kPipeline, RequestStats::Clock::now(), s);
    return RefuseStream(s);
  }
  return new PipelineReactor(this, ctx);
}

}  // namespace furrballs::service
