#include "engine/furrball/restart_manifest.h"

#include <string>

#include <gtest/gtest.h>

namespace furrballs {
namespace furrball_internal {
namespace {

RestartManifest TwoNodes() {
  RestartManifest m;
  m.secret = KeyHasher(99).secret();
  m.wall_ms = 1'700'000'000'000;
  m.nodes.resize(2);
  m.nodes[0].next_version = 41;
  m.nodes[0].keys.push_back({HashPair{1, 2}, SpilledKey{7, 40, 0}});
  m.nodes[0].keys.push_back({HashPair{3, 4}, SpilledKey{8, 12, 1500}});
  m.nodes[1].next_version = 5;  // no spilled keys
  return m;
}

TEST(RestartManifestTest, RoundTripsEveryField) {
  const RestartManifest m = TwoNodes();
  const std::string bytes = EncodeRestartManifest(m);
  EXPECT_EQ(bytes.size(), 8 + kHashSecretSize + 8 + 4 + 2 * 16 + 2 * 40);
  absl::StatusOr<RestartManifest> got = ParseRestartManifest(bytes, 2);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->secret, m.secret);
  EXPECT_EQ(got->wall_ms, m.wall_ms);
  ASSERT_EQ(got->nodes.size(), 2u);
  EXPECT_EQ(got->nodes[0].next_version, 41u);
  EXPECT_EQ(got->nodes[0].keys, m.nodes[0].keys);
  EXPECT_EQ(got->nodes[1].next_version, 5u);
  EXPECT_TRUE(got->nodes[1].keys.empty());
}

TEST(RestartManifestTest, RejectsAnotherNodeCount) {
  const std::string bytes = EncodeRestartManifest(TwoNodes());
  absl::StatusOr<RestartManifest> got = ParseRestartManifest(bytes, 3);
  EXPECT_TRUE(absl::IsDataLoss(got.status())) << got.status();
  EXPECT_NE(got.status().message().find("2 nodes"), std::string::npos)
      << got.status();
}

TEST(RestartManifestTest, RejectsEveryTruncationAndTrailingBytes) {
  const std::string bytes = EncodeRestartManifest(TwoNodes());
  for (size_t n = 0; n < bytes.size(); ++n) {
    absl::StatusOr<RestartManifest> got =
        ParseRestartManifest(bytes.substr(0, n), 2);
    EXPECT_TRUE(absl::IsDataLoss(got.status())) << n << ": " << got.status();
  }
  EXPECT_TRUE(absl::IsDataLoss(ParseRestartManifest(bytes + "x", 2).status()));
}

TEST(RestartManifestTest, RejectsABadMagicAndAnUnknownVersion) {
  std::string bytes = EncodeRestartManifest(TwoNodes());
  std::string bad_magic = bytes;
  bad_magic[0] ^= 1;
  EXPECT_TRUE(absl::IsDataLoss(ParseRestartManifest(bad_magic, 2).status()));
  bytes[4] = 2;  // format version 2
  EXPECT_TRUE(absl::IsUnimplemented(ParseRestartManifest(bytes, 2).status()));
}

// A count no file of this size could hold is refused before anything is
// reserved for it (a corrupt count must not become a huge allocation).
TEST(RestartManifestTest, RejectsAKeyCountLargerThanTheBytesLeft) {
  RestartManifest m = TwoNodes();
  m.nodes[0].keys.clear();
  std::string bytes = EncodeRestartManifest(m);
  const size_t count_at = 8 + kHashSecretSize + 8 + 4 + 8;
  const uint64_t huge = uint64_t{1} << 60;
  bytes.replace(count_at, 8, reinterpret_cast<const char*>(&huge), 8);
  absl::StatusOr<RestartManifest> got = ParseRestartManifest(bytes, 2);
  EXPECT_TRUE(absl::IsDataLoss(got.status())) << got.status();
  EXPECT_NE(got.status().message().find("claims"), std::string::npos)
      << got.status();
}

}  // namespace
}  // namespace furrball_internal
}  // namespace furrballs
