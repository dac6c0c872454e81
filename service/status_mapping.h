// service/status_mapping.h: the one place where engine results become gRPC
// status codes.
//
// Thread safety: pure functions.
#ifndef FURRBALLS_SERVICE_STATUS_MAPPING_H_
#define FURRBALLS_SERVICE_STATUS_MAPPING_H_

#include <absl/strings/string_view.h>

#include <grpcpp/support/status.h>

#include "engine/common/error.h"
#include "engine/furrball/options.h"

namespace furrballs::service {

// The limits quoted in error messages.
struct Limits {
  size_t max_key_bytes = 0;
  size_t max_value_bytes = 0;
};

// Maps an engine Error to the most specific gRPC code with a message that
// says what was wrong and, where one applies, the limit. `what` names the
// operation ("Set", "MultiGet item 3", ...) so batch errors are traceable.
grpc::Status ToGrpcStatus(Error error, absl::string_view what,
                          const Limits& limits);

// Validation shared by every RPC, so all of them reject bad input the same
// way. Returns OK or INVALID_ARGUMENT with the offending size and the limit.
grpc::Status ValidateKey(absl::string_view key, absl::string_view what,
                         const Limits& limits);
grpc::Status ValidateValue(absl::string_view value, absl::string_view what,
                           const Limits& limits);

}  // namespace furrballs::service

#endif  // FURRBALLS_SERVICE_STATUS_MAPPING_H_
