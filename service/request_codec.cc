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

Status RequestCodec::DecodeSet(absl::string_view key, absl::string_view value,
                               uint64_t ttl_ms, int mode,
                               uint64_t expected_version,
                               absl::string_view what, CacheOp& op) const {
  if (Status s = ValidateKey(key, what, limits_); !s.ok()) return s;
  if (Status s = ValidateValue(value, what, limits_); !s.ok()) return s;
  if (Status s = ValidateTtl(ttl_ms, what); !s.ok()) return s;
  switch (mode) {
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
                    absl::StrCat(what, ": unknown mode ", mode));
  }
  op.kind = OpKind::kSet;
  op.value = std::string_view(value.data(), value.size());
  op.write.ttl_ms = ttl_ms;
  op.write.expected_version = expected_version;
  op.hash = Hash(key);
  op.key = std::string_view(key.data(), key.size());
  return Status::OK;
}

Status RequestCodec::DecodeSet(const v1::SetRequest& request,
                               absl::string_view what, CacheOp& op) const {
  return DecodeSet(request.key(), request.value(), request.ttl_ms(),
                   request.mode(), request.expected_version(), what, op);
}

Status RequestCodec::DecodeDelete(absl::string_view key,
                                  absl::string_view what, CacheOp& op) const {
  if (Status s = ValidateKey(key, what, limits_); !s.ok()) return s;
  op.kind = OpKind::kDelete;
  op.hash = Hash(key);
  op.key = std::string_view(key.data(), key.size());
  return Status::OK;
}

Status RequestCodec::DecodeTouch(absl::string_view key, uint64_t ttl_ms,
                                 absl::string_view what, CacheOp& op) const {
  if (Status s = ValidateKey(key, what, limits_); !s.ok()) return s;
  if (Status s = ValidateTtl(ttl_ms, what); !s.ok()) return s;
  op.kind = OpKind::kTouch;
  op.ttl_ms = ttl_ms;
  op.hash = Hash(key);
  op.key = std::string_view(key.data(), key.size());
  return Status::OK;
}

Status RequestCodec::Decode(const OpView& request, absl::string_view what,
                            CacheOp& op, std::string* value_out) const {
  switch (request.kind) {
    case OpView::Kind::kGet:
      return DecodeGet(request.key, what, op, value_out);
    case OpView::Kind::kSet:
      return DecodeSet(request.key, request.value, request.ttl_ms,
                       request.mode, request.expected_version, what, op);
    case OpView::Kind::kDelete:
      return DecodeDelete(request.key, what, op);
    case OpView::Kind::kTouch:
      return DecodeTouch(request.key, request.ttl_ms, what, op);
    case OpView::Kind::kNone:
      break;
  }
  return Status(StatusCode::INVALID_ARGUMENT,
                absl::StrCat(what, ": operation has no Get, Set, Delete or "
                                   "Touch set"));
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
  return DecodeDelete(request.key(), what, op);
}

Status RequestCodec::Decode(const v1::TouchRequest& request,
                            absl::string_view what, CacheOp& op,
                            v1::TouchResponse*) const {
  return DecodeTouch(request.key(), request.ttl_ms(), what, op);
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

OpAnswer RequestCodec::Answer(const CacheOp& op, StatusCode code,
                              absl::string_view message, uint64_t id,
                              absl::string_view value) {
  OpAnswer a;
  a.id = id;
  a.code = static_cast<int32_t>(code);
  if (code != StatusCode::OK) {
    a.message = message;
    return a;
  }
  switch (op.kind) {
    case OpKind::kGet:
      a.kind = OpAnswer::Kind::kGet;
      a.found = op.get.found;
      if (op.get.found) {
        a.value = value;
        a.version = op.get.version;
        a.ttl_remaining_ms = op.get.ttl_remaining_ms;
      }
      break;
    case OpKind::kSet:
      a.kind = OpAnswer::Kind::kSet;
      a.version = op.set.version;
      break;
    case OpKind::kDelete:
      a.kind = OpAnswer::Kind::kDelete;
      a.deleted = op.del.deleted;
      break;
    case OpKind::kTouch:
      a.kind = OpAnswer::Kind::kTouch;
      break;
  }
  return a;
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
