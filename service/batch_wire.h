// service/batch_wire.h: the wire format of the Batch stream's messages
// (furrballs.v1.BatchRequest and BatchResponse), read and written directly.
//
// Thread safety: pure functions over caller-owned buffers.
//
// Why not the generated classes. Parsing a BatchRequest with protobuf
// allocates every op's sub-message and every key and value longer than the
// short-string buffer (an arena only moves the string objects, not their
// characters), and building a BatchResponse allocates the same again: two or
// more heap allocations per op, which is most of what a batched op would
// cost. Here a request is read into views of its own bytes and an answer is
// written into a caller-kept buffer whose capacity survives from batch to
// batch, so a batch of N ops allocates nothing per op. The encoding is the
// one protoc defines for the messages in proto/furrballs/v1/furrballs.proto
// (batch_wire_test.cc checks it against the generated classes both ways):
// unknown fields are skipped, a scalar read twice keeps the last value, and
// the last member of a oneof wins.
#ifndef FURRBALLS_SERVICE_BATCH_WIRE_H_
#define FURRBALLS_SERVICE_BATCH_WIRE_H_

#include <cstdint>
#include <string>
#include <vector>

#include <absl/strings/string_view.h>

namespace furrballs::service {

// One PipelineRequest of a BatchRequest, as views into the request's bytes.
struct OpView {
  enum class Kind : uint8_t { kNone, kGet, kSet, kDelete, kTouch };

  uint64_t id = 0;
  Kind kind = Kind::kNone;  // kNone: no operation set
  absl::string_view key;
  absl::string_view value;    // kSet
  uint64_t ttl_ms = 0;        // kSet, kTouch
  int32_t mode = 0;           // kSet: a v1::SetMode value, unchecked
  uint64_t expected_version = 0;  // kSet
};

// Parses a BatchRequest. `ops` is cleared and refilled (its capacity kept);
// its views point into `bytes`. Returns false if `bytes` is not a valid
// encoding, or if it holds more than `max_ops` ops (then *op_count is how
// many it holds, *id is read and `ops` is empty), so that an over-large
// batch is refused before anything is built for it.
// *timeout_ms is the request's timeout_ms (0 when absent).
bool ParseBatchRequest(absl::string_view bytes, size_t max_ops, uint64_t* id,
                       uint64_t* timeout_ms, std::vector<OpView>* ops,
                       size_t* op_count);

// The answer to one op, as the encoder reads it.
struct OpAnswer {
  enum class Kind : uint8_t { kGet, kSet, kDelete, kTouch };

  uint64_t id = 0;
  int32_t code = 0;
  absl::string_view message;  // when code != 0; the result is then absent
  Kind kind = Kind::kGet;
  // kGet
  bool found = false;
  absl::string_view value;
  uint64_t version = 0;  // kGet, kSet
  uint64_t ttl_remaining_ms = 0;
  // kDelete
  bool deleted = false;
};

// Appends the encoding of a BatchResponse to `out` in three steps, so that
// the answers need not be collected first: Begin (id and whole-request
// code), then Answer per op in order, each a length-delimited result.
void BeginBatchResponse(uint64_t id, int32_t code, absl::string_view message,
                        std::string* out);
void AppendOpAnswer(const OpAnswer& answer, std::string* out);

}  // namespace furrballs::service

#endif  // FURRBALLS_SERVICE_BATCH_WIRE_H_
