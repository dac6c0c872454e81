// clients/cpp/status.cc: see status.h.
#include "clients/cpp/status.h"

#include <string>

#include <absl/strings/match.h>
#include <absl/strings/str_cat.h>

namespace furrballs::client {
namespace {

// The canonical codes run from OK (0) to UNAUTHENTICATED (16) in both
// libraries; this pins the assumption the casts below rely on.
static_assert(static_cast<int>(grpc::StatusCode::UNAUTHENTICATED) ==
                  static_cast<int>(absl::StatusCode::kUnauthenticated),
              "gRPC and Abseil must number status codes identically");
static_assert(static_cast<int>(grpc::StatusCode::DEADLINE_EXCEEDED) ==
                  static_cast<int>(absl::StatusCode::kDeadlineExceeded),
              "gRPC and Abseil must number status codes identically");
constexpr int32_t kLastCanonicalCode =
    static_cast<int32_t>(absl::StatusCode::kUnauthenticated);

}  // namespace

absl::Status StatusFromCode(int32_t code, absl::string_view message) {
  if (code == 0) return absl::OkStatus();
  if (code < 0 || code > kLastCanonicalCode) {
    return absl::UnknownError(
        absl::StrCat("status code ", code, " from server: ", message));
  }
  return absl::Status(static_cast<absl::StatusCode>(code), message);
}

absl::Status ToAbslStatus(const grpc::Status& status) {
  const std::string& message = status.error_message();
  return StatusFromCode(static_cast<int32_t>(status.error_code()),
                        absl::string_view(message.data(), message.size()));
}

bool IsOverResponseLimit(const absl::Status& status) {
  return absl::IsResourceExhausted(status) &&
         absl::StrContains(status.message(), "--max_response_bytes");
}

}  // namespace furrballs::client
