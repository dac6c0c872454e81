// service/set_wire.h: a MultiSetRequest read where gRPC received it, its
// items as positions in the message's slices instead of copies.
//
// Thread safety: SlicedBytes is immutable after construction (any thread may
// read it); the parse functions are pure over caller-owned objects.
//
// Why. Protobuf 3.21's generated parser copies every `bytes` field, so a
// MultiSet of 4 x 1 MiB values was held twice while it was parsed: the 4 MiB
// gRPC received and 4 MiB of parsed values (docs/memory_bench.md, "Requests
// in flight are bounded"). Here the message is read in place and each item's
// key and value stay where they are until the item runs. gRPC hands a
// received message over in slices of its TCP reads (8 KiB at first, then
// 64 KiB in gRPC 1.51), so a key or value that lies inside one slice is used
// as a view of it, and one that spans slices is copied (SlicedBytes::View)
// only when its item runs, into a buffer freed when the item is done: a
// MultiSet then holds what gRPC received plus one value per item running,
// not every value twice. That is the default direct dispatch; with
// --dispatch=nodejob the gRPC thread decodes every item before the workers
// run them, so all of a message's spanning values can be copied at once
// (as many bytes as the message, still no more than protobuf's copy).
//
// The encoding is protoc's for MultiSetRequest and SetRequest in
// proto/furrballs/v1/furrballs.proto, read as protobuf reads it (set_wire_test
// and set_wire_fuzz check it against the generated parser): unknown fields
// are skipped, so is a known field sent with another wire type (protobuf
// keeps it as an unknown field), a scalar or bytes field read twice keeps the
// last value; tags and lengths are at most 5 bytes and lengths below 2^31,
// as protobuf's parser requires. Stricter than protobuf in two ways: groups
// (wire types 3 and 4, deprecated since proto2) are refused, and so is a
// 5-byte tag of 2^32 or more (protobuf keeps its low 32 bits).
#ifndef FURRBALLS_SERVICE_SET_WIRE_H_
#define FURRBALLS_SERVICE_SET_WIRE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <absl/status/status.h>
#include <absl/strings/string_view.h>

namespace furrballs::service {

// One message's bytes as the concatenation of `chunks` (views the caller
// keeps alive, e.g. the slices of a grpc::ByteBuffer).
class SlicedBytes {
 public:
  SlicedBytes() = default;
  explicit SlicedBytes(std::vector<absl::string_view> chunks);

  size_t size() const { return size_; }
  const std::vector<absl::string_view>& chunks() const { return chunks_; }

  // The bytes [offset, offset + length), which must lie inside the message:
  // a view into a chunk when they lie in one, else they are copied into
  // *copy (replacing its contents) and the view is of *copy.
  absl::string_view View(size_t offset, size_t length, std::string* copy) const;

 private:
  std::vector<absl::string_view> chunks_;
  std::vector<size_t> starts_;  // offset of each chunk in the message
  size_t size_ = 0;
};

// A length-delimited field's bytes: where they start in the message and how
// many there are.
struct WireSpan {
  size_t offset = 0;
  size_t length = 0;
};

// One SetRequest of a MultiSetRequest, its key and value as positions in
// the message (SlicedBytes::View reads them).
struct SetItemSpans {
  WireSpan key;
  WireSpan value;
  uint64_t ttl_ms = 0;
  int32_t mode = 0;  // a v1::SetMode value, unchecked
  uint64_t expected_version = 0;
};

// Counts the items of a MultiSetRequest without reading into them, so that
// an over-large request is refused before anything is built for it.
// INVALID_ARGUMENT, saying what was wrong and at which byte, if the message's
// top level is not a valid encoding.
absl::Status CountMultiSetItems(const SlicedBytes& bytes, size_t* count);

// Parses a MultiSetRequest. `items` is cleared and refilled (its capacity
// kept). INVALID_ARGUMENT, naming the item, the field and the byte, if
// `bytes` is not a valid encoding.
absl::Status ParseMultiSetRequest(const SlicedBytes& bytes,
                                  std::vector<SetItemSpans>* items);

}  // namespace furrballs::service

#endif  // FURRBALLS_SERVICE_SET_WIRE_H_
