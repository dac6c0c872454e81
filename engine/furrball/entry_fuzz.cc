// engine/furrball/entry_fuzz.cc: libFuzzer target for the entry format
// (entry.h) where it meets bytes Furrballs did not write in that form: the
// portable form of an entry read back from a page blob (SplitPortable, then
// written into a page at a reload), and a header word a reader with a stale
// KeyMeta finds in a recycled page (ReadEntryHeaderWithin, then the key
// compare and value copy it allows). docs/fuzzing.md.
//
// Thread safety: single-threaded, as libFuzzer calls it.
//
// Input: one byte choosing an 8-byte-aligned offset into a 256-byte page,
// then bytes that are both the portable form and the page's contents
// (repeated to fill it). Checks: a portable form that splits is written as
// an entry whose header, key and kind read back, and whose portable form is
// the input byte for byte; whatever header the page holds at the offset,
// the reads it passes stay inside the page (an exactly sized heap buffer,
// so AddressSanitizer sees any byte past it) and agree with the header.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

#include "engine/furrball/entry.h"

namespace {

using namespace furrballs::furrball_internal;  // NOLINT: a fuzz target

void Fail(const char* what) {
  std::fprintf(stderr, "entry_fuzz: %s\n", what);
  std::abort();
}

// Heap memory of exactly `n` bytes, 8-aligned (new[] of uint64_t).
struct Words {
  explicit Words(size_t n) : words(new uint64_t[(n + 7) / 8]()), bytes(n) {}
  uint8_t* data() { return reinterpret_cast<uint8_t*>(words.get()); }
  std::unique_ptr<uint64_t[]> words;
  size_t bytes;
};

void PortableRoundTrip(std::string_view portable) {
  std::string_view key, value;
  EntryKind kind;
  if (!SplitPortable(portable, &key, &value, &kind)) return;
  const uint64_t size = PayloadSize(key.size(), value.size());
  const uint64_t capacity = EntryFootprint(size);
  Words entry(capacity);
  WriteKeyedEntry(entry.data(), key, value, static_cast<uint32_t>(capacity),
                  kind);
  EntryHeader h;
  if (!ReadEntryHeaderWithin(entry.data(), 0,
                             static_cast<uint32_t>(capacity), &h)) {
    Fail("a written entry's header is refused");
  }
  if (h.size != size || h.capacity != capacity || h.key_size != key.size() ||
      h.kind != kind) {
    Fail("a written entry's header reads back different");
  }
  if (!PayloadKeyEquals(entry.data(), h, key, kind)) {
    Fail("a written entry's key does not compare equal");
  }
  std::string back(PortableSize(h), '\0');
  CopyPortable(entry.data(), h, back.data());
  if (back != portable) Fail("the portable form does not round-trip");
}

void StaleHeader(uint32_t offset, std::string_view bytes) {
  constexpr uint32_t kPage = 256;
  Words page(kPage);
  for (uint32_t i = 0; i < kPage && !bytes.empty(); ++i) {
    page.data()[i] = static_cast<uint8_t>(bytes[i % bytes.size()]);
  }
  uint8_t* entry = page.data() + offset;
  EntryHeader h;
  if (!ReadEntryHeaderWithin(entry, offset, kPage, &h)) return;
  if (offset + h.capacity > kPage || h.key_size > h.size ||
      kEntryHeaderBytes + h.size > h.capacity) {
    Fail("a header that is accepted does not fit its page");
  }
  // What a Get would do with it: compare a key of the stored size (the
  // stored one, so that the compare reads all of it), copy the value.
  std::string key;
  if (PayloadKey(entry, h, &key) != (h.key_size > 0)) {
    Fail("PayloadKey disagrees with the key size");
  }
  const EntryKind wanted =
      h.kind == EntryKind::kChunk ? EntryKind::kChunk : EntryKind::kValue;
  if (h.key_size > 0 && !PayloadKeyEquals(entry, h, key, wanted)) {
    Fail("the stored key does not compare equal to itself");
  }
  std::string value(h.value_size(), '\0');
  CopyPayloadRange(entry, h.key_size, value.size(), value.data());
  std::string portable(PortableSize(h), '\0');
  CopyPortable(entry, h, portable.data());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint32_t offset = (data[0] % 32) * 8;
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1,
                               size - 1);
  PortableRoundTrip(bytes);
  StaleHeader(offset, bytes);
  return 0;
}
