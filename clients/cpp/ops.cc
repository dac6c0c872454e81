// clients/cpp/ops.cc: see ops.h.
#include "clients/cpp/ops.h"

#include <utility>

namespace furrballs::client::internal {
namespace {

v1::SetMode ToProto(SetMode mode) {
  switch (mode) {
    case SetMode::kAlways:
      return v1::SET_ALWAYS;
    case SetMode::kIfAbsent:
      return v1::SET_IF_ABSENT;
    case SetMode::kIfVersion:
      return v1::SET_IF_VERSION;
  }
  return v1::SET_ALWAYS;
}

}  // namespace

void FillSet(absl::string_view key, absl::string_view value,
             const SetOptions& options, v1::SetRequest* request) {
  request->set_key(key.data(), key.size());
  request->set_value(value.data(), value.size());
  request->set_ttl_ms(options.ttl_ms);
  request->set_mode(ToProto(options.mode));
  if (options.mode == SetMode::kIfVersion) {
    request->set_expected_version(options.expected_version);
  }
}

std::optional<Entry> TakeEntry(v1::GetResponse* response) {
  if (!response->found()) return std::nullopt;
  Entry e;
  e.value = std::move(*response->mutable_value());
  e.version = response->version();
  e.ttl_remaining_ms = response->ttl_remaining_ms();
  return e;
}

v1::PipelineRequest GetOp(absl::string_view key) {
  v1::PipelineRequest r;
  r.mutable_get()->set_key(key.data(), key.size());
  return r;
}

v1::PipelineRequest SetOp(absl::string_view key, absl::string_view value,
                          const SetOptions& options) {
  v1::PipelineRequest r;
  FillSet(key, value, options, r.mutable_set());
  return r;
}

v1::PipelineRequest DeleteOp(absl::string_view key) {
  v1::PipelineRequest r;
  r.mutable_delete_()->set_key(key.data(), key.size());
  return r;
}

v1::PipelineRequest TouchOp(absl::string_view key, uint64_t ttl_ms) {
  v1::PipelineRequest r;
  r.mutable_touch()->set_key(key.data(), key.size());
  r.mutable_touch()->set_ttl_ms(ttl_ms);
  return r;
}

absl::StatusOr<std::optional<Entry>> AsEntry(OpResult r) {
  if (!r.ok()) return r.status();
  return TakeEntry(r->mutable_get());
}

absl::StatusOr<uint64_t> AsVersion(OpResult r) {
  if (!r.ok()) return r.status();
  return r->set().version();
}

absl::StatusOr<bool> AsDeleted(OpResult r) {
  if (!r.ok()) return r.status();
  return r->delete_().deleted();
}

absl::Status AsTouched(OpResult r) { return r.status(); }

}  // namespace furrballs::client::internal
