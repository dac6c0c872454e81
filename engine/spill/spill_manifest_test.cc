#include "engine/spill/spill_manifest.h"

#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <xxhash.h>

namespace furrballs {
namespace spill {
namespace {

std::vector<NodePages> TwoNodes() {
  return {NodePages{{3, 4096}, {9, 100}}, NodePages{}};
}

TEST(SpillManifestTest, RoundTripsPagesAndTheEngineBytes) {
  const std::string bytes = EncodeSpillManifest(10, TwoNodes(), "engine!");
  absl::StatusOr<SpillManifest> got = DecodeSpillManifest(bytes, 2);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->next_page_id, 10u);
  EXPECT_EQ(got->pages, TwoNodes());
  EXPECT_EQ(got->engine, "engine!");
}

TEST(SpillManifestTest, AnyFlippedBitFailsTheChecksum) {
  const std::string bytes = EncodeSpillManifest(10, TwoNodes(), "engine!");
  for (size_t i = 16; i < bytes.size(); ++i) {  // after the checksum
    std::string bad = bytes;
    bad[i] ^= 0x10;
    absl::StatusOr<SpillManifest> got = DecodeSpillManifest(bad, 2);
    EXPECT_TRUE(absl::IsDataLoss(got.status())) << i;
  }
}

TEST(SpillManifestTest, RejectsEveryTruncation) {
  const std::string bytes = EncodeSpillManifest(10, TwoNodes(), "");
  for (size_t n = 0; n < bytes.size(); ++n) {
    EXPECT_FALSE(DecodeSpillManifest(bytes.substr(0, n), 2).ok()) << n;
  }
}

TEST(SpillManifestTest, RejectsAnotherNodeCountAndAnUnknownVersion) {
  std::string bytes = EncodeSpillManifest(10, TwoNodes(), "");
  EXPECT_TRUE(absl::IsDataLoss(DecodeSpillManifest(bytes, 1).status()));
  bytes[4] = 2;
  EXPECT_TRUE(absl::IsUnimplemented(DecodeSpillManifest(bytes, 2).status()));
}

// Lists Close could not have written, with a valid checksum: a page id the
// store would hand out again, and ids out of order (a duplicate is one).
TEST(SpillManifestTest, RejectsPageIdsCloseCannotHaveWritten) {
  absl::StatusOr<SpillManifest> got =
      DecodeSpillManifest(EncodeSpillManifest(9, TwoNodes(), ""), 2);
  EXPECT_TRUE(absl::IsDataLoss(got.status())) << got.status();
  EXPECT_NE(got.status().message().find("next page id"), std::string::npos)
      << got.status();

  // Swap the two ids of node 0 and sum the bytes again.
  std::string bytes = EncodeSpillManifest(10, TwoNodes(), "");
  const size_t first_id = 16 + 4 + 8 + 8;
  const std::string a = bytes.substr(first_id, 8);
  const std::string b = bytes.substr(first_id + 16, 8);
  bytes.replace(first_id, 8, b);
  bytes.replace(first_id + 16, 8, a);
  const uint64_t sum = XXH3_64bits(bytes.data() + 16, bytes.size() - 16);
  std::memcpy(bytes.data() + 8, &sum, 8);
  got = DecodeSpillManifest(bytes, 2);
  EXPECT_TRUE(absl::IsDataLoss(got.status())) << got.status();
  EXPECT_NE(got.status().message().find("out of order"), std::string::npos)
      << got.status();
}

}  // namespace
}  // namespace spill
}  // namespace furrballs
