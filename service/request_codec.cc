#include "service/request_codec.h"

#include <absl/strings/str_cat.h>

namespace furrballs::service {
namespace {

using grpc::Status;
using grpc::StatusCode;

Status ValidateTtl(uint64_t ttl_ms, absl::string_view what) {
  if (ttl_ms > kMaxTtlMs) {
    return Status(StatusCode::INVALID_ARGUMENT,
                  absl::StrCat(what, ": ttl_ms ", ttl_ms,
                               " exceeds the maximum of ", kMaxTtlMs,
                               " (365 days)"));
  }
  return Status::OK;
}

}  // namespace

Status Unavailable() {
  return Status(StatusCode::UNAVAILABLE,
                "server is starting or shutting down; retry later");
}

Status RequestCodec::DecodeGet(absl::string_view key, absl::string_view what,
                               CacheOp& op, std::string* value_out) const {
  if (Status s = ValidateKey(key, what, limits_); !s.ok()) return s;
  op.kind = OpKind::kGet;
  op.hash = Hash(key);
  op.key = std::string_view(key.data(), key.size());
  op.value_out = value_out;
  return Status::OK;
}

Status RequestCodec::DecodeSet(const v1::SetRequest& request,
                               absl::string_view what, CacheOp& op) const {
  if (Status s = ValidateKey(request.key(), what, limits_); !s.ok()) return s;
  if (Status s = ValidateValue(request.value(), what, limits_); !s.ok()) {
    return s;
  }
  if (Status s = ValidateTtl(request.ttl_ms(), what); !s.ok()) return s;
  switch (request.mode()) {
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
                                 static_cast<int>(request.mode())));
  }
  op.kind = OpKind::kSet;
  op.value = request.value();
  op.write.ttl_ms = request.ttl_ms();
  op.write.expected_version = request.expected_version();
  op.hash = Hash(request.key());
  op.key = request.key();
  return Status::OK;
}

Status RequestCodec::Decode(const v1::GetRequest& request,
                            absl::string_view what, CacheOp& op,
                            v1::GetResponse* response) const {
  return DecodeGet(request.key(), what, op, response->mutable_value());
}

Status RequestCodec::Decode(const v1::SetRequest& request,
                            absl::string_view what, CacheOp& op,
                            v1::SetResponse*) const {
  return DecodeSet(request, what, op);
}

Status RequestCodec::Decode(const v1::DeleteRequest& request,
                            absl::string_view what, CacheOp& op,
                            v1::DeleteResponse*) const {
  if (Status s = ValidateKey(request.key(), what, limits_); !s.ok()) return s;
  op.kind = OpKind::kDelete;
  op.hash = Hash(request.key());
  op.key = request.key();
  return Status::OK;
}

Status RequestCodec::Decode(const v1::TouchRequest& request,
                            absl::string_view what, CacheOp& op,
                            v1::TouchResponse*) const {
  if (Status s = ValidateKey(request.key(), what, limits_); !s.ok()) return s;
  if (Status s = ValidateTtl(request.ttl_ms(), what); !s.ok()) return s;
  op.kind = OpKind::kTouch;
  op.ttl_ms = request.ttl_ms();
  op.hash = Hash(request.key());
  op.key = request.key();
  return Status::OK;
}

Status RequestCodec::Decode(const v1::PipelineRequest& request, CacheOp& op,
                            v1::PipelineResponse* response) const {
  switch (request.op_case()) {
    case v1::PipelineRequest::kGet:
      return DecodeGet(request.get().key(), "Pipeline", op,
                       response->mutable_get()->mutable_value());
    case v1::PipelineRequest::kSet:
      return DecodeSet(request.set(), "Pipeline Set", op);
    case v1::PipelineRequest::kDelete:
      return Decode(request.delete_(), "Pipeline", op,
                    response->mutable_delete_());
    case v1::PipelineRequest::kTouch:
      return Decode(request.touch(), "Pipeline Touch", op,
                    response->mutable_touch());
    case v1::PipelineRequest::OP_NOT_SET:
      break;
  }
  return Status(StatusCode::INVALID_ARGUMENT,
                "Pipeline: request has no operation set");
}

void RequestCodec::Encode(const CacheOp& op, v1::GetResponse* response) {
  response->set_found(op.get.found);
  if (op.get.found) {
    response->set_version(op.get.version);
    response->set_ttl_remaining_ms(op.get.ttl_remaining_ms);
  } else {
    response->clear_value();
  }
}

void RequestCodec::Encode(const CacheOp& op, v1::SetResponse* response) {
  response->set_version(op.set.version);
}

void RequestCodec::Encode(const CacheOp& op, v1::DeleteResponse* response) {
  response->set_deleted(op.del.deleted);
}

void RequestCodec::Encode(const CacheOp&, v1::TouchResponse*) {}

void RequestCodec::Encode(const CacheOp& op, v1::SetResult* result) {
  result->set_version(op.set.version);
}

void RequestCodec::Encode(const CacheOp& op, const Status& status,
                          v1::PipelineResponse* response) {
  response->set_code(static_cast<int>(status.error_code()));
  if (!status.ok()) {
    response->set_message(status.error_message());
    response->clear_result();
    return;
  }
  switch (op.kind) {
    case OpKind::kGet:
      Encode(op, response->mutable_get());
      break;
    case OpKind::kSet:
      Encode(op, response->mutable_set());
      break;
    case OpKind::kDelete:
      Encode(op, response->mutable_delete_());
      break;
    case OpKind::kTouch:
      Encode(op, response->mutable_touch());
      break;
  }
}

Status RequestCodec::StatusOf(const CacheOp& op, absl::string_view what) const {
  if (op.deadline_exceeded) {
    return Status(StatusCode::DEADLINE_EXCEEDED,
                  absl::StrCat(what, ": deadline passed before the operation "
                                     "reached the front of its node's queue"));
  }
  return ToGrpcStatus(op.error, what, limits_);
}

Status RequestCodec::SubmitStatus(Error error, absl::string_view what) const {
  return error == Error::kShuttingDown ? Unavailable()
                                       : ToGrpcStatus(error, what, limits_);
}

}  // namespace furrballs::service
