#include "service/cache_service.h"

#include <optional>
#include <string>

#include <absl/strings/str_cat.h>
#include <grpcpp/impl/codegen/server_callback_handlers.h>

#include "service/raw_call.h"
#include "service/request_codec.h"
#include "service/unary_call.h"

namespace furrballs::service {

CacheService::CacheService(FurrBall* engine, Dispatcher* dispatcher,
                           const StreamLimits& stream_limits,
                           const TokenAuthenticator* auth)
    : engine_(engine),
      dispatcher_(dispatcher),
      codec_(engine, Limits{engine->options().max_key_bytes,
                            engine->options().max_value_bytes}),
      stream_limits_(stream_limits),
      auth_(auth),
      in_flight_(stream_limits.max_in_flight),
      in_flight_bytes_(stream_limits.max_in_flight_bytes,
                       stream_limits.max_message_bytes) {
  // MultiSet as a stream of one message: gRPC then reads it only when the
  // reactor asks (a bidi method's payload handling is NONE, a unary one's
  // reads the whole message first; request_byte_gate.h). On the wire a
  // unary call and a stream of one message each way are the same, so
  // clients keep calling it unary. The index is the method's in the
  // .proto (and in the generated Cache::Service); MarkMethodRawCallback
  // makes it a raw callback method, MarkMethodStreamed a bidi one, each
  // with its own handler (the second replaces the first).
  constexpr int kMultiSetMethod = 5;
  auto handler = [this] {
    return new grpc::internal::CallbackBidiHandler<grpc::ByteBuffer,
                                                   grpc::ByteBuffer>(
        [this](grpc::CallbackServerContext* ctx) {
          return MultiSetStream(ctx);
        });
  };
  MarkMethodRawCallback(kMultiSetMethod, handler());
  MarkMethodStreamed(kMultiSetMethod, handler());
}

// The message names the flag: the operator's knob, and what a client's
// engineer searches for.
grpc::Status CacheService::AtInFlightLimit(absl::string_view what) const {
  return grpc::Status(
      grpc::StatusCode::RESOURCE_EXHAUSTED,
      absl::StrCat(what, ": the server is at its limit of ",
                   in_flight_.limit(),
                   " operations in flight (--max_in_flight); retry with "
                   "backoff"));
}

grpc::Status CacheService::AtInFlightBytesLimit(absl::string_view what,
                                                size_t bytes) const {
  return grpc::Status(
      grpc::StatusCode::RESOURCE_EXHAUSTED,
      absl::StrCat(what, ": a request of ", bytes,
                   " bytes does not fit beside the requests in flight (",
                   in_flight_bytes_.in_flight(), " of the server's limit of ",
                   in_flight_bytes_.limit(),
                   " bytes, --max_in_flight_mb); retry with backoff"));
}

std::string CacheService::CheckStreamLimits(const StreamLimits& limits,
                                            size_t max_value_bytes) {
  if (limits.max_response_bytes < max_value_bytes) {
    return absl::StrCat("--max_response_bytes=", limits.max_response_bytes,
                        " cannot carry one value of --max_value_bytes=",
                        max_value_bytes);
  }
  // Bounded first, so that the sum below cannot wrap.
  const size_t framing_bound = limits.max_message_bytes / kAnswerOverheadBytes;
  if (limits.max_batch_ops > framing_bound ||
      limits.max_response_bytes >
          limits.max_message_bytes -
              limits.max_batch_ops * kAnswerOverheadBytes) {
    return absl::StrCat(
        "--max_response_bytes=", limits.max_response_bytes,
        " plus the framing of --max_batch_ops=", limits.max_batch_ops,
        " answers (", kAnswerOverheadBytes,
        " bytes each) does not fit in --max_message_bytes=",
        limits.max_message_bytes);
  }
  if (limits.max_in_flight != 0 &&
      limits.max_in_flight < limits.max_batch_ops) {
    return absl::StrCat("--max_in_flight=", limits.max_in_flight,
                        ": must be 0 (no cap) or at least --max_batch_ops=",
                        limits.max_batch_ops,
                        ", or a full Batch message could never run");
  }
  return "";
}

grpc::Status CacheService::Admit(const std::optional<TokenDigest>& token,
                                 Access need, absl::string_view what) const {
  if (auth_ != nullptr) {
    if (grpc::Status s = auth_->Authorize(token, need, what); !s.ok()) {
      return s;
    }
  }
  return ready() ? grpc::Status::OK : Unavailable();
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>*
CacheService::RefuseStream(const grpc::Status& status) {
  class Refuse final
      : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
   public:
    explicit Refuse(const grpc::Status& status) { Finish(status); }
    void OnDone() override { delete this; }
  };
  return new Refuse(status);
}

grpc::ServerUnaryReactor* CacheService::Get(grpc::CallbackServerContext* ctx,
                                            const grpc::ByteBuffer* body,
                                            grpc::ByteBuffer* reply) {
  return ServeUnary<v1::GetRequest, v1::GetResponse>(
      this, ctx, body, reply, RequestOp::kGet, Access::kRead, "Get");
}

grpc::ServerUnaryReactor* CacheService::Set(grpc::CallbackServerContext* ctx,
                                            const grpc::ByteBuffer* body,
                                            grpc::ByteBuffer* reply) {
  return ServeUnary<v1::SetRequest, v1::SetResponse>(
      this, ctx, body, reply, RequestOp::kSet, Access::kWrite, "Set");
}

grpc::ServerUnaryReactor* CacheService::Delete(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* body,
    grpc::ByteBuffer* reply) {
  return ServeUnary<v1::DeleteRequest, v1::DeleteResponse>(
      this, ctx, body, reply, RequestOp::kDelete, Access::kWrite, "Delete");
}

grpc::ServerUnaryReactor* CacheService::Touch(grpc::CallbackServerContext* ctx,
                                              const grpc::ByteBuffer* body,
                                              grpc::ByteBuffer* reply) {
  return ServeUnary<v1::TouchRequest, v1::TouchResponse>(
      this, ctx, body, reply, RequestOp::kTouch, Access::kWrite, "Touch");
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
  return FinishCounted(this, rpc, RequestOp::kStats, start, grpc::Status::OK);
}

}  // namespace furrballs::service
