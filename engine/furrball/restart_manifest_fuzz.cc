// engine/furrball/restart_manifest_fuzz.cc: libFuzzer target for
// ParseRestartManifest, the decoder of the engine's warm-restart manifest
// read back from the spill store (docs/fuzzing.md).
//
// Thread safety: single-threaded, as libFuzzer calls it.
//
// Input: one byte choosing the node count the cache has (1-8), then the
// manifest. Checks: a manifest that parses encodes back to exactly the same
// bytes (the format has one encoding per manifest), and has the node count
// it was parsed for.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "engine/furrball/restart_manifest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using furrballs::furrball_internal::EncodeRestartManifest;
  using furrballs::furrball_internal::ParseRestartManifest;
  using furrballs::furrball_internal::RestartManifest;
  if (size == 0) return 0;
  const int nodes = 1 + data[0] % 8;
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1,
                               size - 1);
  absl::StatusOr<RestartManifest> parsed = ParseRestartManifest(bytes, nodes);
  if (!parsed.ok()) return 0;
  if (parsed->nodes.size() != static_cast<size_t>(nodes) ||
      EncodeRestartManifest(*parsed) != bytes) {
    std::fprintf(stderr, "restart_manifest_fuzz: no round trip\n");
    std::abort();
  }
  return 0;
}
