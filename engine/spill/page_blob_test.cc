#include "engine/spill/page_blob.h"

#include <string>

#include <absl/strings/str_cat.h>
#include <gtest/gtest.h>
#include <xxhash.h>

namespace furrballs {
namespace spill {
namespace {

std::string ThreeEntryBlob() {
  PageBlobBuilder b(/*node=*/3, /*page_id=*/77, /*written_ms=*/1234);
  const std::string values[] = {"alpha", "", std::string(1000, 'z')};
  for (int i = 0; i < 3; ++i) {
    char* dst = b.Add(HashPair{uint64_t(i) + 10, uint64_t(i) + 20},
                      /*version=*/100 + i, /*expiry_ms=*/i == 1 ? 5000 : 0,
                      static_cast<uint32_t>(values[i].size()));
    values[i].copy(dst, values[i].size());
  }
  return b.Finish();
}

TEST(PageBlobTest, RoundTripsEveryField) {
  const std::string bytes = ThreeEntryBlob();
  EXPECT_EQ(bytes.size(), kPageBlobHeaderBytes + 3 * kPageBlobEntryBytes +
                              1005 + kPageBlobTrailerBytes);
  absl::StatusOr<PageBlobView> v = DecodePageBlob(bytes);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->node, 3u);
  EXPECT_EQ(v->page_id, 77u);
  EXPECT_EQ(v->written_ms, 1234u);
  ASSERT_EQ(v->entries.size(), 3u);
  EXPECT_EQ(v->entries[0].hash, (HashPair{10, 20}));
  EXPECT_EQ(v->entries[2].hash, (HashPair{12, 22}));
  EXPECT_EQ(v->entries[1].version, 101u);
  EXPECT_EQ(v->entries[1].expiry_ms, 5000u);
  EXPECT_EQ(v->entries[0].expiry_ms, 0u);
  EXPECT_EQ(v->Value(v->entries[0]), "alpha");
  EXPECT_EQ(v->Value(v->entries[1]), "");
  EXPECT_EQ(v->Value(v->entries[2]), std::string(1000, 'z'));
}

TEST(PageBlobTest, EmptyBlobRoundTrips) {
  const std::string bytes = PageBlobBuilder(0, 1, 0).Finish();
  absl::StatusOr<PageBlobView> v = DecodePageBlob(bytes);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_TRUE(v->entries.empty());
}

// Any single flipped bit, anywhere, is caught: the blob is refused whole.
TEST(PageBlobTest, EveryBitFlipIsRejected) {
  const std::string good = ThreeEntryBlob();
  for (size_t byte = 0; byte < good.size(); ++byte) {
    for (int bit = 0; bit < 8; bit += 3) {
      std::string bad = good;
      bad[byte] = static_cast<char>(bad[byte] ^ (1 << bit));
      const absl::StatusOr<PageBlobView> v = DecodePageBlob(bad);
      ASSERT_FALSE(v.ok()) << "flip at byte " << byte << " bit " << bit;
      EXPECT_EQ(v.status().code(), absl::StatusCode::kDataLoss)
          << v.status();
    }
  }
}

TEST(PageBlobTest, TruncatedAndExtendedBlobsAreRejected) {
  const std::string good = ThreeEntryBlob();
  for (size_t n : {size_t{0}, size_t{7}, kPageBlobHeaderBytes,
                   good.size() / 2, good.size() - 1}) {
    EXPECT_EQ(DecodePageBlob(good.substr(0, n)).status().code(),
              absl::StatusCode::kDataLoss)
        << n;
  }
  EXPECT_FALSE(DecodePageBlob(good + "x").ok());
  EXPECT_FALSE(DecodePageBlob("some other value entirely").ok());
}

// A blob of a later format version (with a valid checksum) is refused with a
// message naming both versions, not misread.
TEST(PageBlobTest, UnknownVersionIsRefused) {
  std::string blob = ThreeEntryBlob();
  blob.resize(blob.size() - kPageBlobTrailerBytes);
  blob[4] = kPageBlobVersion + 1;  // u16 version
  const uint64_t sum = XXH3_64bits(blob.data(), blob.size());
  blob.append(reinterpret_cast<const char*>(&sum), sizeof(sum));
  const absl::StatusOr<PageBlobView> v = DecodePageBlob(blob);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(v.status().message().find(
                absl::StrCat("version ", kPageBlobVersion + 1)),
            std::string::npos)
      << v.status();
}

// Consistent sizes are checked after the checksum: a well-formed checksum
// over inconsistent fields (a bug in a writer) is still refused.
TEST(PageBlobTest, EntryPastTheDataIsRefusedEvenWithAGoodChecksum) {
  std::string blob = ThreeEntryBlob();
  blob.resize(blob.size() - kPageBlobTrailerBytes);
  const size_t size_field = kPageBlobHeaderBytes + 2 * kPageBlobEntryBytes + 36;
  const uint32_t huge = 5000;
  blob.replace(size_field, 4, reinterpret_cast<const char*>(&huge), 4);
  const uint64_t sum = XXH3_64bits(blob.data(), blob.size());
  blob.append(reinterpret_cast<const char*>(&sum), sizeof(sum));
  const absl::StatusOr<PageBlobView> v = DecodePageBlob(blob);
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.status().message().find("runs past"), std::string::npos)
      << v.status();
}

// Found by page_blob_fuzz (corpus/page_blob_fuzz/crash-data-bytes-wraps):
// an entry count larger than the blob holds, with a data size chosen so that
// header + entries + data + trailer wraps around 2^64 to the blob's real
// size. The sizes must be compared without overflow; before the fix the
// decoder read entries past the end of the blob and accepted it.
TEST(PageBlobTest, SizesThatWrapAroundAreRefused) {
  std::string blob = ThreeEntryBlob();
  const uint64_t size = blob.size();
  blob.resize(blob.size() - kPageBlobTrailerBytes);
  const uint32_t count = 29;  // 29 entries need more bytes than the blob has
  const uint64_t data_bytes = size - kPageBlobHeaderBytes -
                              kPageBlobTrailerBytes -
                              uint64_t{count} * kPageBlobEntryBytes;  // wraps
  blob.replace(12, 4, reinterpret_cast<const char*>(&count), 4);
  blob.replace(24, 8, reinterpret_cast<const char*>(&data_bytes), 8);
  const uint64_t sum = XXH3_64bits(blob.data(), blob.size());
  blob.append(reinterpret_cast<const char*>(&sum), sizeof(sum));
  ASSERT_EQ(blob.size(), size);
  const absl::StatusOr<PageBlobView> v = DecodePageBlob(blob);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), absl::StatusCode::kDataLoss) << v.status();
}

}  // namespace
}  // namespace spill
}  // namespace furrballs
