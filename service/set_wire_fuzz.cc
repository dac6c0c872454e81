// service/set_wire_fuzz.cc: libFuzzer target for ParseMultiSetRequest and
// CountMultiSetItems, the service's own reader of MultiSet requests from the
// network (set_wire.h; docs/fuzzing.md).
//
// Thread safety: single-threaded, as libFuzzer calls it.
//
// Input: one byte that says how the message is cut into chunks (its low four
// bits + 1 is the chunk length; bit 4 puts an empty chunk between every two),
// then the message bytes. Checks: no crash or sanitizer report; the chunked
// message reads exactly as the same bytes in one chunk (same items, or the
// same error); the count agrees with the parse; every span lies inside the
// message and SlicedBytes::View returns its bytes; whatever this reader
// accepts, protobuf's generated parser accepts too, and reads the same
// items (key, value, TTL, mode, expected version); whatever it refuses that
// protobuf accepts is a group or a tag of 2^32 or more (set_wire.h).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <absl/strings/string_view.h>

#include "furrballs/v1/furrballs.pb.h"
#include "service/set_wire.h"

namespace furrballs::service {
namespace {

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "set_wire_fuzz: %s\n", what);
    std::abort();
  }
}

absl::string_view Read(const SlicedBytes& bytes, absl::string_view whole,
                       WireSpan span, std::string* copy) {
  Check(span.offset <= whole.size() && span.length <= whole.size() - span.offset,
        "a span points outside the message");
  const absl::string_view v = bytes.View(span.offset, span.length, copy);
  Check(v == whole.substr(span.offset, span.length),
        "View returns other bytes than the span's");
  return v;
}

}  // namespace
}  // namespace furrballs::service

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace furrballs::service;
  if (size == 0) return 0;
  const size_t chunk = (data[0] & 15) + 1;
  const bool empty_between = (data[0] & 16) != 0;
  const absl::string_view whole(reinterpret_cast<const char*>(data + 1),
                                size - 1);
  std::vector<absl::string_view> chunks;
  for (size_t at = 0; at < whole.size(); at += chunk) {
    if (empty_between && !chunks.empty()) chunks.push_back(absl::string_view());
    chunks.push_back(whole.substr(at, chunk));
  }
  const SlicedBytes sliced(chunks);
  const SlicedBytes flat({whole});

  std::vector<SetItemSpans> items, flat_items;
  const absl::Status mine = ParseMultiSetRequest(sliced, &items);
  const absl::Status flat_status = ParseMultiSetRequest(flat, &flat_items);
  Check(mine == flat_status, "chunked and whole messages read differently");
  size_t count = 0;
  const absl::Status counted = CountMultiSetItems(sliced, &count);
  if (!mine.ok()) {
    // What this reader refuses and protobuf accepts must be what set_wire.h
    // says it is stricter about: a group, or a 5-byte tag of 2^32 or more.
    furrballs::v1::MultiSetRequest theirs;
    if (theirs.ParseFromArray(whole.data(), static_cast<int>(whole.size()))) {
      const absl::string_view why = mine.message();
      Check(why.find("is a group") != absl::string_view::npos ||
                why.find("has field number") != absl::string_view::npos,
            "refused a message protobuf accepts");
    }
    return 0;
  }
  Check(counted.ok() && count == items.size(),
        "the count disagrees with the parse");
  Check(items.size() == flat_items.size(), "item counts differ");

  furrballs::v1::MultiSetRequest theirs;
  Check(theirs.ParseFromArray(whole.data(), static_cast<int>(whole.size())),
        "accepted a message protobuf refuses");
  Check(static_cast<size_t>(theirs.items_size()) == items.size(),
        "item count differs from protobuf's");
  for (size_t i = 0; i < items.size(); ++i) {
    const SetItemSpans& a = items[i];
    const furrballs::v1::SetRequest& b = theirs.items(static_cast<int>(i));
    std::string key_copy, value_copy;
    Check(Read(sliced, whole, a.key, &key_copy) == b.key(), "key differs");
    Check(Read(sliced, whole, a.value, &value_copy) == b.value(),
          "value differs");
    Check(a.ttl_ms == b.ttl_ms(), "TTL differs");
    Check(a.mode == static_cast<int32_t>(b.mode()), "mode differs");
    Check(a.expected_version == b.expected_version(),
          "expected version differs");
  }
  return 0;
}
