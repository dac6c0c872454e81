// service/unary_call.h: how CacheService serves a unary RPC: admission
// (ready, parsable), the one template that runs a single-op RPC (Get, Set,
// Delete, Touch) through the codec and the dispatcher, and the helpers the
// batch calls share with it.
//
// Thread safety: stateless functions; each call's state belongs to its RPC
// and is finished once, on whichever thread completes its op.
//
// Internal to service/: included by the CacheService implementation files.
#ifndef FURRBALLS_SERVICE_UNARY_CALL_H_
#define FURRBALLS_SERVICE_UNARY_CALL_H_

#include <chrono>
#include <memory>

#include <absl/strings/str_cat.h>
#include <absl/strings/string_view.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/server_callback.h>
#include <grpcpp/support/status.h>

#include "service/cache_service.h"
#include "service/raw_call.h"
#include "service/request_codec.h"

namespace furrballs::service {

// The call's deadline on the clock the dispatcher compares against.
inline CacheOp::Clock::time_point SteadyDeadline(
    const grpc::CallbackServerContext* ctx) {
  const auto deadline = ctx->deadline();
  if (deadline == std::chrono::system_clock::time_point::max()) {
    return CacheOp::Clock::time_point::max();
  }
  const auto left = deadline - std::chrono::system_clock::now();
  return CacheOp::Clock::now() +
         std::chrono::duration_cast<CacheOp::Clock::duration>(left);
}

// Counts a unary RPC in the service's request statistics, gives back the
// in-flight slots it holds and answers it; `rpc` is deleted. Returns the
// RPC's reactor.
inline grpc::ServerUnaryReactor* FinishCounted(
    const CacheService* svc, RawUnaryReply* rpc, RequestOp op,
    RequestStats::Clock::time_point start, const grpc::Status& status) {
  svc->RecordRequest(op, start, status);
  svc->in_flight().Release(rpc->in_flight_slots());
  svc->in_flight_bytes().Release(rpc->in_flight_bytes());
  return rpc->Reply(status);
}

// Whether a unary RPC may run, before its body is read. If not, answers it
// (deleting `rpc`): first with CacheService::Admit's refusal (no or another
// token, or not ready), so a caller without a token learns nothing about
// its request; then with RESOURCE_EXHAUSTED when --max_in_flight ops
// already run, or when its body does not fit beside the request bytes in
// flight (--max_in_flight_mb; both before parsing: shedding load must cost
// less than serving it). An admitted RPC holds one in-flight slot and its
// body's size in request bytes until it is answered.
inline bool AdmitBody(const CacheService* svc,
                      const grpc::CallbackServerContext& ctx,
                      RawUnaryReply* rpc, const grpc::ByteBuffer& body,
                      RequestOp op, Access need, absl::string_view what,
                      RequestStats::Clock::time_point start) {
  if (grpc::Status s = svc->Admit(svc->TokenOf(ctx), need, what); !s.ok()) {
    FinishCounted(svc, rpc, op, start, s);
    return false;
  }
  if (!svc->in_flight().TryAcquire(1)) {
    FinishCounted(svc, rpc, op, start, svc->AtInFlightLimit(what));
    return false;
  }
  rpc->add_in_flight_slots(1);
  const size_t bytes = body.Length();
  if (!svc->in_flight_bytes().TryAcquireOrAlone(bytes)) {
    FinishCounted(svc, rpc, op, start, svc->AtInFlightBytesLimit(what, bytes));
    return false;
  }
  rpc->set_in_flight_bytes(bytes);
  return true;
}

// The answer to a request body that is not an encoding of `type` (a
// message's full name); `why`, when known, says what was wrong.
inline grpc::Status Unparsable(absl::string_view what, absl::string_view type,
                               absl::string_view why = "") {
  return grpc::Status(
      grpc::StatusCode::INVALID_ARGUMENT,
      absl::StrCat(what, ": the request could not be parsed as a ", type,
                   why.empty() ? "" : ": ", why));
}

// Whether a unary RPC may run: AdmitBody, then INVALID_ARGUMENT (answered,
// `rpc` deleted) when its body does not parse as the method's request. The
// body is freed once parsed (ReleaseParsedBytes), so what an accepted RPC
// holds is its parsed request.
template <typename Request, typename Response>
bool Accept(const CacheService* svc, const grpc::CallbackServerContext& ctx,
            RawUnaryCall<Request, Response>* rpc, const grpc::ByteBuffer& body,
            RequestOp op, Access need, absl::string_view what,
            RequestStats::Clock::time_point start) {
  if (!AdmitBody(svc, ctx, rpc, body, op, need, what, start)) return false;
  if (!ParseMessage(body, &rpc->request)) {
    FinishCounted(svc, rpc, op, start,
                  Unparsable(what, rpc->request.GetTypeName()));
    return false;
  }
  ReleaseParsedBytes(body);
  return true;
}

// State of one unary RPC that runs a single CacheOp, from submission to the
// op's completion.
template <typename Request, typename Response>
struct UnaryCall {
  using Rpc = RawUnaryCall<Request, Response>;

  CacheOp op;
  Rpc* rpc = nullptr;
  const CacheService* service = nullptr;
  const char* what = "";
  RequestOp request_op = RequestOp::kGet;
  RequestStats::Clock::time_point start;

  static void Done(CacheOp* op, void* context) {
    auto* call = static_cast<UnaryCall*>(context);
    grpc::Status s = call->service->codec().StatusOf(*op, call->what);
    if (s.ok()) RequestCodec::Encode(*op, &call->rpc->response);
    FinishCounted(call->service, call->rpc, call->request_op, call->start, s);
    delete call;
  }
};

// Serves a unary RPC of one op: accepts it (`need` is its access), decodes
// its request
// (RequestCodec::Decode for Request), submits the op and answers it from the
// op's completion, or at once when it is refused.
template <typename Request, typename Response>
grpc::ServerUnaryReactor* ServeUnary(CacheService* svc,
                                     grpc::CallbackServerContext* ctx,
                                     const grpc::ByteBuffer* body,
                                     grpc::ByteBuffer* reply, RequestOp op,
                                     Access need, const char* what) {
  const auto start = RequestStats::Clock::now();
  grpc::ServerUnaryReactor* const reactor = ctx->DefaultReactor();
  auto* rpc = new RawUnaryCall<Request, Response>(reactor, reply);
  if (!Accept(svc, *ctx, rpc, *body, op, need, what, start)) return reactor;
  auto call = std::make_unique<UnaryCall<Request, Response>>();
  if (grpc::Status s =
          svc->codec().Decode(rpc->request, what, call->op, &rpc->response);
      !s.ok()) {
    return FinishCounted(svc, rpc, op, start, s);
  }
  call->rpc = rpc;
  call->service = svc;
  call->what = what;
  call->request_op = op;
  call->start = start;
  call->op.deadline = SteadyDeadline(ctx);
  call->op.on_done = &UnaryCall<Request, Response>::Done;
  call->op.done_context = call.get();
  // From here the op's completion owns the call (and may delete it before
  // Submit returns); a refused op never completes, so it is deleted here.
  UnaryCall<Request, Response>* owned = call.release();
  if (Error e = svc->dispatcher()->Submit(&owned->op); e != Error::kOk) {
    delete owned;
    FinishCounted(svc, rpc, op, start, svc->codec().SubmitStatus(e, what));
  }
  return reactor;
}

}  // namespace furrballs::service

#endif  // FURRBALLS_SERVICE_UNARY_CALL_H_
