// MultiGet and MultiSet: one RPC, one CacheOp per item, each item answered
// with its own code; the RPC finishes when its last op completes. Both run
// through ServeMulti, which differs between them only in how an item decodes
// (RequestCodec) and which result message answers it. A MultiGet's values
// count against --max_response_bytes as they arrive (ResponseBudget).
#include <atomic>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include <absl/strings/str_cat.h>

#include "service/cache_service.h"
#include "service/raw_call.h"
#include "service/request_codec.h"
#include "service/response_budget.h"
#include "service/unary_call.h"

namespace furrballs::service {
namespace {

using grpc::Status;

// A batch RPC: one CacheOp per item, finished when the last one completes.
// `Result` is the item's answer (GetResponse or SetResult), `results` the
// response's repeated field of them.
template <typename Request, typename Response, typename Result>
struct MultiCall {
  using Rpc = RawUnaryCall<Request, Response>;
  static constexpr bool kReads = std::is_same_v<Result, v1::GetResponse>;

  std::unique_ptr<CacheOp[]> ops;
  std::atomic<size_t> remaining{0};
  Rpc* rpc = nullptr;
  google::protobuf::RepeatedPtrField<Result>* results = nullptr;
  const CacheService* service = nullptr;
  const char* what = "";
  size_t count = 0;
  RequestOp request_op = RequestOp::kMultiGet;
  RequestStats::Clock::time_point start;
  ResponseBudget budget;  // MultiGet's values

  // Called once per op that will not run (rejected at submit or invalid).
  void Settle() {
    if (remaining.fetch_sub(1, std::memory_order_acq_rel) == 1) Finish();
  }

  // Every item carries its own code, so one bad item never fails the call.
  void Finish() {
    for (size_t i = 0; i < count; ++i) {
      const CacheOp& op = ops[i];
      Result* r = results->Mutable(static_cast<int>(i));
      if (r->code() != 0) continue;  // rejected before it ran
      if (!op.deadline_exceeded && op.error == Error::kOk) {
        RequestCodec::Encode(op, r);
        continue;
      }
      RequestCodec::EncodeItemStatus(
          service->codec().StatusOf(op, absl::StrCat(what, " item ", i)), r);
    }
    FinishCounted(service, rpc, request_op, start, Status::OK);
    delete this;
  }

  static void Done(CacheOp* op, void* context) {
    auto* call = static_cast<MultiCall*>(context);
    if constexpr (kReads) {
      // The value is in the item's result already (the op's value_out);
      // one that does not fit is dropped now, so the answer never holds it.
      if (op->error == Error::kOk && op->get.found) {
        const size_t i = static_cast<size_t>(op - call->ops.get());
        if (grpc::Status s = call->budget.TakeValue(
                op->value_out,
                [call, i] { return absl::StrCat(call->what, " item ", i); });
            !s.ok()) {
          RequestCodec::EncodeItemStatus(
              s, call->results->Mutable(static_cast<int>(i)));
        }
      }
    }
    call->Settle();
  }
};

// Serves a batch RPC. `items(request)` is the request's repeated field of
// items, `results(response)` the response's; `decode(item, what, op,
// result)` decodes one item (RequestCodec). Items that do not decode are
// answered with their error; the others are submitted, and those the
// dispatcher refuses are answered with its error.
template <typename Result, typename Request, typename Response,
          typename Items, typename Results, typename Decode>
grpc::ServerUnaryReactor* ServeMulti(CacheService* svc,
                                     grpc::CallbackServerContext* ctx,
                                     const grpc::ByteBuffer* body,
                                     grpc::ByteBuffer* reply, RequestOp op,
                                     Access need, const char* what,
                                     Items items, Results results,
                                     Decode decode) {
  using Call = MultiCall<Request, Response, Result>;
  const auto start = RequestStats::Clock::now();
  grpc::ServerUnaryReactor* const reactor = ctx->DefaultReactor();
  auto* rpc = new RawUnaryCall<Request, Response>(reactor, reply);
  if (!Accept(svc, *ctx, rpc, *body, op, need, what, start)) return reactor;
  const auto& in = items(rpc->request);
  const size_t n = static_cast<size_t>(in.size());
  if (n == 0) return FinishCounted(svc, rpc, op, start, Status::OK);
  const size_t max_items = svc->stream_limits().max_batch_ops;
  if (n > max_items) {
    return FinishCounted(
        svc, rpc, op, start,
        Status(grpc::StatusCode::INVALID_ARGUMENT,
               absl::StrCat(what, ": ", n, " items, over the limit of ",
                            max_items, " (--max_batch_ops)")));
  }
  // One in-flight slot per item; Accept took the first.
  if (!svc->in_flight().TryAcquire(n - 1)) {
    return FinishCounted(svc, rpc, op, start, svc->AtInFlightLimit(what));
  }
  rpc->add_in_flight_slots(n - 1);

  auto* call = new Call;
  call->ops = std::make_unique<CacheOp[]>(n);
  call->count = n;
  call->remaining.store(n, std::memory_order_relaxed);
  call->rpc = rpc;
  call->results = results(rpc->response);
  call->service = svc;
  call->what = what;
  call->request_op = op;
  call->start = start;
  call->budget.Reset(svc->stream_limits().max_response_bytes);
  const auto deadline = SteadyDeadline(ctx);
  std::vector<bool> valid(n);
  for (size_t i = 0; i < n; ++i) {
    Result* result = call->results->Add();
    CacheOp& item_op = call->ops[i];
    Status s = decode(in.Get(static_cast<int>(i)),
                      absl::StrCat(what, " item ", i), item_op, result);
    if (!s.ok()) {
      RequestCodec::EncodeItemStatus(s, result);
      continue;
    }
    valid[i] = true;
    item_op.deadline = deadline;
    item_op.on_done = &Call::Done;
    item_op.done_context = call;
  }
  // The call can finish, and be deleted, before this loop ends: it reads
  // only `valid` and the op of the item it submits.
  CacheOp* const ops = call->ops.get();
  for (size_t i = 0; i < n; ++i) {
    if (!valid[i]) {
      call->Settle();
      continue;
    }
    if (Error e = svc->dispatcher()->Submit(&ops[i]); e != Error::kOk) {
      ops[i].error = e;
      call->Settle();
    }
  }
  return reactor;
}

}  // namespace

grpc::ServerUnaryReactor* CacheService::MultiGet(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* body,
    grpc::ByteBuffer* reply) {
  return ServeMulti<v1::GetResponse, v1::MultiGetRequest,
                    v1::MultiGetResponse>(
      this, ctx, body, reply, RequestOp::kMultiGet, Access::kRead,
      "MultiGet",
      [](const v1::MultiGetRequest& r) -> const auto& { return r.keys(); },
      [](v1::MultiGetResponse& r) { return r.mutable_results(); },
      [this](const std::string& key, absl::string_view what, CacheOp& op,
             v1::GetResponse* result) {
        return codec_.DecodeGet(key, what, op, result->mutable_value());
      });
}

grpc::ServerUnaryReactor* CacheService::MultiSet(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* body,
    grpc::ByteBuffer* reply) {
  return ServeMulti<v1::SetResult, v1::MultiSetRequest, v1::MultiSetResponse>(
      this, ctx, body, reply, RequestOp::kMultiSet, Access::kWrite,
      "MultiSet",
      [](const v1::MultiSetRequest& r) -> const auto& { return r.items(); },
      [](v1::MultiSetResponse& r) { return r.mutable_results(); },
      [this](const v1::SetRequest& item, absl::string_view what, CacheOp& op,
             v1::SetResult*) { return codec_.DecodeSet(item, what, op); });
}

}  // namespace furrballs::service
