// engine/numatic/error_status.h: absl::Status values that carry an engine
// Error code (report §3.6).
//
// Thread safety: pure functions over values; safe everywhere.
//
// Numatic reports failures as absl::Status so that a person gets a message
// ("node 5 is not in this topology; nodes are 0-1") while the engine, which
// speaks the report's Error enum, gets a code it can switch on. The Error
// travels as a status payload, so neither side has to parse the other's text.
#ifndef FURRBALLS_ENGINE_NUMATIC_ERROR_STATUS_H_
#define FURRBALLS_ENGINE_NUMATIC_ERROR_STATUS_H_

#include <absl/status/status.h>
#include <absl/strings/string_view.h>

#include "engine/common/error.h"

namespace furrballs {

// A non-OK status with `message`, an absl code that matches `error`'s meaning
// (kNoSuchNode -> NOT_FOUND, kAllocationFailed -> RESOURCE_EXHAUSTED, ...)
// and `error` attached as a payload. REQUIRES: error != Error::kOk.
absl::Status ErrorStatus(Error error, absl::string_view message);

// The Error carried by `status`: kOk for an OK status; for a status made
// elsewhere (no payload) the closest Error for its absl code.
Error ErrorOf(const absl::Status& status);

}  // namespace furrballs

#endif  // FURRBALLS_ENGINE_NUMATIC_ERROR_STATUS_H_
