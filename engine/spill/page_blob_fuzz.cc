// engine/spill/page_blob_fuzz.cc: libFuzzer target for DecodePageBlob, the
// decoder of spilled pages read back from disk (docs/fuzzing.md).
//
// Thread safety: single-threaded, as libFuzzer calls it.
//
// Input: one flag byte, then the blob. Flag bit 0 set: the blob's trailing
// checksum is recomputed before decoding, so that mutations reach the
// field checks behind it (a blob that fails its checksum is rejected before
// anything else is read). Checks: a blob that decodes has every value
// inside its data, and encoding its entries again with PageBlobBuilder
// gives a blob that decodes to the same entries and values.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include <xxhash.h>

#include "engine/spill/page_blob.h"

namespace furrballs::spill {
namespace {

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "page_blob_fuzz: %s\n", what);
    std::abort();
  }
}

void FuzzOne(std::string blob, bool fix_checksum) {
  if (fix_checksum && blob.size() >= kPageBlobTrailerBytes) {
    const size_t body = blob.size() - kPageBlobTrailerBytes;
    const uint64_t sum = XXH3_64bits(blob.data(), body);
    std::memcpy(blob.data() + body, &sum, sizeof(sum));
  }
  absl::StatusOr<PageBlobView> view = DecodePageBlob(blob);
  if (!view.ok()) return;

  PageBlobBuilder again(view->node, view->page_id, view->written_ms);
  for (const PageBlobEntry& e : view->entries) {
    Check(uint64_t{e.offset} + e.size <= view->data.size(),
          "a decoded entry's value runs past the blob's data");
    const std::string_view value = view->Value(e);
    Check(value.size() == e.size, "a decoded value has the wrong size");
    char* dst = again.Add(e.hash, e.version, e.expiry_ms, e.size);
    std::memcpy(dst, value.data(), value.size());
  }
  const std::string encoded = again.Finish();
  absl::StatusOr<PageBlobView> round = DecodePageBlob(encoded);
  Check(round.ok(), "a re-encoded blob does not decode");
  Check(round->node == view->node && round->page_id == view->page_id &&
            round->written_ms == view->written_ms &&
            round->entries.size() == view->entries.size(),
        "a re-encoded blob has another header");
  for (size_t i = 0; i < view->entries.size(); ++i) {
    const PageBlobEntry& a = view->entries[i];
    const PageBlobEntry& b = round->entries[i];
    Check(a.hash == b.hash && a.version == b.version &&
              a.expiry_ms == b.expiry_ms &&
              view->Value(a) == round->Value(b),
          "a re-encoded entry differs");
  }
}

}  // namespace
}  // namespace furrballs::spill

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  furrballs::spill::FuzzOne(
      std::string(reinterpret_cast<const char*>(data) + 1, size - 1),
      (data[0] & 1) != 0);
  return 0;
}
