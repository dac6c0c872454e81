// service/batch_wire_fuzz.cc: libFuzzer target for ParseBatchRequest, the
// service's own reader of Batch stream messages from the network
// (batch_wire.h; docs/fuzzing.md).
//
// Thread safety: single-threaded, as libFuzzer calls it.
//
// Input: one byte for max_ops, then the message bytes. Checks: no crash or
// sanitizer report; when both ParseBatchRequest and protobuf's generated
// parser accept the bytes, they read the same id, timeout and ops (kind,
// id, key, value, TTL, mode, expected version); a message with more than
// max_ops ops is refused with its count and no ops built; every view
// points inside the input.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <absl/strings/string_view.h>

#include "furrballs/v1/furrballs.pb.h"
#include "service/batch_wire.h"

namespace furrballs::service {
namespace {

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "batch_wire_fuzz: %s\n", what);
    std::abort();
  }
}

bool Inside(absl::string_view part, absl::string_view whole) {
  return part.empty() || (part.data() >= whole.data() &&
                          part.data() + part.size() <= whole.data() + whole.size());
}

void CheckOp(const OpView& mine, const v1::PipelineRequest& theirs) {
  Check(mine.id == theirs.id(), "op id differs from protobuf's");
  switch (theirs.op_case()) {
    case v1::PipelineRequest::kGet:
      Check(mine.kind == OpView::Kind::kGet, "kind: protobuf reads a Get");
      Check(mine.key == theirs.get().key(), "Get key differs");
      break;
    case v1::PipelineRequest::kSet:
      Check(mine.kind == OpView::Kind::kSet, "kind: protobuf reads a Set");
      Check(mine.key == theirs.set().key(), "Set key differs");
      Check(mine.value == theirs.set().value(), "Set value differs");
      Check(mine.ttl_ms == theirs.set().ttl_ms(), "Set TTL differs");
      Check(mine.mode == static_cast<int32_t>(theirs.set().mode()),
            "Set mode differs");
      Check(mine.expected_version == theirs.set().expected_version(),
            "Set expected version differs");
      break;
    case v1::PipelineRequest::kDelete:
      Check(mine.kind == OpView::Kind::kDelete, "kind: protobuf reads a Delete");
      Check(mine.key == theirs.delete_().key(), "Delete key differs");
      break;
    case v1::PipelineRequest::kTouch:
      Check(mine.kind == OpView::Kind::kTouch, "kind: protobuf reads a Touch");
      Check(mine.key == theirs.touch().key(), "Touch key differs");
      Check(mine.ttl_ms == theirs.touch().ttl_ms(), "Touch TTL differs");
      break;
    case v1::PipelineRequest::OP_NOT_SET:
      Check(mine.kind == OpView::Kind::kNone, "kind: protobuf reads no op");
      break;
  }
}

}  // namespace
}  // namespace furrballs::service

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace furrballs::service;
  if (size == 0) return 0;
  const size_t max_ops = data[0] == 0 ? 4096 : data[0];
  const absl::string_view bytes(reinterpret_cast<const char*>(data + 1),
                                size - 1);
  uint64_t id = 0, timeout_ms = 0;
  size_t op_count = 0;
  std::vector<OpView> ops;
  const bool mine = ParseBatchRequest(bytes, max_ops, &id, &timeout_ms, &ops,
                                      &op_count);
  for (const OpView& op : ops) {
    Check(Inside(op.key, bytes) && Inside(op.value, bytes),
          "a view points outside the message");
  }
  furrballs::v1::BatchRequest theirs;
  const bool parsed = theirs.ParseFromArray(bytes.data(),
                                            static_cast<int>(bytes.size()));
  if (!parsed) return 0;
  const size_t count = static_cast<size_t>(theirs.ops_size());
  if (count > max_ops) {
    // Refused, with nothing built. (The count it reports is protobuf's only
    // if the reader got through the whole message: one stricter than
    // protobuf's, e.g. on a known field sent with another wire type, which
    // protobuf keeps as an unknown field, may stop earlier.)
    Check(!mine && ops.empty(), "an over-large batch was not refused");
    return 0;
  }
  if (!mine) return 0;  // stricter than protobuf (e.g. wire types): allowed
  Check(id == theirs.id(), "message id differs from protobuf's");
  Check(timeout_ms == theirs.timeout_ms(), "timeout differs");
  Check(ops.size() == count, "op count differs from protobuf's");
  for (size_t i = 0; i < count; ++i) CheckOp(ops[i], theirs.ops(static_cast<int>(i)));
  return 0;
}
