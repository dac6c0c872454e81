// The entry format of value pages (entry.h): the header word's fields, the
// key and value around them, the copies relocation and the spill tier make,
// and the portable form that PageBlobs hold.
#include "engine/furrball/entry.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

#include <gtest/gtest.h>

#include "engine/furrball/page_pool.h"

namespace furrballs {
namespace furrball_internal {
namespace {

// A value of `n` bytes that differs at every position from its neighbours'.
std::string Pattern(size_t n, char salt) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(salt + i * 7 + i / 251);
  return s;
}

// Page memory of `bytes`, 8-aligned and zeroed.
struct PageBytes {
  explicit PageBytes(size_t n)
      : bytes(n), data(static_cast<uint8_t*>(std::aligned_alloc(4096, n))) {
    std::memset(data, 0, n);
  }
  ~PageBytes() { std::free(data); }
  size_t bytes;
  uint8_t* data;
};

TEST(EntryTest, FootprintIsHeaderPlusPayloadRoundedToWords) {
  EXPECT_EQ(EntryFootprint(0), 8u);
  EXPECT_EQ(EntryFootprint(1), 16u);
  EXPECT_EQ(EntryFootprint(8), 16u);
  EXPECT_EQ(EntryFootprint(9), 24u);
}

// The fill test's entry (issue 13): a 24-byte key and a 64-byte value take
// the header word, then key and value, 88 bytes, a whole number of words.
// With the key's size in front of the key (until 2026-11-25) it was 104
// bytes, and 120 with the hash in the header.
TEST(EntryTest, AFillTestEntryIs96Bytes) {
  EXPECT_EQ(EntryFootprint(PayloadSize(24, 64)), 96u);
  alignas(8) uint8_t page[128] = {};
  const std::string key = Pattern(24, 'k'), value = Pattern(64, 'v');
  WriteKeyedEntry(page, key, value,
                  static_cast<uint32_t>(EntryFootprint(PayloadSize(24, 64))));
  const EntryHeader h = ReadEntryHeader(page);
  EXPECT_EQ(h.capacity, 96u);
  EXPECT_EQ(h.size, 88u);
  EXPECT_EQ(h.key_size, 24u);
  EXPECT_TRUE(PayloadKeyEquals(page, h, key));
  // Nothing past the entry was written.
  for (size_t i = 96; i < sizeof(page); ++i) ASSERT_EQ(page[i], 0) << i;
}

// Every field holds its largest value without touching its neighbours.
TEST(EntryTest, HeaderFieldsHoldTheirLargestValuesAlone) {
  const EntryHeader widest{.size = kMaxEntryPayloadBytes,
                           .capacity = kMaxEntryCapacity,
                           .key_size = kMaxPayloadKeyBytes,
                           .kind = EntryKind::kChunk};
  const EntryHeader back = DecodeEntryHeader(EncodeEntryHeader(widest));
  EXPECT_EQ(back.size, widest.size);
  EXPECT_EQ(back.capacity, widest.capacity);
  EXPECT_EQ(back.key_size, widest.key_size);
  EXPECT_EQ(back.kind, widest.kind);
  const EntryHeader alone[] = {
      {.size = kMaxEntryPayloadBytes},
      {.capacity = kMaxEntryCapacity},
      {.key_size = kMaxPayloadKeyBytes},
      {.kind = EntryKind::kChunk},
  };
  for (const EntryHeader& h : alone) {
    const EntryHeader b = DecodeEntryHeader(EncodeEntryHeader(h));
    EXPECT_EQ(b.size, h.size);
    EXPECT_EQ(b.capacity, h.capacity);
    EXPECT_EQ(b.key_size, h.key_size);
    EXPECT_EQ(b.kind, h.kind);
  }
  // What the limits are for: an entry as large as the largest page.
  static_assert(kMaxPageSize <= kMaxEntryCapacity);
  static_assert(kMaxPageSize - kEntryHeaderBytes <= kMaxEntryPayloadBytes);
}

// The walkers recompute an entry's hash from its stored key (entry.h), so
// the key must come back out of the page as it went in, and an abandoned
// reservation must say it holds none.
TEST(EntryTest, PayloadKeyReadsTheStoredKeyAndNothingFromADeadEntry) {
  alignas(8) uint8_t page[256] = {};
  std::string key;
  for (const std::string_view k : {"k", "a-key-of-24-bytes-------",
                                   "a key longer than one word of course"}) {
    const uint32_t size = PayloadSize(k.size(), 9);
    WriteKeyedEntry(page, k, "the value", EntryFootprint(size),
                    EntryKind::kChunk);
    const EntryHeader h = ReadEntryHeader(page);
    EXPECT_EQ(h.kind, EntryKind::kChunk);
    ASSERT_TRUE(PayloadKey(page, h, &key));
    EXPECT_EQ(key, k);
  }
  WriteDeadEntry(page, 32);
  EXPECT_FALSE(PayloadKey(page, ReadEntryHeader(page), &key));
  // A header naming a key longer than its payload (a torn or foreign
  // header) is refused rather than read past.
  WriteEntryHeader(page, EntryHeader{.size = 8, .capacity = 16, .key_size = 9});
  EXPECT_FALSE(PayloadKey(page, ReadEntryHeader(page), &key));
  EXPECT_FALSE(PayloadKeyEquals(page, ReadEntryHeader(page), "123456789"));
}

// Keys and values of every length around the word boundaries: the key
// compares equal (and unequal to a one-byte change), the value comes back,
// and nothing past the footprint is written.
TEST(EntryTest, WriteThenReadRoundTripsEveryLength) {
  alignas(8) uint8_t page[256];
  for (uint32_t key_len = 1; key_len <= 17; ++key_len) {
    for (uint32_t len = 0; len <= 64; ++len) {
      std::memset(page, 0xee, sizeof(page));
      const std::string key = Pattern(key_len, 'A');
      const std::string value = Pattern(len, 'a');
      const uint32_t cap = EntryFootprint(PayloadSize(key_len, len));
      WriteKeyedEntry(page, key, value, cap, EntryKind::kChunkedHead);
      const EntryHeader h = ReadEntryHeader(page);
      ASSERT_EQ(h.size, key_len + len);
      ASSERT_EQ(h.capacity, cap);
      ASSERT_EQ(h.key_size, key_len);
      ASSERT_EQ(h.kind, EntryKind::kChunkedHead);
      ASSERT_EQ(h.value_size(), len);
      EntryKind seen;
      ASSERT_TRUE(PayloadKeyEquals(page, h, key, EntryKind::kValue, &seen));
      EXPECT_EQ(seen, EntryKind::kChunkedHead);
      // A chunk key never matches a client's entry, nor a longer key.
      EXPECT_FALSE(PayloadKeyEquals(page, h, key, EntryKind::kChunk));
      EXPECT_FALSE(PayloadKeyEquals(page, h, key + "x"));
      std::string other = key;
      other[key_len - 1] ^= 1;
      EXPECT_FALSE(PayloadKeyEquals(page, h, other));
      std::string out(len, '\0');
      CopyPayloadRange(page, h.key_size, len, out.data());
      ASSERT_EQ(out, value);
      for (size_t i = cap; i < sizeof(page); ++i) ASSERT_EQ(page[i], 0xee);
    }
  }
}

// Every range of a payload, aligned or not, copies exactly its bytes and
// writes nothing outside [dst, dst + n).
// Every (from, n) of payloads of several lengths (a last word holding 0 to
// 7 bytes), each entry flush against the end of a heap block of exactly its
// footprint and each destination exactly n bytes, so that under ASAN a read
// past the entry's last word or a write past n fails the test.
TEST(EntryTest, CopyPayloadRangeCopiesEveryRangeExactly) {
  const std::string key = Pattern(13, 'K');
  for (size_t value_size = 27; value_size <= 35; ++value_size) {
    const std::string value = Pattern(value_size, 'v');
    const size_t footprint =
        EntryFootprint(PayloadSize(key.size(), value.size()));
    std::unique_ptr<uint64_t[]> block(new uint64_t[footprint / 8]());
    uint8_t* entry = reinterpret_cast<uint8_t*>(block.get());
    WriteKeyedEntry(entry, key, value, footprint);
    const std::string payload = key + value;
    for (size_t from = 0; from <= payload.size(); ++from) {
      for (size_t n = 0; from + n <= payload.size(); ++n) {
        std::unique_ptr<char[]> out(new char[n == 0 ? 1 : n]);
        CopyPayloadRange(entry, from, n, out.get());
        ASSERT_EQ(std::string(out.get(), n), payload.substr(from, n))
            << "value " << value_size << " from " << from << " n " << n;
      }
    }
  }
}

// KeyMeta keeps no size or capacity: a reader takes them from the header
// its (possibly stale) KeyMeta points at, so a header that cannot be an
// entry's there must be refused before anything is copied.
TEST(EntryTest, HeaderWithinAcceptsEntriesAndRefusesWhatCannotBeOne) {
  alignas(8) uint8_t page[256] = {};
  uint8_t* const e = page + 64;
  EntryHeader h;
  WriteKeyedEntry(e, "key", std::string(40, 'v'),
                  EntryFootprint(PayloadSize(3, 40)));
  ASSERT_TRUE(ReadEntryHeaderWithin(e, 64, sizeof(page), &h));
  EXPECT_EQ(h.size, 43u);
  EXPECT_EQ(h.capacity, EntryFootprint(43));
  // The last entry may end exactly at the page's end...
  WriteDeadEntry(e, sizeof(page) - 64);
  EXPECT_TRUE(ReadEntryHeaderWithin(e, 64, sizeof(page), &h));
  // ... but not one byte past it.
  WriteDeadEntry(e, sizeof(page) - 64 + 8);
  EXPECT_FALSE(ReadEntryHeaderWithin(e, 64, sizeof(page), &h));
  // A footprint smaller than the header (a zeroed, never-written page).
  WriteDeadEntry(e, 0);
  EXPECT_FALSE(ReadEntryHeaderWithin(e, 64, sizeof(page), &h));
  // A size past the footprint, also the largest the field holds.
  WriteEntryHeader(e, {.size = 41, .capacity = 48});
  EXPECT_FALSE(ReadEntryHeaderWithin(e, 64, sizeof(page), &h));
  WriteEntryHeader(e, {.size = kMaxEntryPayloadBytes, .capacity = 48});
  EXPECT_FALSE(ReadEntryHeaderWithin(e, 64, sizeof(page), &h));
  WriteEntryHeader(e, {.capacity = kMaxEntryCapacity});
  EXPECT_FALSE(ReadEntryHeaderWithin(e, 64, sizeof(page), &h));
  // A key past the payload.
  WriteEntryHeader(e, {.size = 8, .capacity = 48, .key_size = 9});
  EXPECT_FALSE(ReadEntryHeaderWithin(e, 64, sizeof(page), &h));
  // Every bit pattern of the word decodes to something checkable: all ones.
  StoreWord(e, ~uint64_t{0});
  EXPECT_FALSE(ReadEntryHeaderWithin(e, 64, sizeof(page), &h));
}

TEST(EntryTest, CopyEntryMovesKeyValueAndKindAndRewritesTheCapacity) {
  alignas(8) uint8_t a[128] = {}, b[128] = {};
  WriteKeyedEntry(a, "relocated", "hello, relocation", 96,  // with slack
                  EntryKind::kChunk);
  const EntryHeader before = ReadEntryHeader(a);
  CopyEntry(a, b, before, EntryFootprint(before.size));
  const EntryHeader h = ReadEntryHeader(b);
  EXPECT_EQ(h.size, 26u);
  EXPECT_EQ(h.capacity, EntryFootprint(26));
  EXPECT_EQ(h.key_size, 9u);
  EXPECT_EQ(h.kind, EntryKind::kChunk);
  EXPECT_TRUE(PayloadKeyEquals(b, h, "relocated", EntryKind::kChunk));
  std::string out(h.value_size(), '\0');
  CopyPayloadRange(b, h.key_size, out.size(), out.data());
  EXPECT_EQ(out, "hello, relocation");
}

// The portable form is the in-page payload of the layout before
// 2026-11-25, byte for byte, so PageBlobs (format version 2) written by
// either layout reload into the other.
TEST(EntryTest, ThePortableFormIsTheEarlierPayloadLayout) {
  alignas(8) uint8_t page[64] = {};
  WriteKeyedEntry(page, "abc", "xy", EntryFootprint(PayloadSize(3, 2)),
                  EntryKind::kChunkedHead);
  const EntryHeader h = ReadEntryHeader(page);
  ASSERT_EQ(PortableSize(h), 7u);
  std::string portable(PortableSize(h), '\0');
  CopyPortable(page, h, portable.data());
  // u16 little-endian (kind 1 << 14 | key size 3), key, value.
  EXPECT_EQ(portable, std::string("\x03\x40" "abcxy", 7));
  std::string_view key, value;
  EntryKind kind;
  ASSERT_TRUE(SplitPortable(portable, &key, &value, &kind));
  EXPECT_EQ(key, "abc");
  EXPECT_EQ(value, "xy");
  EXPECT_EQ(kind, EntryKind::kChunkedHead);
  // Too short for its field, for the key it names, or naming no key.
  EXPECT_FALSE(SplitPortable(std::string_view("\x03", 1), &key, &value, &kind));
  EXPECT_FALSE(SplitPortable(std::string_view("\x03\x40" "ab", 4), &key,
                             &value, &kind));
  EXPECT_FALSE(SplitPortable(std::string_view("\x00\x00" "ab", 4), &key,
                             &value, &kind));
  // A kind there is not (the field's top bits both set).
  EXPECT_FALSE(SplitPortable(std::string_view("\x02\xc0" "ab", 4), &key,
                             &value, &kind));
}

// The largest entry the largest page holds, under the largest key: the
// header describes it, the reader's bounds check accepts it, and the key,
// the value, a relocated copy and the portable form all come back whole.
TEST(EntryTest, TheLargestEntryOfTheLargestPageRoundTrips) {
  PageBytes page(kMaxPageSize), moved(kMaxPageSize);
  const std::string key = Pattern(kMaxPayloadKeyBytes, 'K');
  const std::string value =
      Pattern(kMaxPageSize - kEntryHeaderBytes - key.size(), 'V');
  ASSERT_EQ(EntryFootprint(PayloadSize(key.size(), value.size())),
            kMaxPageSize);
  WriteKeyedEntry(page.data, key, value, kMaxPageSize, EntryKind::kChunk);
  EntryHeader h;
  ASSERT_TRUE(ReadEntryHeaderWithin(page.data, 0, kMaxPageSize, &h));
  EXPECT_EQ(h.size, kMaxPageSize - kEntryHeaderBytes);
  EXPECT_EQ(h.capacity, kMaxPageSize);
  EXPECT_EQ(h.key_size, kMaxPayloadKeyBytes);
  EXPECT_EQ(h.kind, EntryKind::kChunk);
  EXPECT_TRUE(PayloadKeyEquals(page.data, h, key, EntryKind::kChunk));
  std::string out(h.value_size(), '\0');
  CopyPayloadRange(page.data, h.key_size, out.size(), out.data());
  EXPECT_TRUE(out == value);

  CopyEntry(page.data, moved.data, h, kMaxPageSize);
  EntryHeader m;
  ASSERT_TRUE(ReadEntryHeaderWithin(moved.data, 0, kMaxPageSize, &m));
  EXPECT_EQ(m.size, h.size);
  EXPECT_EQ(m.key_size, h.key_size);
  std::string moved_key;
  ASSERT_TRUE(PayloadKey(moved.data, m, &moved_key));
  EXPECT_TRUE(moved_key == key);

  std::string portable(PortableSize(h), '\0');
  CopyPortable(page.data, h, portable.data());
  std::string_view k, v;
  EntryKind kind;
  ASSERT_TRUE(SplitPortable(portable, &k, &v, &kind));
  EXPECT_TRUE(k == key);
  EXPECT_TRUE(v == value);
  EXPECT_EQ(kind, EntryKind::kChunk);
}

}  // namespace
}  // namespace furrball_internal
}  // namespace furrballs
