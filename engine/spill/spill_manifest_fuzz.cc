// engine/spill/spill_manifest_fuzz.cc: libFuzzer target for
// DecodeSpillManifest, the decoder of the spill store's manifest read back
// at a warm restart (docs/fuzzing.md).
//
// Thread safety: single-threaded, as libFuzzer calls it.
//
// Input: one flag byte, then the manifest. Bit 0 set: the checksum is
// recomputed before decoding, so that mutations reach the page lists behind
// it. Bits 1-3: the store's node count - 1. Checks: a manifest that decodes
// encodes back to exactly the same bytes, has the node count it was decoded
// for, and lists only ids below the next page id.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <xxhash.h>

#include "engine/spill/spill_manifest.h"

namespace {

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "spill_manifest_fuzz: %s\n", what);
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using furrballs::spill::DecodeSpillManifest;
  using furrballs::spill::EncodeSpillManifest;
  using furrballs::spill::NodePages;
  using furrballs::spill::SpillManifest;
  if (size == 0) return 0;
  const bool fix_checksum = (data[0] & 1) != 0;
  const int nodes = 1 + ((data[0] >> 1) & 7);
  std::string bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  constexpr size_t kSumAt = 8, kBodyAt = 16;  // after magic and version
  if (fix_checksum && bytes.size() >= kBodyAt) {
    const uint64_t sum =
        XXH3_64bits(bytes.data() + kBodyAt, bytes.size() - kBodyAt);
    std::memcpy(bytes.data() + kSumAt, &sum, sizeof(sum));
  }
  absl::StatusOr<SpillManifest> m = DecodeSpillManifest(bytes, nodes);
  if (!m.ok()) return 0;
  Check(m->pages.size() == static_cast<size_t>(nodes), "wrong node count");
  for (const NodePages& pages : m->pages) {
    Check(pages.empty() || pages.rbegin()->first < m->next_page_id,
          "a page id at or above the next page id");
  }
  Check(EncodeSpillManifest(m->next_page_id, m->pages, m->engine) == bytes,
        "no round trip");
  return 0;
}
