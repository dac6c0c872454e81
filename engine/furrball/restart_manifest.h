// engine/furrball/restart_manifest.h: the engine's part of the warm-restart
// manifest (docs/spill.md): the hash secret, the wall-clock time of the
// graceful shutdown, and per node the next version and the index of the keys
// whose only copy is in the spill store.
//
// Thread safety: RestartManifest is a plain value; the functions are pure.
//
// Encoding (little-endian, version 1):
//
//   u32 magic "FBEM", u32 version 1
//   the 192-byte hash secret
//   u64 wall-clock ms at shutdown
//   u32 node count, then per node:
//     u64 next version, u64 key count, then per key:
//       u64 h1, u64 h2, u64 page id, u64 version,
//       u64 remaining TTL in ms (0 = never expires)
//
// The spill store wraps these bytes with its own page list and a checksum
// over the whole (engine/spill/spill_manifest.h), so a torn write is caught
// there; ParseRestartManifest still checks every count against the bytes it
// has, because a checksum is no proof that the writer was this build.
#ifndef FURRBALLS_ENGINE_FURRBALL_RESTART_MANIFEST_H_
#define FURRBALLS_ENGINE_FURRBALL_RESTART_MANIFEST_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <absl/status/statusor.h>

#include "engine/common/hash_pair.h"
#include "engine/furrball/spill_index.h"

namespace furrballs {
namespace furrball_internal {

inline constexpr uint32_t kRestartManifestMagic = 0x4d454246;  // "FBEM"
inline constexpr uint32_t kRestartManifestVersion = 1;

struct RestartManifest {
  struct Node {
    uint64_t next_version = 0;
    // SpilledKey::expiry_ms holds the TTL that was left at shutdown (0 =
    // never expires), not a point in time: the clock of the next run has
    // another origin.
    std::vector<std::pair<HashPair, SpilledKey>> keys;
  };

  HashSecret secret{};
  uint64_t wall_ms = 0;
  std::vector<Node> nodes;
};

std::string EncodeRestartManifest(const RestartManifest& manifest);

// Decodes `bytes` written for `node_count` nodes. DataLoss naming what does
// not fit (truncated, trailing bytes, another node count, a bad magic);
// Unimplemented for another format version. The caller starts cold on any
// error.
absl::StatusOr<RestartManifest> ParseRestartManifest(std::string_view bytes,
                                                     int node_count);

}  // namespace furrball_internal
}  // namespace furrballs

#endif  // FURRBALLS_ENGINE_FURRBALL_RESTART_MANIFEST_H_
