#include "engine/spill/spill_manifest.h"

#include <absl/status/status.h>
#include <absl/strings/str_cat.h>
#include <xxhash.h>

#include "engine/common/byte_codec.h"

namespace furrballs {
namespace spill {
namespace {

constexpr size_t kPageBytes = 2 * sizeof(uint64_t);  // id, size

}  // namespace

std::string EncodeSpillManifest(uint64_t next_page_id,
                                const std::vector<NodePages>& pages,
                                std::string_view engine) {
  std::string body;
  AppendLe<uint32_t>(body, static_cast<uint32_t>(pages.size()));
  AppendLe<uint64_t>(body, next_page_id);
  for (const NodePages& node_pages : pages) {
    AppendLe<uint64_t>(body, node_pages.size());
    for (const auto& [id, size] : node_pages) {
      AppendLe<uint64_t>(body, id);
      AppendLe<uint64_t>(body, size);
    }
  }
  body.append(engine);
  std::string out;
  AppendLe<uint32_t>(out, kSpillManifestMagic);
  AppendLe<uint32_t>(out, kSpillManifestVersion);
  AppendLe<uint64_t>(out, XXH3_64bits(body.data(), body.size()));
  out.append(body);
  return out;
}

absl::StatusOr<SpillManifest> DecodeSpillManifest(std::string_view bytes,
                                                  int node_count) {
  ByteReader r(bytes);
  uint32_t magic = 0, version = 0, nodes = 0;
  uint64_t sum = 0;
  if (!r.Read(&magic) || magic != kSpillManifestMagic) {
    return absl::DataLossError("spill manifest: bad magic");
  }
  if (!r.Read(&version)) {
    return absl::DataLossError("spill manifest: truncated header");
  }
  if (version != kSpillManifestVersion) {
    return absl::UnimplementedError(
        absl::StrCat("spill manifest format version ", version,
                     " (this build reads ", kSpillManifestVersion, ")"));
  }
  if (!r.Read(&sum)) {
    return absl::DataLossError("spill manifest: truncated header");
  }
  const std::string_view body = r.rest();
  if (sum != XXH3_64bits(body.data(), body.size())) {
    return absl::DataLossError("spill manifest: checksum mismatch");
  }
  SpillManifest out;
  if (!r.Read(&nodes) || !r.Read(&out.next_page_id)) {
    return absl::DataLossError("spill manifest: truncated header");
  }
  if (node_count < 0 || nodes != static_cast<uint32_t>(node_count)) {
    return absl::DataLossError(absl::StrCat("spill manifest of ", nodes,
                                            " nodes, the store has ",
                                            node_count));
  }
  out.pages.resize(nodes);
  for (uint32_t n = 0; n < nodes; ++n) {
    uint64_t count = 0;
    if (!r.Read(&count) || count > r.remaining() / kPageBytes) {
      return absl::DataLossError(
          absl::StrCat("spill manifest: the page list of node ", n,
                       " is truncated"));
    }
    // The check above leaves enough bytes for every read below.
    for (uint64_t i = 0; i < count; ++i) {
      uint64_t id = 0, size = 0;
      r.Read(&id);
      r.Read(&size);
      // Close writes each node's pages from a map, in ascending order; so
      // an id out of order (or twice) means the list is not what was
      // written, and its byte count cannot be trusted either.
      if (!out.pages[n].empty() && id <= out.pages[n].rbegin()->first) {
        return absl::DataLossError(
            absl::StrCat("spill manifest: page ", id, " of node ", n,
                         " is out of order"));
      }
      // Ids are handed out from next_page_id up: a listed id at or above
      // it would be handed out again and overwrite that page.
      if (id >= out.next_page_id) {
        return absl::DataLossError(
            absl::StrCat("spill manifest: page ", id, " of node ", n,
                         " is not below the next page id ",
                         out.next_page_id));
      }
      out.pages[n].emplace_hint(out.pages[n].end(), id, size);
    }
  }
  out.engine = std::string(r.rest());
  return out;
}

}  // namespace spill
}  // namespace furrballs
