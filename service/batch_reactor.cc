// The Batch stream's reactor (see CacheService::Batch).
//
// One BatchRequest at a time is turned into a Call: its bytes flattened, its
// ops read as views (service/batch_wire.h), decoded into CacheOps
// (RequestCodec), ordered by owning node and handed to the dispatcher in one
// SubmitBatch; the last op to complete encodes the whole answer and queues it
// for writing. Calls are kept by the stream and reused, with every buffer's
// capacity, so that in the steady state a batch allocates only its answer's
// slice and nothing per op: no mutex per op (the count of ops still running
// is an atomic), and one clock read per message for the deadline, one for the
// statistics and, in direct mode, one in the dispatcher.
//
// Bounds. Reading pauses while the bytes the stream holds reach
// --max_stream_bytes: each Call is charged, from its read until its answer is
// queued, its request's bytes and the largest its answer can be: its Gets'
// values (at most --max_response_bytes, counted as they arrive by a
// ResponseBudget: a Get whose value does not fit is answered
// RESOURCE_EXHAUSTED on its own) plus kAnswerOverheadBytes per op; from then
// until the answer is written, what it really holds (request, values,
// answer), so that answers of small values do not stop the reads early. A
// client that stops reading therefore holds at most --max_stream_bytes plus
// one Call's charge on the server, and stalls only its own stream (HTTP/2
// flow control stops its writes); a written Call keeps its buffers for the
// next message only while they are small (kKeepBytes), so idle Calls hold
// little. A message with more than --max_batch_ops ops is answered
// INVALID_ARGUMENT before any op is built; an answer over
// --max_message_bytes (which the limits checked at start-up rule out) would
// be replaced by RESOURCE_EXHAUSTED. Both name the limit; the stream stays
// open.
//
// gRPC reactions (StartRead/StartWrite/Finish) are issued outside mu_, since
// gRPC may run the matching callback inline.
#include <algorithm>
#include <atomic>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <absl/base/thread_annotations.h>
#include <absl/strings/str_cat.h>
#include <grpcpp/support/slice.h>

#include "engine/common/sync.h"
#include "service/batch_wire.h"
#include "service/cache_service.h"
#include "service/raw_call.h"
#include "service/request_codec.h"
#include "service/response_budget.h"
#include "service/unary_call.h"

namespace furrballs::service {
namespace {

using grpc::Status;
using grpc::StatusCode;

constexpr size_t kAnswerOverheadBytes = CacheService::kAnswerOverheadBytes;

// What an op's error message names: the operation, as its unary call's
// does ("Get: key is empty"), or the Batch when the op names none.
const char* WhatOf(OpView::Kind kind) {
  switch (kind) {
    case OpView::Kind::kGet: return "Get";
    case OpView::Kind::kSet: return "Set";
    case OpView::Kind::kDelete: return "Delete";
    case OpView::Kind::kTouch: return "Touch";
    case OpView::Kind::kNone: break;
  }
  return "Batch";
}
// A written Call keeps buffers up to this size for its next message; larger
// ones (large values) are freed, since they are no longer charged.
constexpr size_t kKeepBytes = size_t{256} << 10;

class BatchReactor final
    : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  BatchReactor(CacheService* service, grpc::CallbackServerContext* ctx)
      : service_(service), ctx_(ctx), token_(service->TokenOf(*ctx)) {
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      EndReads(Status::OK);
      return;
    }
    Call* call = TakeCall();
    call->start = RequestStats::Clock::now();
    if (!FlattenMessage(request_, &call->request_bytes)) {
      request_.Clear();
      ReleaseCall(call);
      EndReads(BadFrame());
      return;
    }
    request_.Clear();
    size_t op_count = 0;
    const bool parsed = ParseBatchRequest(
        call->request_bytes, service_->stream_limits().max_batch_ops,
        &call->id, &call->timeout_ms, &call->views, &op_count);
    if (!parsed && op_count <= service_->stream_limits().max_batch_ops) {
      ReleaseCall(call);
      EndReads(BadFrame());
      return;
    }
    const bool read_more = Charge(call, op_count);
    // Each message is admitted like a new RPC (a drain, or a token removed
    // from the token file, stops an open stream too), before its limits
    // are checked: a caller without a token learns nothing about it.
    if (Status s = service_->Admit(token_, AccessOf(call->views), "Batch");
        !s.ok()) {
      Reject(call, s);
    } else if (!parsed) {
      Reject(call, Status(StatusCode::INVALID_ARGUMENT,
                          absl::StrCat("Batch: ", op_count,
                                       " operations, over the limit of ",
                                       service_->stream_limits().max_batch_ops,
                                       " (--max_batch_ops)")));
    } else if (!service_->in_flight().TryAcquire(op_count)) {
      // A slot of the service's in-flight cap per op, all or none; the
      // stream stays open.
      Reject(call, service_->AtInFlightLimit("Batch"));
    } else {
      call->in_flight_slots = op_count;
      Run(call);
    }
    if (read_more) StartRead(&request_);
  }

  void OnWriteDone(bool ok) override {
    const grpc::ByteBuffer* next = nullptr;
    grpc::WriteOptions options;
    bool resume_read = false;
    bool finish = false;
    Status final_status;
    {
      MutexLock lock(&mu_);
      Call* written = outbox_.front();
      outbox_.pop_front();
      held_bytes_ -= written->charge;
      Trim(written);
      free_.push_back(written);
      if (!ok) broken_ = true;  // client went away: drop what is left
      if (broken_) {
        // A paused read will not be started again: the stream ends once
        // the messages in flight are done.
        if (reading_paused_) reads_done_ = true;
        for (Call* c : outbox_) {
          held_bytes_ -= c->charge;
          free_.push_back(c);
        }
        outbox_.clear();
      }
      if (!outbox_.empty()) {
        next = &outbox_.front()->frame;
        // More answers queued behind this one: let gRPC coalesce them.
        if (outbox_.size() > 1) options.set_buffer_hint();
      } else {
        writing_ = false;
      }
      resume_read = MayResumeReadingLocked();
      finish = ShouldFinishLocked();
      final_status = final_status_;
    }
    if (next != nullptr) StartWrite(next, options);
    if (resume_read) StartRead(&request_);
    if (finish) Finish(final_status);
  }

  void OnDone() override { delete this; }

 private:
  // One BatchRequest from its read until its answer is written. Reused: the
  // vectors and strings keep their capacity from batch to batch.
  struct Call {
    BatchReactor* reactor = nullptr;
    std::string request_bytes;
    uint64_t id = 0;
    uint64_t timeout_ms = 0;
    std::vector<OpView> views;
    std::vector<CacheOp> ops;
    std::vector<std::string> values;  // Gets' values, indexed like ops
    // Indexed like ops: why an op was not submitted (a decode error), or
    // why a Get's value was dropped (over the budget); else OK.
    std::vector<grpc::Status> rejected;
    ResponseBudget budget;  // the Gets' values
    std::vector<CacheOp*> by_node;
    std::vector<uint32_t> node_of;
    std::vector<uint32_t> node_start;
    // Ops submitted and not completed, plus one held by Run until every op
    // was handed over.
    std::atomic<size_t> remaining{0};
    std::string answer;
    grpc::ByteBuffer frame;
    size_t charge = 0;  // bytes counted against the stream's budget
    // Slots of the service's in-flight cap, given back once every op ran.
    size_t in_flight_slots = 0;
    RequestStats::Clock::time_point start;
  };

  // Only a message of Gets is a read.
  static Access AccessOf(const std::vector<OpView>& ops) {
    for (const OpView& op : ops) {
      if (op.kind != OpView::Kind::kGet) return Access::kWrite;
    }
    return Access::kRead;
  }

  // Frees a written Call's large buffers: they are charged only while its
  // message is in flight, and a stream keeps its Calls until it ends.
  static void Trim(Call* call) {
    if (call->answer.capacity() <= kKeepBytes &&
        call->request_bytes.capacity() <= kKeepBytes) {
      return;
    }
    std::string().swap(call->answer);
    std::string().swap(call->request_bytes);
    for (std::string& v : call->values) {
      if (v.capacity() > kKeepBytes) std::string().swap(v);
    }
  }

  Call* TakeCall() {
    MutexLock lock(&mu_);
    if (!free_.empty()) {
      Call* call = free_.back();
      free_.pop_back();
      return call;
    }
    calls_.push_back(std::make_unique<Call>());
    calls_.back()->reactor = this;
    return calls_.back().get();
  }

  void ReleaseCall(Call* call) {
    MutexLock lock(&mu_);
    free_.push_back(call);
  }

  // Charges `call` against the stream's budget; returns whether the next
  // frame may be read now (else reading resumes when answers are written).
  bool Charge(Call* call, size_t op_count) {
    const CacheService::StreamLimits& limits = service_->stream_limits();
    const size_t value_bytes = service_->limits().max_value_bytes;
    const size_t answer_bound =
        std::min(op_count * value_bytes, limits.max_response_bytes) +
        (op_count + 1) * kAnswerOverheadBytes;
    call->charge = call->request_bytes.size() + answer_bound;
    MutexLock lock(&mu_);
    ++in_flight_;
    held_bytes_ += call->charge;
    if (held_bytes_ < limits.max_stream_bytes) return true;
    reading_paused_ = true;
    return false;
  }

  // Answers the whole message with `status` (no op runs).
  void Reject(Call* call, const Status& status) {
    call->answer.clear();
    BeginBatchResponse(call->id, static_cast<int32_t>(status.error_code()),
                       status.error_message(), &call->answer);
    service_->RecordRequest(RequestOp::kBatch, call->start, status);
    Queue(call);
  }

  void Run(Call* call) {
    const RequestCodec& codec = service_->codec();
    const size_t n = call->views.size();
    call->ops.assign(n, CacheOp());
    call->values.resize(n);
    call->rejected.resize(n);
    call->node_of.resize(n);
    call->by_node.resize(n);
    const int nodes = service_->dispatcher()->queue_count();
    call->node_start.assign(static_cast<size_t>(nodes) + 1, 0);
    call->budget.Reset(service_->stream_limits().max_response_bytes);
    CacheOp::Clock::time_point deadline = SteadyDeadline(ctx_);
    if (call->timeout_ms > 0) {
      deadline = std::min(deadline, call->start + std::chrono::milliseconds(
                                                      call->timeout_ms));
    }
    size_t valid = 0;
    for (size_t i = 0; i < n; ++i) {
      CacheOp& op = call->ops[i];
      Status s = codec.Decode(call->views[i], WhatOf(call->views[i].kind), op,
                              &call->values[i]);
      if (!s.ok()) {
        call->rejected[i] = std::move(s);
        continue;
      }
      call->rejected[i] = Status::OK;
      op.deadline = deadline;
      op.on_done = &OpDone;
      op.done_context = call;
      const int node = service_->dispatcher()->IndexFor(op.hash);
      call->node_of[i] = static_cast<uint32_t>(node);
      ++call->node_start[node + 1];
      ++valid;
    }
    if (valid == 0) {
      Complete(call);
      return;
    }
    // A counting sort by node, keeping request order within a node (so per-
    // key order is request order).
    for (int node = 0; node < nodes; ++node) {
      call->node_start[node + 1] += call->node_start[node];
    }
    for (size_t i = 0; i < n; ++i) {
      if (call->ops[i].on_done == nullptr) continue;
      call->by_node[call->node_start[call->node_of[i]]++] = &call->ops[i];
    }
    call->remaining.store(valid + 1, std::memory_order_relaxed);
    service_->dispatcher()->SubmitBatch(call->by_node.data(), valid);
    Settle(call);
  }

  static void OpDone(CacheOp* op, void* context) {
    auto* call = static_cast<Call*>(context);
    // A value that does not fit the answer is dropped at once, so that the
    // Call never holds more than the budget.
    if (op->kind == OpKind::kGet && op->error == Error::kOk && op->get.found) {
      const size_t i = static_cast<size_t>(op - call->ops.data());
      if (Status s = call->budget.TakeValue(
              &call->values[i], [i] { return absl::StrCat("Batch op ", i); });
          !s.ok()) {
        call->rejected[i] = std::move(s);
      }
    }
    Settle(call);
  }

  static void Settle(Call* call) {
    if (call->remaining.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      call->reactor->Complete(call);
    }
  }

  // Encodes the answer of a call whose ops all completed and queues it. Runs
  // on the thread that completed the last op (a node worker, or the reading
  // thread in direct mode).
  void Complete(Call* call) {
    service_->in_flight().Release(call->in_flight_slots);
    call->in_flight_slots = 0;
    const RequestCodec& codec = service_->codec();
    std::string& answer = call->answer;
    answer.clear();
    BeginBatchResponse(call->id, 0, {}, &answer);
    const size_t n = call->views.size();
    for (size_t i = 0; i < n; ++i) {
      const CacheOp& op = call->ops[i];
      const uint64_t id = call->views[i].id;
      if (op.on_done != nullptr && call->rejected[i].ok() &&
          !op.deadline_exceeded && op.error == Error::kOk) {
        AppendOpAnswer(RequestCodec::Answer(op, StatusCode::OK, {}, id,
                                            call->values[i]),
                       &answer);
        continue;
      }
      // A rejected op (never submitted or over the budget) or a failed
      // one; the only path that allocates, for its message.
      const Status failed = !call->rejected[i].ok()
                                ? call->rejected[i]
                                : codec.StatusOf(op, WhatOf(call->views[i].kind));
      const std::string message = failed.error_message();
      AppendOpAnswer(
          RequestCodec::Answer(op, failed.error_code(), message, id, {}),
          &answer);
    }
    const size_t max_bytes = service_->stream_limits().max_message_bytes;
    if (answer.size() > max_bytes) {
      const size_t size = answer.size();
      Reject(call, Status(StatusCode::RESOURCE_EXHAUSTED,
                          absl::StrCat("Batch: the answer is ", size,
                                       " bytes, over the largest message of ",
                                       max_bytes,
                                       " bytes (--max_message_bytes); ask "
                                       "for fewer values per message")));
      return;
    }
    service_->RecordRequest(RequestOp::kBatch, call->start, Status::OK);
    Queue(call);
  }

  // Turns call->answer into the frame to write and queues it.
  void Queue(Call* call) {
    grpc::Slice slice(call->answer.data(), call->answer.size());
    call->frame = grpc::ByteBuffer(&slice, 1);
    // From here the Call holds what it holds, not what it could have held:
    // its charge becomes the bytes it keeps until the answer is written.
    size_t held = call->request_bytes.capacity() + call->answer.capacity() +
                  slice.size();
    for (const std::string& v : call->values) held += v.capacity();
    const grpc::ByteBuffer* to_write = nullptr;
    bool resume_read = false;
    bool finish = false;
    Status final_status;
    {
      MutexLock lock(&mu_);
      --in_flight_;
      held_bytes_ = held_bytes_ - call->charge + held;
      call->charge = held;
      resume_read = MayResumeReadingLocked();
      if (broken_) {
        held_bytes_ -= call->charge;
        free_.push_back(call);
      } else {
        outbox_.push_back(call);
        if (!writing_) {
          writing_ = true;
          to_write = &call->frame;
        }
      }
      finish = ShouldFinishLocked();
      final_status = final_status_;
    }
    if (to_write != nullptr) StartWrite(to_write);
    if (resume_read) StartRead(&request_);
    if (finish) Finish(final_status);
  }

  // No more frames will be read; the stream ends with `status` once every
  // message read so far is answered.
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

  Status BadFrame() {
    const Status bad(
        StatusCode::INVALID_ARGUMENT,
        "Batch: a frame of the stream could not be parsed as a "
        "furrballs.v1.BatchRequest; the stream ends after the answers to the "
        "frames before it, and nothing after it was read");
    service_->RecordRequest(RequestOp::kBatch, RequestStats::Clock::now(), bad);
    return bad;
  }

  bool MayResumeReadingLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!reading_paused_ || reads_done_ ||
        held_bytes_ >= service_->stream_limits().max_stream_bytes) {
      return false;
    }
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

  Mutex mu_;
  std::vector<std::unique_ptr<Call>> calls_ ABSL_GUARDED_BY(mu_);
  std::vector<Call*> free_ ABSL_GUARDED_BY(mu_);
  std::deque<Call*> outbox_ ABSL_GUARDED_BY(mu_);
  size_t in_flight_ ABSL_GUARDED_BY(mu_) = 0;  // read, not yet queued
  size_t held_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  bool reading_paused_ ABSL_GUARDED_BY(mu_) = false;
  bool reads_done_ ABSL_GUARDED_BY(mu_) = false;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  Status final_status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>*
CacheService::Batch(grpc::CallbackServerContext* ctx) {
  if (Status s = Admit(TokenOf(*ctx), Access::kRead, "Batch"); !s.ok()) {
    RecordRequest(RequestOp::kBatch, RequestStats::Clock::now(), s);
    return RefuseStream(s);
  }
  return new BatchReactor(this, ctx);
}

}  // namespace furrballs::service
