#include "engine/numatic/error_status.h"

#include <cstdint>
#include <string>

#include <absl/strings/cord.h>
#include <absl/strings/numbers.h>
#include <absl/types/optional.h>

namespace furrballs {
namespace {

// The payload key. Its value is the Error as a decimal number.
constexpr absl::string_view kErrorPayloadUrl = "type.furrballs/engine.Error";

// Only the codes Numatic produces need a precise mapping; the service's own
// status mapping stays the one place that turns engine results into gRPC codes.
absl::StatusCode CodeFor(Error error) {
  switch (error) {
    case Error::kNoSuchNode:
      return absl::StatusCode::kNotFound;
    case Error::kAllocationFailed:
    case Error::kNoMemory:
      return absl::StatusCode::kResourceExhausted;
    case Error::kInvalidTopology:
    case Error::kInvalidArgument:
      return absl::StatusCode::kInvalidArgument;
    default:
      return absl::StatusCode::kUnknown;
  }
}

}  // namespace

absl::Status ErrorStatus(Error error, absl::string_view message) {
  absl::Status status(CodeFor(error), message);
  status.SetPayload(kErrorPayloadUrl,
                    absl::Cord(std::to_string(static_cast<uint16_t>(error))));
  return status;
}

Error ErrorOf(const absl::Status& status) {
  if (status.ok()) return Error::kOk;
  const absl::optional<absl::Cord> payload =
      status.GetPayload(kErrorPayloadUrl);
  uint32_t value = 0;
  if (payload.has_value() &&
      absl::SimpleAtoi(std::string(*payload), &value)) {
    return static_cast<Error>(value);
  }
  switch (status.code()) {
    case absl::StatusCode::kNotFound:
      return Error::kNoSuchNode;
    case absl::StatusCode::kResourceExhausted:
      return Error::kAllocationFailed;
    default:
      return Error::kInvalidArgument;
  }
}

}  // namespace furrballs
