#include "engine/common/hash_secret_file.h"

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace furrballs {
namespace {

namespace fs = std::filesystem;

// A fresh directory under the test's temporary directory.
std::string TempDir(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  const fs::path dir = fs::path(base != nullptr ? base : "/tmp") / name;
  fs::remove_all(dir);
  return dir.string();
}

TEST(HashSecretFileTest, EncodingRoundTrips) {
  const HashSecret secret = KeyHasher(5).secret();
  const std::string bytes = EncodeHashSecretFile(secret);
  EXPECT_EQ(bytes.size(), kHashSecretFileBytes);
  absl::StatusOr<HashSecret> got = DecodeHashSecretFile(bytes);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, secret);
}

TEST(HashSecretFileTest, EveryFlippedByteAndEveryTruncationIsRefused) {
  const std::string good = EncodeHashSecretFile(KeyHasher(5).secret());
  for (size_t i = 0; i < good.size(); ++i) {
    std::string bad = good;
    bad[i] ^= 0x20;
    EXPECT_FALSE(DecodeHashSecretFile(bad).ok()) << i;
    EXPECT_FALSE(DecodeHashSecretFile(good.substr(0, i)).ok()) << i;
  }
  EXPECT_FALSE(DecodeHashSecretFile(good + "x").ok());
}

TEST(HashSecretFileTest, RandomSecretsDiffer) {
  absl::StatusOr<HashSecret> a = RandomHashSecret();
  absl::StatusOr<HashSecret> b = RandomHashSecret();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(*a, *b);
  EXPECT_NE(HashSecretFingerprint(*a), HashSecretFingerprint(*b));
}

TEST(HashSecretFileTest, CreatedOnceOwnerOnlyThenLoaded) {
  const std::string dir = TempDir("created") + "/nested";
  absl::StatusOr<LoadedHashSecret> first = LoadOrCreateHashSecret(dir);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->origin, LoadedHashSecret::Origin::kCreated);
  EXPECT_EQ(first->path, dir + "/hash_secret");
  struct stat st;
  ASSERT_EQ(stat(first->path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(st.st_size, static_cast<off_t>(kHashSecretFileBytes));

  absl::StatusOr<LoadedHashSecret> second = LoadOrCreateHashSecret(dir);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->origin, LoadedHashSecret::Origin::kLoaded);
  EXPECT_EQ(second->secret, first->secret);
  // Nothing but the secret is left in the directory (no temporary file).
  int files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++files;
  EXPECT_EQ(files, 1);
}

TEST(HashSecretFileTest, ACorruptFileIsReplacedAndSaysWhy) {
  const std::string dir = TempDir("corrupt");
  absl::StatusOr<LoadedHashSecret> first = LoadOrCreateHashSecret(dir);
  ASSERT_TRUE(first.ok()) << first.status();
  std::ofstream(first->path, std::ios::binary | std::ios::trunc) << "junk";
  absl::StatusOr<LoadedHashSecret> again = LoadOrCreateHashSecret(dir);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->origin, LoadedHashSecret::Origin::kReplaced);
  EXPECT_NE(again->secret, first->secret);
  EXPECT_NE(again->note.find("4 bytes"), std::string::npos) << again->note;
  absl::StatusOr<LoadedHashSecret> third = LoadOrCreateHashSecret(dir);
  ASSERT_TRUE(third.ok()) << third.status();
  EXPECT_EQ(third->origin, LoadedHashSecret::Origin::kLoaded);
  EXPECT_EQ(third->secret, again->secret);
}

TEST(HashSecretFileTest, AnUnusableDirectoryIsAnErrorNamingIt) {
  const std::string dir = TempDir("blocked");
  fs::create_directories(fs::path(dir).parent_path());
  std::ofstream(dir) << "a file where the directory should be";
  absl::StatusOr<LoadedHashSecret> got = LoadOrCreateHashSecret(dir);
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find(dir), std::string::npos)
      << got.status();
}

}  // namespace
}  // namespace furrballs
