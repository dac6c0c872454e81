// engine/spill/spill_manifest.h: the spill store's manifest, written by a
// graceful SpillStore::Close and read back by the next Open (see
// spill_store.h): the next page id, every stored page with its size per
// node, and the engine's own manifest bytes, under one checksum.
//
// Thread safety: SpillManifest is a plain value; the functions are pure.
//
// Encoding (little-endian, version 1):
//
//   u32 magic "FSLM", u32 version 1
//   u64 checksum: XXH3-64 of everything after it
//   u32 node count, u64 next page id, then per node:
//     u64 page count, then per page (ascending ids): u64 page id, u64 bytes
//   the engine's manifest, to the end (engine/furrball/restart_manifest.h)
#ifndef FURRBALLS_ENGINE_SPILL_SPILL_MANIFEST_H_
#define FURRBALLS_ENGINE_SPILL_SPILL_MANIFEST_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <absl/status/statusor.h>

namespace furrballs {
namespace spill {

inline constexpr uint32_t kSpillManifestMagic = 0x4d4c5346;  // "FSLM"
inline constexpr uint32_t kSpillManifestVersion = 1;

// Per node: page id -> blob bytes.
using NodePages = std::map<uint64_t, uint64_t>;

struct SpillManifest {
  uint64_t next_page_id = 0;
  std::vector<NodePages> pages;  // by node index
  std::string engine;            // the engine's manifest, opaque here
};

std::string EncodeSpillManifest(uint64_t next_page_id,
                                const std::vector<NodePages>& pages,
                                std::string_view engine);

// Verifies the checksum and decodes a manifest written for `node_count`
// nodes. DataLoss naming what is wrong (checksum, truncation, another node
// count, a page listed twice, out of order or not below the next page id);
// Unimplemented for another
// format version. A store that cannot read its manifest starts cold.
absl::StatusOr<SpillManifest> DecodeSpillManifest(std::string_view bytes,
                                                  int node_count);

}  // namespace spill
}  // namespace furrballs

#endif  // FURRBALLS_ENGINE_SPILL_SPILL_MANIFEST_H_
