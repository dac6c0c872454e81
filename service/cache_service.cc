#include "service/cache_service.h"

#include <chrono>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <absl/base/thread_annotations.h>
#include <absl/strings/str_cat.h>

#include "engine/common/sync.h"
#include "service/raw_call.h"

namespace furrballs::service {
namespace {

using grpc::Status;
using grpc::StatusCode;

// A TTL longer than this is almost certainly a unit mistake (seconds passed
// as milliseconds twice over, or an absolute timestamp) and is rejected.
constexpr uint64_t kMaxTtlMs = uint64_t{365} * 24 * 3600 * 1000;

CacheOp::Clock::time_point SteadyDeadline(
    const grpc::CallbackServerContext* ctx) {
  const auto deadline = ctx->deadline();
  if (deadline == std::chrono::system_clock::time_point::max()) {
    return CacheOp::Clock::time_point::max();
  }
  const auto left = deadline - std::chrono::system_clock::now();
  return CacheOp::Clock::now() +
         std::chrono::duration_cast<CacheOp::Clock::duration>(left);
}

Status Unavailable() {
  return Status(StatusCode::UNAVAILABLE,
                "server is starting or shutting down; retry later");
}

// Counts a unary RPC in the service's request statistics and answers it;
// `rpc` is deleted. Returns the RPC's reactor.
grpc::ServerUnaryReactor* FinishCounted(const CacheService* svc,
                                        RawUnaryReply* rpc, RequestOp op,
                                        RequestStats::Clock::time_point start,
                                        const Status& status) {
  svc->RecordRequest(op, start, status);
  return rpc->Reply(status);
}

Status Unparsable(absl::string_view what,
                  const google::protobuf::MessageLite& message) {
  return Status(StatusCode::INVALID_ARGUMENT,
                absl::StrCat(what, ": the request could not be parsed as a ",
                             message.GetTypeName()));
}

// Whether a unary RPC may run. If not, answers it (deleting `rpc`): first
// with CacheService::Admit's refusal (no or another token, or not ready), so
// a caller without a token learns nothing about its request; then with
// INVALID_ARGUMENT when its body does not parse as the method's request.
template <typename Request, typename Response>
bool Accept(const CacheService* svc, const grpc::CallbackServerContext& ctx,
            RawUnaryCall<Request, Response>* rpc, const grpc::ByteBuffer& body,
            RequestOp op, Access need, absl::string_view what,
            RequestStats::Clock::time_point start) {
  if (Status s = svc->Admit(svc->TokenOf(ctx), need, what); !s.ok()) {
    FinishCounted(svc, rpc, op, start, s);
    return false;
  }
  if (!ParseMessage(body, &rpc->request)) {
    FinishCounted(svc, rpc, op, start, Unparsable(what, rpc->request));
    return false;
  }
  return true;
}

// The status of a finished op, for the operation named `what`.
Status StatusOf(const CacheOp& op, absl::string_view what, const Limits& limits) {
  if (op.deadline_exceeded) {
    return Status(StatusCode::DEADLINE_EXCEEDED,
                  absl::StrCat(what, ": deadline passed before the operation "
                                     "reached the front of its node's queue"));
  }
  return ToGrpcStatus(op.error, what, limits);
}

Status ValidateTtl(uint64_t ttl_ms, absl::string_view what) {
  if (ttl_ms > kMaxTtlMs) {
    return Status(StatusCode::INVALID_ARGUMENT,
                  absl::StrCat(what, ": ttl_ms ", ttl_ms,
                               " exceeds the maximum of ", kMaxTtlMs,
                               " (365 days)"));
  }
  return Status::OK;
}

// Validates a SetRequest and fills the op's write fields (not the hash).
Status PrepareSet(const v1::SetRequest& req, absl::string_view what,
                  const Limits& limits, CacheOp& op) {
  if (Status s = ValidateKey(req.key(), what, limits); !s.ok()) return s;
  if (Status s = ValidateValue(req.value(), what, limits); !s.ok()) return s;
  if (Status s = ValidateTtl(req.ttl_ms(), what); !s.ok()) return s;
  switch (req.mode()) {
    case v1::SET_ALWAYS:
      op.write.mode = SetMode::kAlways;
      break;
    case v1::SET_IF_ABSENT:
      op.write.mode = SetMode::kIfAbsent;
      break;
    case v1::SET_IF_VERSION:
      op.write.mode = SetMode::kIfVersion;
      break;
    default:
      return Status(StatusCode::INVALID_ARGUMENT,
                    absl::StrCat(what, ": unknown mode ",
                                 static_cast<int>(req.mode())));
  }
  op.kind = OpKind::kSet;
  op.value = req.value();
  op.write.ttl_ms = req.ttl_ms();
  op.write.expected_version = req.expected_version();
  return Status::OK;
}

Status SubmitStatus(Error e, absl::string_view what, const Limits& limits) {
  return e == Error::kShuttingDown ? Unavailable()
                                   : ToGrpcStatus(e, what, limits);
}

void FillGet(const CacheOp& op, v1::GetResponse* resp) {
  resp->set_found(op.get.found);
  if (op.get.found) {
    resp->set_version(op.get.version);
    resp->set_ttl_remaining_ms(op.get.ttl_remaining_ms);
  } else {
    resp->clear_value();
  }
}

// Records a failed batch item's status in its result: a GetResponse (whose
// found stays false: a failed read writes nothing into it) or a SetResult.
template <typename Result>
void SetItemStatus(const Status& status, Result* result) {
  result->set_code(static_cast<int>(status.error_code()));
  result->set_message(status.error_message());
}

// State of one unary RPC that runs a single CacheOp.
template <typename Response>
struct UnaryCall {
  CacheOp op;
  RawUnaryReply* rpc = nullptr;
  Response* response = nullptr;
  const CacheService* service = nullptr;
  const char* what = "";
  void (*fill)(const CacheOp&, Response*) = nullptr;
  RequestOp request_op = RequestOp::kGet;
  RequestStats::Clock::time_point start;

  static void Done(CacheOp* op, void* context) {
    auto* call = static_cast<UnaryCall*>(context);
    Status s = StatusOf(*op, call->what, call->service->limits());
    if (s.ok() && call->fill != nullptr) call->fill(*op, call->response);
    FinishCounted(call->service, call->rpc, call->request_op, call->start, s);
    delete call;
  }
};

template <typename Response>
grpc::ServerUnaryReactor* RunUnary(CacheService* svc,
                                   grpc::CallbackServerContext* ctx,
                                   std::unique_ptr<UnaryCall<Response>> call) {
  grpc::ServerUnaryReactor* reactor = call->rpc->reactor();
  RawUnaryReply* rpc = call->rpc;
  call->op.deadline = SteadyDeadline(ctx);
  call->op.on_done = &UnaryCall<Response>::Done;
  call->op.done_context = call.get();
  const char* what = call->what;
  const RequestOp request_op = call->request_op;
  const auto start = call->start;
  CacheOp* op = &call->op;
  UnaryCall<Response>* raw = call.release();
  if (Error e = svc->dispatcher()->Submit(op); e != Error::kOk) {
    delete raw;
    FinishCounted(svc, rpc, request_op, start,
                  SubmitStatus(e, what, svc->limits()));
  }
  return reactor;
}

}  // namespace

CacheService::CacheService(FurrBall* engine, Dispatcher* dispatcher,
                           size_t max_pipeline_in_flight,
                           const TokenAuthenticator* auth)
    : engine_(engine),
      dispatcher_(dispatcher),
      limits_{engine->options().max_key_bytes,
              engine->options().max_value_bytes},
      max_pipeline_in_flight_(max_pipeline_in_flight),
      auth_(auth) {}

Status CacheService::Admit(const std::optional<TokenDigest>& token,
                           Access need, absl::string_view what) const {
  if (auth_ != nullptr) {
    if (Status s = auth_->Authorize(token, need, what); !s.ok()) return s;
  }
  return ready() ? Status::OK : Unavailable();
}

grpc::ServerUnaryReactor* CacheService::Get(grpc::CallbackServerContext* ctx,
                                            const grpc::ByteBuffer* body,
                                            grpc::ByteBuffer* reply) {
  const auto start = RequestStats::Clock::now();
  grpc::ServerUnaryReactor* const reactor = ctx->DefaultReactor();
  auto* rpc = new RawUnaryCall<v1::GetRequest, v1::GetResponse>(reactor, reply);
  if (!Accept(this, *ctx, rpc, *body, RequestOp::kGet, Access::kRead,
              "Get", start)) {
    return reactor;
  }
  const v1::GetRequest* request = &rpc->request;
  v1::GetResponse* response = &rpc->response;
  if (Status s = ValidateKey(request->key(), "Get", limits_); !s.ok()) {
    return FinishCounted(this, rpc, RequestOp::kGet, start, s);
  }
  auto call = std::make_unique<UnaryCall<v1::GetResponse>>();
  call->rpc = rpc;
  call->request_op = RequestOp::kGet;
  call->start = start;
  call->response = response;
  call->service = this;
  call->what = "Get";
  call->fill = &FillGet;
  call->op.kind = OpKind::kGet;
  call->op.hash = engine_->Hash(request->key());
  call->op.key = request->key();
  call->op.value_out = response->mutable_value();
  return RunUnary(this, ctx, std::move(call));
}

grpc::ServerUnaryReactor* CacheService::Set(grpc::CallbackServerContext* ctx,
                                            const grpc::ByteBuffer* body,
                                            grpc::ByteBuffer* reply) {
  const auto start = RequestStats::Clock::now();
  grpc::ServerUnaryReactor* const reactor = ctx->DefaultReactor();
  auto* rpc = new RawUnaryCall<v1::SetRequest, v1::SetResponse>(reactor, reply);
  if (!Accept(this, *ctx, rpc, *body, RequestOp::kSet, Access::kWrite,
              "Set", start)) {
    return reactor;
  }
  const v1::SetRequest* request = &rpc->request;
  auto call = std::make_unique<UnaryCall<v1::SetResponse>>();
  if (Status s = PrepareSet(*request, "Set", limits_, call->op); !s.ok()) {
    return FinishCounted(this, rpc, RequestOp::kSet, start, s);
  }
  call->rpc = rpc;
  call->request_op = RequestOp::kSet;
  call->start = start;
  call->response = &rpc->response;
  call->service = this;
  call->what = "Set";
  call->fill = [](const CacheOp& op, v1::SetResponse* r) {
    r->set_version(op.set.version);
  };
  call->op.hash = engine_->Hash(request->key());
  call->op.key = request->key();
  return RunUnary(this, ctx, std::move(call));
}

grpc::ServerUnaryReactor* CacheService::Delete(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* body,
    grpc::ByteBuffer* reply) {
  const auto start = RequestStats::Clock::now();
  grpc::ServerUnaryReactor* const reactor = ctx->DefaultReactor();
  auto* rpc = new RawUnaryCall<v1::DeleteRequest, v1::DeleteResponse>(reactor, reply);
  if (!Accept(this, *ctx, rpc, *body, RequestOp::kDelete, Access::kWrite,
              "Delete", start)) {
    return reactor;
  }
  const v1::DeleteRequest* request = &rpc->request;
  if (Status s = ValidateKey(request->key(), "Delete", limits_); !s.ok()) {
    return FinishCounted(this, rpc, RequestOp::kDelete, start, s);
  }
  auto call = std::make_unique<UnaryCall<v1::DeleteResponse>>();
  call->rpc = rpc;
  call->request_op = RequestOp::kDelete;
  call->start = start;
  call->response = &rpc->response;
  call->service = this;
  call->what = "Delete";
  call->fill = [](const CacheOp& op, v1::DeleteResponse* r) {
    r->set_deleted(op.del.deleted);
  };
  call->op.kind = OpKind::kDelete;
  call->op.hash = engine_->Hash(request->key());
  call->op.key = request->key();
  return RunUnary(this, ctx, std::move(call));
}

grpc::ServerUnaryReactor* CacheService::Touch(grpc::CallbackServerContext* ctx,
                                              const grpc::ByteBuffer* body,
                                              grpc::ByteBuffer* reply) {
  const auto start = RequestStats::Clock::now();
  grpc::ServerUnaryReactor* const reactor = ctx->DefaultReactor();
  auto* rpc = new RawUnaryCall<v1::TouchRequest, v1::TouchResponse>(reactor, reply);
  if (!Accept(this, *ctx, rpc, *body, RequestOp::kTouch, Access::kWrite,
              "Touch", start)) {
    return reactor;
  }
  const v1::TouchRequest* request = &rpc->request;
  if (Status s = ValidateKey(request->key(), "Touch", limits_); !s.ok()) {
    return FinishCounted(this, rpc, RequestOp::kTouch, start, s);
  }
  if (Status s = ValidateTtl(request->ttl_ms(), "Touch"); !s.ok()) {
    return FinishCounted(this, rpc, RequestOp::kTouch, start, s);
  }
  auto call = std::make_unique<UnaryCall<v1::TouchResponse>>();
  call->rpc = rpc;
  call->request_op = RequestOp::kTouch;
  call->start = start;
  call->response = &rpc->response;
  call->service = this;
  call->what = "Touch";
  call->op.kind = OpKind::kTouch;
  call->op.ttl_ms = request->ttl_ms();
  call->op.hash = engine_->Hash(request->key());
  call->op.key = request->key();
  return RunUnary(this, ctx, std::move(call));
}

namespace {

// A batch RPC: one CacheOp per item, finished when the last one completes.
struct MultiCall {
  std::unique_ptr<CacheOp[]> ops;
  std::atomic<size_t> remaining{0};
  RawUnaryReply* rpc = nullptr;
  const CacheService* service = nullptr;
  v1::MultiGetResponse* get_response = nullptr;
  v1::MultiSetResponse* set_response = nullptr;
  size_t count = 0;
  RequestOp request_op = RequestOp::kMultiGet;
  RequestStats::Clock::time_point start;

  // Called once per op that will not run (rejected at submit or invalid).
  void Settle() {
    if (remaining.fetch_sub(1, std::memory_order_acq_rel) == 1) Finish();
  }

  // Every item carries its own code, so one bad item never fails the call.
  void Finish() {
    const char* what = get_response != nullptr ? "MultiGet" : "MultiSet";
    for (size_t i = 0; i < count; ++i) {
      const CacheOp& op = ops[i];
      const int slot = static_cast<int>(i);
      const bool failed = op.deadline_exceeded || op.error != Error::kOk;
      if (get_response != nullptr) {
        v1::GetResponse* r = get_response->mutable_results(slot);
        if (r->code() != 0) continue;  // rejected before it ran
        if (!failed) {
          FillGet(op, r);
          continue;
        }
        SetItemStatus(StatusOf(op, absl::StrCat(what, " item ", i),
                               service->limits()),
                      r);
      } else {
        v1::SetResult* r = set_response->mutable_results(slot);
        if (r->code() != 0) continue;  // rejected before it ran
        if (!failed) {
          r->set_version(op.set.version);
          continue;
        }
        SetItemStatus(StatusOf(op, absl::StrCat(what, " item ", i),
                               service->limits()),
                      r);
      }
    }
    FinishCounted(service, rpc, request_op, start, Status::OK);
    delete this;
  }

  static void Done(CacheOp*, void* context) {
    static_cast<MultiCall*>(context)->Settle();
  }
};

// Submits the ops of `call` whose item is valid and settles the others (and
// those the dispatcher refuses, with its error). The call can finish, and be
// deleted, before this returns.
void SubmitAll(Dispatcher* dispatcher, MultiCall* call,
               const std::vector<bool>& valid) {
  const size_t n = valid.size();
  for (size_t i = 0; i < n; ++i) {
    if (!valid[i]) {
      call->Settle();
      continue;
    }
    if (Error e = dispatcher->Submit(&call->ops[i]); e != Error::kOk) {
      call->ops[i].error = e;
      call->Settle();
    }
  }
}

}  // namespace

grpc::ServerUnaryReactor* CacheService::MultiGet(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* body,
    grpc::ByteBuffer* reply) {
  const auto start = RequestStats::Clock::now();
  grpc::ServerUnaryReactor* const reactor = ctx->DefaultReactor();
  auto* rpc =
      new RawUnaryCall<v1::MultiGetRequest, v1::MultiGetResponse>(reactor, reply);
  if (!Accept(this, *ctx, rpc, *body, RequestOp::kMultiGet, Access::kRead,
              "MultiGet", start)) {
    return reactor;
  }
  const v1::MultiGetRequest* request = &rpc->request;
  v1::MultiGetResponse* response = &rpc->response;
  const size_t n = request->keys_size();
  if (n == 0) {
    return FinishCounted(this, rpc, RequestOp::kMultiGet, start,
                         Status::OK);
  }

  auto* call = new MultiCall;
  call->ops = std::make_unique<CacheOp[]>(n);
  call->count = n;
  call->remaining.store(n, std::memory_order_relaxed);
  call->rpc = rpc;
  call->request_op = RequestOp::kMultiGet;
  call->start = start;
  call->service = this;
  call->get_response = response;
  const auto deadline = SteadyDeadline(ctx);
  std::vector<bool> valid(n);
  for (size_t i = 0; i < n; ++i) {
    v1::GetResponse* slot = response->add_results();
    const std::string& key = request->keys(static_cast<int>(i));
    Status s = ValidateKey(key, absl::StrCat("MultiGet item ", i), limits_);
    if (!s.ok()) {
      SetItemStatus(s, slot);
      continue;
    }
    valid[i] = true;
    CacheOp& op = call->ops[i];
    op.kind = OpKind::kGet;
    op.hash = engine_->Hash(key);
    op.key = key;
    op.value_out = slot->mutable_value();
    op.deadline = deadline;
    op.on_done = &MultiCall::Done;
    op.done_context = call;
  }
  SubmitAll(dispatcher_, call, valid);
  return reactor;
}

grpc::ServerUnaryReactor* CacheService::MultiSet(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* body,
    grpc::ByteBuffer* reply) {
  const auto start = RequestStats::Clock::now();
  grpc::ServerUnaryReactor* const reactor = ctx->DefaultReactor();
  auto* rpc =
      new RawUnaryCall<v1::MultiSetRequest, v1::MultiSetResponse>(reactor, reply);
  if (!Accept(this, *ctx, rpc, *body, RequestOp::kMultiSet, Access::kWrite,
              "MultiSet", start)) {
    return reactor;
  }
  const v1::MultiSetRequest* request = &rpc->request;
  v1::MultiSetResponse* response = &rpc->response;
  const size_t n = request->items_size();
  if (n == 0) {
    return FinishCounted(this, rpc, RequestOp::kMultiSet, start,
                         Status::OK);
  }

  auto* call = new MultiCall;
  call->ops = std::make_unique<CacheOp[]>(n);
  call->count = n;
  call->remaining.store(n, std::memory_order_relaxed);
  call->rpc = rpc;
  call->request_op = RequestOp::kMultiSet;
  call->start = start;
  call->service = this;
  call->set_response = response;
  const auto deadline = SteadyDeadline(ctx);
  std::vector<bool> valid(n);
  for (size_t i = 0; i < n; ++i) {
    v1::SetResult* r = response->add_results();
    const v1::SetRequest& item = request->items(static_cast<int>(i));
    CacheOp& op = call->ops[i];
    Status s = PrepareSet(item, absl::StrCat("MultiSet item ", i), limits_, op);
    if (!s.ok()) {
      SetItemStatus(s, r);
      continue;
    }
    valid[i] = true;
    op.hash = engine_->Hash(item.key());
    op.key = item.key();
    op.deadline = deadline;
    op.on_done = &MultiCall::Done;
    op.done_context = call;
  }
  SubmitAll(dispatcher_, call, valid);
  return reactor;
}

grpc::ServerUnaryReactor* CacheService::Stats(grpc::CallbackServerContext* ctx,
                                              const grpc::ByteBuffer* body,
                                              grpc::ByteBuffer* reply) {
  const auto start = RequestStats::Clock::now();
  grpc::ServerUnaryReactor* const reactor = ctx->DefaultReactor();
  auto* rpc = new RawUnaryCall<v1::StatsRequest, v1::StatsResponse>(reactor, reply);
  if (!Accept(this, *ctx, rpc, *body, RequestOp::kStats, Access::kRead,
              "Stats", start)) {
    return reactor;
  }
  for (const NodeStatsSnapshot& s : engine_->Stats()) {
    v1::NodeStats* n = rpc->response.add_nodes();
    n->set_node(s.node);
    n->set_hits_local(s.hits_local);
    n->set_hits_remote(s.hits_remote);
    n->set_misses(s.misses);
    n->set_sets(s.sets);
    n->set_deletes(s.deletes);
    n->set_evictions(s.evictions_capacity + s.evictions_keys);
    n->set_expirations(s.ttl_expirations);
    n->set_live_keys(s.live_keys);
    n->set_live_bytes(s.live_bytes);
    n->set_memory_limit_bytes(s.memory_limit_bytes);
  }
  return FinishCounted(this, rpc, RequestOp::kStats, start, Status::OK);
}

namespace {

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

// The Pipeline stream. Reads are processed as they arrive, up to
// max_in_flight ops at once (then reading pauses: flow control back to the
// client); completions, which arrive on node workers in any order, queue their
// responses and one write is in flight at a time. The stream finishes once
// the client half-closed and every op was answered, with OK; or, after a
// frame that does not parse, once every op read before it was answered, with
// INVALID_ARGUMENT (nothing after that frame is read: its id is unknown, so it
// cannot be answered on its own).
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
      : service_(service),
        ctx_(ctx),
        token_(service->TokenOf(*ctx)) {
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      EndReads(Status::OK);
      return;
    }
    ++frames_read_;
    auto item = std::make_unique<Item>();
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
    Status s = Prepare(*item);
    bool read_more;
    {
      MutexLock lock(&mu_);
      ++in_flight_;
      read_more = in_flight_ < service_->max_pipeline_in_flight();
      if (!read_more) reading_paused_ = true;
    }
    if (!s.ok()) {
      Complete(item.release(), s);
    } else {
      Item* raw = item.release();
      if (Error e = service_->dispatcher()->Submit(&raw->op); e != Error::kOk) {
        Complete(raw, SubmitStatus(e, "Pipeline", service_->limits()));
      }
    }
    if (read_more) StartRead(&request_);
  }

  void OnWriteDone(bool ok) override {
    const grpc::ByteBuffer* next = nullptr;
    bool finish = false;
    Status final_status;
    {
      MutexLock lock(&mu_);
      outbox_.pop_front();
      if (!ok) broken_ = true;  // client went away: drop what is left
      if (broken_) outbox_.clear();
      if (!outbox_.empty()) {
        next = outbox_.front().get();
      } else {
        writing_ = false;
        finish = ShouldFinishLocked();
        final_status = final_status_;
      }
    }
    if (next != nullptr) StartWrite(next);
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
    const Limits& limits = service_->limits();
    CacheOp& op = item.op;
    op.deadline = SteadyDeadline(ctx_);
    op.on_done = [](CacheOp* o, void* context) {
      auto* it = static_cast<Item*>(context);
      it->reactor->Complete(it, StatusOf(*o, "Pipeline", it->reactor->service_->limits()));
    };
    op.done_context = &item;
    const v1::PipelineRequest& r = item.request;
    absl::string_view key;
    switch (r.op_case()) {
      case v1::PipelineRequest::kGet:
        key = r.get().key();
        op.kind = OpKind::kGet;
        op.value_out = item.response.mutable_get()->mutable_value();
        break;
      case v1::PipelineRequest::kSet:
        if (Status s = PrepareSet(r.set(), "Pipeline Set", limits, op); !s.ok()) {
          return s;
        }
        key = r.set().key();
        break;
      case v1::PipelineRequest::kDelete:
        key = r.delete_().key();
        op.kind = OpKind::kDelete;
        break;
      case v1::PipelineRequest::kTouch:
        if (Status s = ValidateTtl(r.touch().ttl_ms(), "Pipeline Touch"); !s.ok()) {
          return s;
        }
        key = r.touch().key();
        op.kind = OpKind::kTouch;
        op.ttl_ms = r.touch().ttl_ms();
        break;
      case v1::PipelineRequest::OP_NOT_SET:
        return Status(StatusCode::INVALID_ARGUMENT,
                      "Pipeline: request has no operation set");
    }
    if (Status s = ValidateKey(key, "Pipeline", limits); !s.ok()) return s;
    op.hash = service_->engine()->Hash(std::string_view(key.data(), key.size()));
    op.key = std::string_view(key.data(), key.size());
    return Status::OK;
  }

  // Queues the answer to `item` (taking ownership) and starts a write if none
  // is in flight. Runs on a node worker, or on a gRPC thread for rejections.
  void Complete(Item* item, const Status& status) {
    std::unique_ptr<Item> owned(item);
    service_->RecordRequest(RequestOp::kPipeline, item->start, status);
    v1::PipelineResponse& resp = item->response;
    resp.set_code(static_cast<int>(status.error_code()));
    if (!status.ok()) {
      resp.set_message(status.error_message());
      resp.clear_result();
    } else {
      const CacheOp& op = item->op;
      switch (op.kind) {
        case OpKind::kGet:
          FillGet(op, resp.mutable_get());
          break;
        case OpKind::kSet:
          resp.mutable_set()->set_version(op.set.version);
          break;
        case OpKind::kDelete:
          resp.mutable_delete_()->set_deleted(op.del.deleted);
          break;
        case OpKind::kTouch:
          resp.mutable_touch();
          break;
      }
    }
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
    const grpc::ByteBuffer* to_write = nullptr;
    bool resume_read = false;
    bool finish = false;
    Status final_status;
    {
      MutexLock lock(&mu_);
      --in_flight_;
      if (reading_paused_ && !reads_done_ &&
          in_flight_ < service_->max_pipeline_in_flight()) {
        reading_paused_ = false;
        resume_read = true;
      }
      if (!broken_) {
        outbox_.push_back(std::move(frame));
        if (!writing_) {
          writing_ = true;
          to_write = outbox_.front().get();
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
  size_t in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  bool reading_paused_ ABSL_GUARDED_BY(mu_) = false;
  bool reads_done_ ABSL_GUARDED_BY(mu_) = false;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  // The stream's final status: OK, or why it ended early.
  Status final_status_ ABSL_GUARDED_BY(mu_);
  std::deque<std::unique_ptr<grpc::ByteBuffer>> outbox_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>*
CacheService::Pipeline(grpc::CallbackServerContext* ctx) {
  if (Status s = Admit(TokenOf(*ctx), Access::kRead, "Pipeline"); !s.ok()) {
    RecordRequest(RequestOp::kPipeline, RequestStats::Clock::now(), s);
    class Refuse final
        : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
     public:
      explicit Refuse(const Status& status) { Finish(status); }
      void OnDone() override { delete this; }
    };
    return new Refuse(s);
  }
  return new PipelineReactor(this, ctx);
}

}  // namespace furrballs::service
