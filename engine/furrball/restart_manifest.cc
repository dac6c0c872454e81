#include "engine/furrball/restart_manifest.h"

#include <absl/status/status.h>
#include <absl/strings/str_cat.h>

#include "engine/common/byte_codec.h"

namespace furrballs {
namespace furrball_internal {
namespace {

// h1, h2, page id, version, remaining TTL.
constexpr size_t kKeyBytes = 5 * sizeof(uint64_t);

}  // namespace

std::string EncodeRestartManifest(const RestartManifest& manifest) {
  std::string out;
  AppendLe<uint32_t>(out, kRestartManifestMagic);
  AppendLe<uint32_t>(out, kRestartManifestVersion);
  out.append(reinterpret_cast<const char*>(manifest.secret.data()),
             manifest.secret.size());
  AppendLe<uint64_t>(out, manifest.wall_ms);
  AppendLe<uint32_t>(out, static_cast<uint32_t>(manifest.nodes.size()));
  for (const RestartManifest::Node& node : manifest.nodes) {
    AppendLe<uint64_t>(out, node.next_version);
    AppendLe<uint64_t>(out, node.keys.size());
    for (const auto& [h, k] : node.keys) {
      AppendLe<uint64_t>(out, h.h1);
      AppendLe<uint64_t>(out, h.h2);
      AppendLe<uint64_t>(out, k.page_id);
      AppendLe<uint64_t>(out, k.version);
      AppendLe<uint64_t>(out, k.expiry_ms);
    }
  }
  return out;
}

absl::StatusOr<RestartManifest> ParseRestartManifest(std::string_view bytes,
                                                     int node_count) {
  ByteReader r(bytes);
  RestartManifest out;
  uint32_t magic = 0, version = 0, nodes = 0;
  if (!r.Read(&magic) || magic != kRestartManifestMagic) {
    return absl::DataLossError("restart manifest: bad magic");
  }
  if (!r.Read(&version)) {
    return absl::DataLossError("restart manifest: truncated header");
  }
  if (version != kRestartManifestVersion) {
    return absl::UnimplementedError(
        absl::StrCat("restart manifest format version ", version,
                     " (this build reads ", kRestartManifestVersion, ")"));
  }
  if (!r.Bytes(out.secret.data(), out.secret.size()) ||
      !r.Read(&out.wall_ms) || !r.Read(&nodes)) {
    return absl::DataLossError("restart manifest: truncated header");
  }
  if (node_count < 0 || nodes != static_cast<uint32_t>(node_count)) {
    return absl::DataLossError(absl::StrCat("restart manifest of ", nodes,
                                            " nodes, the cache has ",
                                            node_count));
  }
  out.nodes.resize(nodes);
  for (uint32_t n = 0; n < nodes; ++n) {
    RestartManifest::Node& node = out.nodes[n];
    uint64_t count = 0;
    if (!r.Read(&node.next_version) || !r.Read(&count)) {
      return absl::DataLossError(
          absl::StrCat("restart manifest: node ", n, " is truncated"));
    }
    // Checked before reserving, so that a corrupt count cannot ask for
    // more memory than the bytes could ever describe.
    if (count > r.remaining() / kKeyBytes) {
      return absl::DataLossError(
          absl::StrCat("restart manifest: node ", n, " claims ", count,
                       " keys, ", r.remaining(), " bytes are left"));
    }
    node.keys.reserve(count);
    // The check above leaves enough bytes for every read below.
    for (uint64_t i = 0; i < count; ++i) {
      HashPair h;
      SpilledKey k;
      r.Read(&h.h1);
      r.Read(&h.h2);
      r.Read(&k.page_id);
      r.Read(&k.version);
      r.Read(&k.expiry_ms);
      node.keys.emplace_back(h, k);
    }
  }
  if (!r.done()) {
    return absl::DataLossError(absl::StrCat("restart manifest: ",
                                            r.remaining(),
                                            " bytes after the last node"));
  }
  return out;
}

}  // namespace furrball_internal
}  // namespace furrballs
