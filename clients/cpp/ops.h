// clients/cpp/ops.h: the single-key operations as Pipeline/Batch operations
// and Set requests, and their answers as the typed results the unary calls
// return; shared by Client (client.cc), its Pipeline (pipeline.cc) and the
// Batcher's callers. Internal to clients/cpp.
//
// Thread safety: pure functions of their arguments.
#ifndef FURRBALLS_CLIENTS_CPP_OPS_H_
#define FURRBALLS_CLIENTS_CPP_OPS_H_

#include <cstdint>
#include <optional>

#include <absl/status/statusor.h>
#include <absl/strings/string_view.h>

#include "clients/cpp/client.h"
#include "furrballs/v1/furrballs.pb.h"

namespace furrballs::client::internal {

namespace v1 = ::furrballs::v1;

void FillSet(absl::string_view key, absl::string_view value,
             const SetOptions& options, v1::SetRequest* request);

// Moves the value out of `response`: large values are not copied twice.
std::optional<Entry> TakeEntry(v1::GetResponse* response);

v1::PipelineRequest GetOp(absl::string_view key);
v1::PipelineRequest SetOp(absl::string_view key, absl::string_view value,
                          const SetOptions& options);
v1::PipelineRequest DeleteOp(absl::string_view key);
v1::PipelineRequest TouchOp(absl::string_view key, uint64_t ttl_ms);

using OpResult = absl::StatusOr<v1::PipelineResponse>;

absl::StatusOr<std::optional<Entry>> AsEntry(OpResult r);
absl::StatusOr<uint64_t> AsVersion(OpResult r);
absl::StatusOr<bool> AsDeleted(OpResult r);
absl::Status AsTouched(OpResult r);

}  // namespace furrballs::client::internal

#endif  // FURRBALLS_CLIENTS_CPP_OPS_H_
