#include "service/status_mapping.h"

#include <string>

#include <absl/strings/str_cat.h>

namespace furrballs::service {

grpc::Status ToGrpcStatus(Error error, absl::string_view what,
                          const Limits& limits) {
  using grpc::StatusCode;
  auto status = [&](StatusCode code, absl::string_view detail) {
    return grpc::Status(code, absl::StrCat(what, ": ", detail));
  };
  switch (error) {
    case Error::kOk:
      return grpc::Status::OK;
    case Error::kEmptyKey:
      return status(StatusCode::INVALID_ARGUMENT, "key is empty");
    case Error::kKeyTooLarge:
      return status(StatusCode::INVALID_ARGUMENT,
                    absl::StrCat("key is longer than the limit of ",
                                 limits.max_key_bytes, " bytes"));
    case Error::kValueTooLarge:
      return status(StatusCode::INVALID_ARGUMENT,
                    absl::StrCat("value is larger than the limit of ",
                                 limits.max_value_bytes, " bytes"));
    case Error::kInvalidArgument:
      return status(StatusCode::INVALID_ARGUMENT, "invalid argument");
    case Error::kKeyNotFound:
      return status(StatusCode::NOT_FOUND, "key not found");
    case Error::kAlreadyExists:
      return status(StatusCode::ALREADY_EXISTS,
                    "key already holds a live value (mode SET_IF_ABSENT)");
    case Error::kVersionMismatch:
      return status(StatusCode::ABORTED,
                    "current version differs from expected_version "
                    "(mode SET_IF_VERSION)");
    case Error::kNoMemory:
    case Error::kCacheFull:
      return status(StatusCode::RESOURCE_EXHAUSTED,
                    "no memory can be reclaimed for this write");
    case Error::kQueueFull:
      return status(StatusCode::RESOURCE_EXHAUSTED,
                    "the owning node's request queue is full; retry later");
    case Error::kAbandonedSet:
      return status(StatusCode::ABORTED,
                    "concurrent write to the same key; retry");
    case Error::kShuttingDown:
      return status(StatusCode::UNAVAILABLE, "server is shutting down");
    case Error::kStorageIo:
    case Error::kStorageCorrupt:
    case Error::kAllocationFailed:
    case Error::kNoSuchNode:
    case Error::kInvalidTopology:
      return status(StatusCode::INTERNAL,
                    absl::StrCat("engine error ", std::string(ErrorName(error))));
  }
  return status(StatusCode::UNKNOWN,
                absl::StrCat("unknown engine error ", static_cast<int>(error)));
}

grpc::Status ValidateKey(absl::string_view key, absl::string_view what,
                         const Limits& limits) {
  if (key.empty()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat(what, ": key is empty"));
  }
  if (key.size() > limits.max_key_bytes) {
    return grpc::Status(
        grpc::StatusCode::INVALID_ARGUMENT,
        absl::StrCat(what, ": key is ", key.size(),
                     " bytes, over the limit of ", limits.max_key_bytes));
  }
  return grpc::Status::OK;
}

grpc::Status ValidateValue(absl::string_view value, absl::string_view what,
                           const Limits& limits) {
  if (value.size() > limits.max_value_bytes) {
    return grpc::Status(
        grpc::StatusCode::INVALID_ARGUMENT,
        absl::StrCat(what, ": value is ", value.size(),
                     " bytes, over the limit of ", limits.max_value_bytes));
  }
  return grpc::Status::OK;
}

}  // namespace furrballs::service
