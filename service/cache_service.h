// service/cache_service.h: the furrballs.v1.Cache gRPC service (callback API).
//
// Thread safety: thread-safe; gRPC calls the handlers from its own threads.
//
// Every call, and every op of a Pipeline, is first admitted (Admit): its
// bearer token must grant the method's access when the server requires
// tokens (service/token_auth.h), and the service must be ready. A unary
// request is parsed only after that, so a caller without a token learns
// nothing about its request; a Pipeline frame is parsed first (its op decides
// the access it needs), on a stream admitted when it opened.
//
// Handlers never block. Each parses its request, decodes it into a CacheOp
// (service/request_codec.h: validation, the key's hash) and hands the op to
// the Dispatcher; the RPC is finished from
// the op's completion (on the owning node's worker, or inline in direct
// mode). Every rejection carries the most specific status code and a message
// naming the field and the limit (service/status_mapping.h); a request that
// does not parse is INVALID_ARGUMENT too, which is why every method is
// registered raw (service/raw_call.h).
//
// The implementation is split by concern: cache_service.cc (the single-op
// RPCs through one template, service/unary_call.h, and Stats),
// batch_calls.cc (MultiGet, MultiSet), pipeline_reactor.cc and
// batch_reactor.cc (the streams).
#ifndef FURRBALLS_SERVICE_CACHE_SERVICE_H_
#define FURRBALLS_SERVICE_CACHE_SERVICE_H_

#include <atomic>
#include <cstddef>
#include <optional>
#include <string>

#include <absl/strings/string_view.h>

#include <grpcpp/support/byte_buffer.h>

#include "engine/furrball/furrball.h"
#include "furrballs/v1/furrballs.grpc.pb.h"
#include "service/dispatcher.h"
#include "service/in_flight_limit.h"
#include "service/call_backlog.h"
#include "service/request_byte_gate.h"
#include "service/request_codec.h"
#include "service/request_stats.h"
#include "service/status_mapping.h"
#include "service/token_auth.h"

namespace furrballs::service {

// The generated furrballs.v1.Cache service with every method raw: requests
// and responses are ByteBuffers that CacheService parses and serializes.
// MultiSet is registered by CacheService itself, as a stream of one message
// (service/request_byte_gate.h).
using RawCacheService = v1::Cache::WithRawCallbackMethod_Get<
    v1::Cache::WithRawCallbackMethod_Set<v1::Cache::WithRawCallbackMethod_Delete<
        v1::Cache::WithRawCallbackMethod_Touch<
            v1::Cache::WithRawCallbackMethod_MultiGet<
                v1::Cache::WithRawCallbackMethod_Pipeline<
                    v1::Cache::WithRawCallbackMethod_Stats<
                        v1::Cache::WithRawCallbackMethod_Batch<
                            v1::Cache::Service>>>>>>>>;

class CacheService final : public RawCacheService {
 public:
  // What one stream or batch, and the service as a whole, may hold (the
  // binary's flags of the same names).
  struct StreamLimits {
    // Pipeline ops in flight per stream before reading pauses.
    size_t max_pipeline_in_flight = 256;
    // Operations in one Batch message, and keys or items in one MultiGet or
    // MultiSet; more is INVALID_ARGUMENT, before anything is built.
    size_t max_batch_ops = 4096;
    // Bytes a Batch or Pipeline stream holds (requests read and answers
    // not yet written) before it stops reading (service/batch_reactor.cc,
    // service/pipeline_reactor.cc).
    size_t max_stream_bytes = size_t{64} << 20;
    // Bytes of values one MultiGet or Batch answer carries; a Get whose
    // value would take it over is answered RESOURCE_EXHAUSTED on its own
    // (service/response_budget.h). At least max_value_bytes, and with the
    // answer's framing (kAnswerOverheadBytes per op) at most
    // max_message_bytes.
    size_t max_response_bytes = size_t{4} << 20;
    // The largest message (set from ServerOptions::max_message_bytes).
    size_t max_message_bytes = size_t{16} << 20;
    // Cache operations running at once over the whole service
    // (service/in_flight_limit.h); 0: no cap. At least max_batch_ops, so
    // that a full Batch message can run.
    size_t max_in_flight = 0;
    // Bytes of unary requests (a Set's, a MultiSet's message, ...) held at
    // once over the whole service (service/request_byte_gate.h): a MultiSet
    // waits for room before gRPC reads it, and holds its bytes until it is
    // answered; another request is counted once received, and one past the
    // cap is answered RESOURCE_EXHAUSTED. A request runs when nothing else
    // is held (the cap may be smaller than a message). 0: no cap.
    size_t max_in_flight_bytes = 0;
  };

  // What an answer needs per op beyond a Get's value: framing, id, code and
  // version, and a rejection's message (the longest, naming the key limit,
  // is ~100 bytes).
  static constexpr size_t kAnswerOverheadBytes = 256;
  // A reason why `limits` cannot work together with values of up to
  // `max_value_bytes`, naming the flags; empty when they can.
  static std::string CheckStreamLimits(const StreamLimits& limits,
                                       size_t max_value_bytes);

  // `engine` and `dispatcher` must outlive the service, and so must `auth`
  // when given: then every Cache call needs a bearer token it accepts
  // (service/token_auth.h); null serves everybody.
  CacheService(FurrBall* engine, Dispatcher* dispatcher,
               const StreamLimits& stream_limits,
               const TokenAuthenticator* auth = nullptr);

  // Until SetReady(true) (and after SetReady(false)) every RPC fails with
  // UNAVAILABLE.
  void SetReady(bool ready) { ready_.store(ready, std::memory_order_release); }
  bool ready() const { return ready_.load(std::memory_order_acquire); }

  // Each takes the request's bytes and fills `reply` with the response's.
  grpc::ServerUnaryReactor* Get(grpc::CallbackServerContext* ctx,
                                const grpc::ByteBuffer* request,
                                grpc::ByteBuffer* reply) override;
  grpc::ServerUnaryReactor* Set(grpc::CallbackServerContext* ctx,
                                const grpc::ByteBuffer* request,
                                grpc::ByteBuffer* reply) override;
  grpc::ServerUnaryReactor* Delete(grpc::CallbackServerContext* ctx,
                                   const grpc::ByteBuffer* request,
                                   grpc::ByteBuffer* reply) override;
  grpc::ServerUnaryReactor* Touch(grpc::CallbackServerContext* ctx,
                                  const grpc::ByteBuffer* request,
                                  grpc::ByteBuffer* reply) override;
  grpc::ServerUnaryReactor* MultiGet(grpc::CallbackServerContext* ctx,
                                     const grpc::ByteBuffer* request,
                                     grpc::ByteBuffer* reply) override;
  // A unary RPC for its callers, served as a stream of one message so that
  // gRPC reads it only once in_flight_bytes() has room for it
  // (service/request_byte_gate.h; service/batch_calls.cc).
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* MultiSetStream(
      grpc::CallbackServerContext* ctx);
  // A frame that does not parse ends the stream with INVALID_ARGUMENT once
  // every op read before it has been answered.
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* Pipeline(
      grpc::CallbackServerContext* ctx) override;
  grpc::ServerUnaryReactor* Stats(grpc::CallbackServerContext* ctx,
                                  const grpc::ByteBuffer* request,
                                  grpc::ByteBuffer* reply) override;
  // Many ops per message (service/batch_reactor.cc). A frame that does not
  // parse ends the stream with INVALID_ARGUMENT once every message read
  // before it has been answered.
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* Batch(
      grpc::CallbackServerContext* ctx) override;

  // The call's bearer token, when tokens are on (else nullopt: none needed).
  std::optional<TokenDigest> TokenOf(
      const grpc::CallbackServerContext& ctx) const {
    return auth_ != nullptr ? PresentedToken(ctx) : std::nullopt;
  }
  // The first check of every RPC and of every Pipeline op: `token` must
  // grant `need` when tokens are on (else UNAUTHENTICATED or
  // PERMISSION_DENIED), then the service must be ready (else UNAVAILABLE,
  // while starting or draining). `what` names the method in the message.
  grpc::Status Admit(const std::optional<TokenDigest>& token, Access need,
                     absl::string_view what) const;

  const Limits& limits() const { return codec_.limits(); }
  const RequestCodec& codec() const { return codec_; }
  FurrBall* engine() const { return engine_; }
  Dispatcher* dispatcher() const { return dispatcher_; }
  size_t max_pipeline_in_flight() const {
    return stream_limits_.max_pipeline_in_flight;
  }
  const StreamLimits& stream_limits() const { return stream_limits_; }
  // The cap on ops in flight: every op takes its slot once admitted, before
  // it is parsed or decoded, and gives it back when it is answered.
  InFlightLimit& in_flight() const { return in_flight_; }
  // The answer to an op (or message) that found the service at that cap.
  grpc::Status AtInFlightLimit(absl::string_view what) const;
  // The cap on the bytes of unary requests being served
  // (StreamLimits::max_in_flight_bytes), and the answer to one past it.
  RequestByteGate& in_flight_bytes() const { return in_flight_bytes_; }
  // MultiSets read and not yet ended by gRPC (call_backlog.h).
  CallBacklog& call_backlog() const { return call_backlog_; }
  grpc::Status AtInFlightBytesLimit(absl::string_view what,
                                    size_t bytes) const;

  // Counts a finished request, from its handler's entry (`start`) to now;
  // called just before the RPC (or pipelined item) is finished, so a client
  // that has its answer finds it counted. metrics/ reads the counts.
  void RecordRequest(RequestOp op, RequestStats::Clock::time_point start,
                     const grpc::Status& status) const {
    request_stats_.RecordSince(op, static_cast<int>(status.error_code()),
                               start);
  }
  const RequestStats& request_stats() const { return request_stats_; }

 private:
  // A stream that Admit refused: ends it with `status`.
  static grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>*
  RefuseStream(const grpc::Status& status);

  FurrBall* const engine_;
  Dispatcher* const dispatcher_;
  const RequestCodec codec_;
  const StreamLimits stream_limits_;
  const TokenAuthenticator* const auth_;
  // Mutable like a mutex would be: taking a slot changes nothing a caller
  // of the service can observe but the shedding it is for.
  mutable InFlightLimit in_flight_;
  mutable RequestByteGate in_flight_bytes_;
  mutable CallBacklog call_backlog_;
  std::atomic<bool> ready_{false};
  // Mutable like a mutex would be: recording is internally synchronized and
  // changes nothing a caller of the service can observe.
  mutable RequestStats request_stats_;
};

}  // namespace furrballs::service

#endif  // FURRBALLS_SERVICE_CACHE_SERVICE_H_
