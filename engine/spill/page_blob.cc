#include "engine/spill/page_blob.h"

#include <cstring>

#include <absl/base/config.h>
#include <absl/status/status.h>
#include <absl/strings/str_cat.h>
#include <xxhash.h>

namespace furrballs {
namespace spill {
namespace {

static_assert(ABSL_IS_LITTLE_ENDIAN,
              "the blob is little-endian and encoded by plain copies");

template <typename T>
void Put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof(v));
}

template <typename T>
T Get(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

}  // namespace

char* PageBlobBuilder::Add(const HashPair& hash, uint64_t version,
                           uint64_t expiry_ms, uint32_t size) {
  PageBlobEntry e;
  e.hash = hash;
  e.version = version;
  e.expiry_ms = expiry_ms;
  e.offset = static_cast<uint32_t>(data_.size());
  e.size = size;
  entries_.push_back(e);
  data_.resize(data_.size() + size);
  return data_.data() + e.offset;
}

std::string PageBlobBuilder::Finish() const {
  std::string out;
  out.reserve(kPageBlobHeaderBytes + entries_.size() * kPageBlobEntryBytes +
              data_.size() + kPageBlobTrailerBytes);
  Put<uint32_t>(out, kPageBlobMagic);
  Put<uint16_t>(out, kPageBlobVersion);
  Put<uint16_t>(out, static_cast<uint16_t>(kPageBlobHeaderBytes));
  Put<uint32_t>(out, node_);
  Put<uint32_t>(out, static_cast<uint32_t>(entries_.size()));
  Put<uint64_t>(out, page_id_);
  Put<uint64_t>(out, data_.size());
  Put<uint64_t>(out, written_ms_);
  Put<uint64_t>(out, 0);
  for (const PageBlobEntry& e : entries_) {
    Put<uint64_t>(out, e.hash.h1);
    Put<uint64_t>(out, e.hash.h2);
    Put<uint64_t>(out, e.version);
    Put<uint64_t>(out, e.expiry_ms);
    Put<uint32_t>(out, e.offset);
    Put<uint32_t>(out, e.size);
  }
  out.append(data_);
  Put<uint64_t>(out, XXH3_64bits(out.data(), out.size()));
  return out;
}

absl::StatusOr<PageBlobView> DecodePageBlob(std::string_view bytes) {
  if (bytes.size() < kPageBlobHeaderBytes + kPageBlobTrailerBytes) {
    return absl::DataLossError(
        absl::StrCat("page blob of ", bytes.size(), " bytes is truncated"));
  }
  const char* p = bytes.data();
  if (Get<uint32_t>(p) != kPageBlobMagic) {
    return absl::DataLossError("not a page blob (bad magic)");
  }
  const size_t body = bytes.size() - kPageBlobTrailerBytes;
  if (Get<uint64_t>(p + body) != XXH3_64bits(p, body)) {
    return absl::DataLossError("page blob checksum mismatch");
  }
  const uint16_t version = Get<uint16_t>(p + 4);
  if (version != kPageBlobVersion) {
    return absl::UnimplementedError(
        absl::StrCat("page blob format version ", version,
                     " (this build reads ", kPageBlobVersion, ")"));
  }
  const uint16_t header_bytes = Get<uint16_t>(p + 6);
  if (header_bytes != kPageBlobHeaderBytes) {
    return absl::DataLossError(
        absl::StrCat("page blob header of ", header_bytes, " bytes"));
  }
  PageBlobView view;
  view.node = Get<uint32_t>(p + 8);
  const uint32_t count = Get<uint32_t>(p + 12);
  view.page_id = Get<uint64_t>(p + 16);
  const uint64_t data_bytes = Get<uint64_t>(p + 24);
  view.written_ms = Get<uint64_t>(p + 32);
  // Compared without a sum that could wrap: a data size near 2^64 must not
  // make header + entries + data + trailer come out as the blob's size.
  // The first term is below 2^39 (count is 32-bit), so it cannot overflow.
  const uint64_t framing = kPageBlobHeaderBytes +
                           uint64_t{count} * kPageBlobEntryBytes +
                           kPageBlobTrailerBytes;
  if (framing > bytes.size() || bytes.size() - framing != data_bytes) {
    return absl::DataLossError(
        absl::StrCat("page blob sizes disagree: ", count, " entries and ",
                     data_bytes, " data bytes in a blob of ", bytes.size(),
                     " bytes"));
  }
  const char* e = p + kPageBlobHeaderBytes;
  view.data = bytes.substr(kPageBlobHeaderBytes +
                               size_t{count} * kPageBlobEntryBytes,
                           data_bytes);
  view.entries.resize(count);
  for (uint32_t i = 0; i < count; ++i, e += kPageBlobEntryBytes) {
    PageBlobEntry& entry = view.entries[i];
    entry.hash.h1 = Get<uint64_t>(e);
    entry.hash.h2 = Get<uint64_t>(e + 8);
    entry.version = Get<uint64_t>(e + 16);
    entry.expiry_ms = Get<uint64_t>(e + 24);
    entry.offset = Get<uint32_t>(e + 32);
    entry.size = Get<uint32_t>(e + 36);
    if (uint64_t{entry.offset} + entry.size > data_bytes) {
      return absl::DataLossError(
          absl::StrCat("page blob entry ", i, " runs past the data"));
    }
  }
  return view;
}

}  // namespace spill
}  // namespace furrballs
