// engine/spill/page_blob.h: PageBlob, the on-disk image of one spilled page
// (report §2.9.5): the node it came from, every live key's identity,
// version, expiry and value, and a checksum over all of it.
//
// Thread safety: PageBlobBuilder is thread-compatible; DecodePageBlob is a
// pure function; PageBlobView points into the caller's bytes.
//
// Encoding (little-endian, version 2):
//
//   header, kPageBlobHeaderBytes = 48
//     u32 magic  "FBPB"          a blob, not some other value
//     u16 format version (2)     readers refuse versions they do not know
//     u16 header bytes (48)      lets a later version grow the header
//     u32 node index             the node whose page this was
//     u32 entry count
//     u64 page id                the spill id the blob is stored under
//     u64 data bytes
//     u64 written_ms             the spiller's clock, informational
//     u64 reserved (0)
//   entries, kPageBlobEntryBytes = 40 each
//     u64 h1, u64 h2             the key's identity (HashPair)
//     u64 version, u64 expiry_ms (0 = never)
//     u32 offset, u32 size       the value's bytes within data
//   data                         the values, back to back
//   u64 checksum                 XXH3-64 of everything before it
//
// Only live entries are written (not the page's dead bytes or entry
// headers): a blob is as small as the values it carries. Decoding checks the
// checksum before anything else, then that every count and range fits, so a
// torn, truncated or bit-flipped blob is rejected whole (DataLoss), never
// partly served; a blob that is not ours or of an unknown version is
// rejected too.
#ifndef FURRBALLS_ENGINE_SPILL_PAGE_BLOB_H_
#define FURRBALLS_ENGINE_SPILL_PAGE_BLOB_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <absl/status/statusor.h>

#include "engine/common/hash_pair.h"

namespace furrballs {
namespace spill {

inline constexpr uint32_t kPageBlobMagic = 0x42504246;  // "FBPB"
// Version 2: each entry's bytes are the engine's payload (its key, then its
// value: engine/furrball/entry.h), where version 1 held the value alone;
// blobs of version 1 are refused, so such keys miss after an upgrade.
inline constexpr uint16_t kPageBlobVersion = 2;
inline constexpr size_t kPageBlobHeaderBytes = 48;
inline constexpr size_t kPageBlobEntryBytes = 40;
inline constexpr size_t kPageBlobTrailerBytes = 8;

struct PageBlobEntry {
  HashPair hash;
  uint64_t version = 0;
  uint64_t expiry_ms = 0;
  uint32_t offset = 0;  // within the blob's data
  uint32_t size = 0;
};

// Accumulates entries and values; Finish() encodes the blob.
class PageBlobBuilder {
 public:
  PageBlobBuilder(uint32_t node, uint64_t page_id, uint64_t written_ms)
      : node_(node), page_id_(page_id), written_ms_(written_ms) {}

  // Appends an entry whose value is `size` bytes; returns where to write
  // them (valid until the next call).
  char* Add(const HashPair& hash, uint64_t version, uint64_t expiry_ms,
            uint32_t size);
  size_t entry_count() const { return entries_.size(); }
  size_t data_bytes() const { return data_.size(); }

  std::string Finish() const;

 private:
  uint32_t node_;
  uint64_t page_id_;
  uint64_t written_ms_;
  std::vector<PageBlobEntry> entries_;
  std::string data_;
};

// A decoded blob; `data` points into the bytes given to DecodePageBlob.
struct PageBlobView {
  uint32_t node = 0;
  uint64_t page_id = 0;
  uint64_t written_ms = 0;
  std::vector<PageBlobEntry> entries;
  std::string_view data;

  std::string_view Value(const PageBlobEntry& e) const {
    return data.substr(e.offset, e.size);
  }
};

// Verifies and decodes. DataLoss for a blob that fails its checksum or whose
// fields do not fit; Unimplemented for a format version this build does not
// know.
absl::StatusOr<PageBlobView> DecodePageBlob(std::string_view bytes);

}  // namespace spill
}  // namespace furrballs

#endif  // FURRBALLS_ENGINE_SPILL_PAGE_BLOB_H_
