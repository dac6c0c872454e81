// service/request_codec.h: the request codec: furrballs.v1 request messages
// to engine operations (CacheOps) and finished operations back to response
// messages, with the validation every RPC shares.
//
// Thread safety: a RequestCodec is immutable after construction; every member
// may be called from any thread.
//
// This is the only file of the service that turns a key into what the engine
// needs (its hash) and the only one that reads an op's result fields, so that
// a change of the engine's operation interface is a change here. It needs no
// server: request_codec_test.cc drives it with messages alone.
#ifndef FURRBALLS_SERVICE_REQUEST_CODEC_H_
#define FURRBALLS_SERVICE_REQUEST_CODEC_H_

#include <cstdint>
#include <string>

#include <absl/strings/string_view.h>
#include <grpcpp/support/status.h>

#include "engine/furrball/furrball.h"
#include "furrballs/v1/furrballs.pb.h"
#include "service/batch_wire.h"
#include "service/dispatcher.h"
#include "service/status_mapping.h"

namespace furrballs::service {

// A TTL longer than this is almost certainly a unit mistake (seconds passed
// as milliseconds twice over, or an absolute timestamp) and is rejected.
inline constexpr uint64_t kMaxTtlMs = uint64_t{365} * 24 * 3600 * 1000;

// The answer to an RPC or op that arrives while the service is not ready.
grpc::Status Unavailable();

class RequestCodec {
 public:
  // `engine` hashes keys and must outlive the codec; `limits` are enforced
  // and quoted in error messages.
  RequestCodec(const FurrBall* engine, const Limits& limits)
      : engine_(engine), limits_(limits) {}

  const Limits& limits() const { return limits_; }

  // Decoding. Each validates its request and fills the op's kind, hash and
  // operands, or returns INVALID_ARGUMENT saying which field is wrong and the
  // limit. `what` names the operation in messages ("Set", "MultiGet item
  // 3"). A Get's value is written into `response` when it runs; the op must
  // not outlive the request (a Set's value points into it).
  grpc::Status Decode(const v1::GetRequest& request, absl::string_view what,
                      CacheOp& op, v1::GetResponse* response) const;
  grpc::Status Decode(const v1::SetRequest& request, absl::string_view what,
                      CacheOp& op, v1::SetResponse* response) const;
  grpc::Status Decode(const v1::DeleteRequest& request, absl::string_view what,
                      CacheOp& op, v1::DeleteResponse* response) const;
  grpc::Status Decode(const v1::TouchRequest& request, absl::string_view what,
                      CacheOp& op, v1::TouchResponse* response) const;
  // A Get of `key` whose value goes to `value_out` (MultiGet's keys are bare).
  grpc::Status DecodeGet(absl::string_view key, absl::string_view what,
                         CacheOp& op, std::string* value_out) const;
  grpc::Status DecodeSet(const v1::SetRequest& request, absl::string_view what,
                         CacheOp& op) const;
  // One op of a Batch request (service/batch_wire.h); a Get's value goes to
  // `value_out`.
  grpc::Status Decode(const OpView& request, absl::string_view what,
                      CacheOp& op, std::string* value_out) const;
  // A pipelined op; its Get value goes to response->get().
  grpc::Status Decode(const v1::PipelineRequest& request, CacheOp& op,
                      v1::PipelineResponse* response) const;

  // Encoding of an op that finished OK (StatusOf(op).ok()).
  static void Encode(const CacheOp& op, v1::GetResponse* response);
  static void Encode(const CacheOp& op, v1::SetResponse* response);
  static void Encode(const CacheOp& op, v1::DeleteResponse* response);
  static void Encode(const CacheOp& op, v1::TouchResponse* response);
  static void Encode(const CacheOp& op, v1::SetResult* result);
  // A pipelined op's answer, `status` included; on an error the result is
  // cleared.
  static void Encode(const CacheOp& op, const grpc::Status& status,
                     v1::PipelineResponse* response);

  // The answer to one op of a Batch, for batch_wire's encoder: `code` and
  // `message` are the op's status (grpc::Status returns its message by
  // value, so the caller keeps it), a Get's value is `value` (the op's
  // value_out). Its views must outlive it.
  static OpAnswer Answer(const CacheOp& op, grpc::StatusCode code,
                         absl::string_view message, uint64_t id,
                         absl::string_view value);

  // Records a failed batch item's status in its result: a GetResponse (whose
  // found stays false: a failed read writes nothing into it) or a SetResult.
  template <typename Result>
  static void EncodeItemStatus(const grpc::Status& status, Result* result) {
    result->set_code(static_cast<int>(status.error_code()));
    result->set_message(status.error_message());
  }

  // The status of a finished op, for the operation named `what`.
  grpc::Status StatusOf(const CacheOp& op, absl::string_view what) const;
  // Why the dispatcher refused an op (`error` is not kOk).
  grpc::Status SubmitStatus(Error error, absl::string_view what) const;

 private:
  grpc::Status DecodeSet(absl::string_view key, absl::string_view value,
                         uint64_t ttl_ms, int mode, uint64_t expected_version,
                         absl::string_view what, CacheOp& op) const;
  grpc::Status DecodeDelete(absl::string_view key, absl::string_view what,
                            CacheOp& op) const;
  grpc::Status DecodeTouch(absl::string_view key, uint64_t ttl_ms,
                           absl::string_view what, CacheOp& op) const;

  HashPair Hash(absl::string_view key) const {
    return engine_->Hash(std::string_view(key.data(), key.size()));
  }

  const FurrBall* const engine_;
  const Limits limits_;
};

}  // namespace furrballs::service

#endif  // FURRBALLS_SERVICE_REQUEST_CODEC_H_
