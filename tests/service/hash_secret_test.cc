// The keyed hash's secret as the server binary chooses it (issue 15 item 3):
// without --hash_seed every start draws a new random secret, unless --spill
// keeps one in --data_dir/hash_secret (mode 0600), which a warm restart then
// reuses so that its keys come back. The secret itself is never printed;
// its fingerprint is, on the start-up line this test reads.
//
// Usage: hash_secret_test <furrballs_server>.
#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include <absl/strings/str_cat.h>
#include <gtest/gtest.h>

#include "clients/cpp/client.h"
#include "tests/common/server_binary.h"
#include "tests/common/server_process.h"

namespace furrballs {
namespace {

namespace fs = std::filesystem;
using client::Client;
using client::Entry;
using test_support::ServerProcess;

using test_support::server_binary;

std::vector<std::string> Flags(std::vector<std::string> more) {
  std::vector<std::string> flags = {"--metrics_address=", "--memory_mb=16"};
  flags.insert(flags.end(), more.begin(), more.end());
  return flags;
}

// A fresh directory for a data directory.
std::string DataDir(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  const fs::path dir = fs::path(base != nullptr ? base : "/tmp") / name;
  fs::remove_all(dir);
  return dir.string();
}

// Starts the server, returns its start-up line about the secret.
std::string StartAndReadSecretLine(ServerProcess& server) {
  std::string why;
  if (!server.Start(0, &why)) {
    ADD_FAILURE() << "the server did not start:\n" << why;
    return "";
  }
  std::smatch m;
  const std::string& out = server.startup_output();
  if (!std::regex_search(out, m, std::regex("hash secret [^\n]*"))) {
    ADD_FAILURE() << "no hash secret line in:\n" << out;
    return "";
  }
  return m.str();
}

std::string Fingerprint(const std::string& line) {
  std::smatch m;
  if (!std::regex_search(line, m, std::regex("fingerprint ([0-9a-f]{16})"))) {
    ADD_FAILURE() << "no fingerprint in: " << line;
    return "";
  }
  return m.str(1);
}

TEST(HashSecretTest, EveryStartWithoutASeedDrawsANewSecret) {
  ServerProcess server(server_binary, Flags({}));
  const std::string first = StartAndReadSecretLine(server);
  ASSERT_TRUE(server.Stop());
  const std::string second = StartAndReadSecretLine(server);
  ASSERT_TRUE(server.Stop());
  EXPECT_NE(first.find("random, for this run only"), std::string::npos)
      << first;
  EXPECT_NE(Fingerprint(first), Fingerprint(second))
      << first << "\n" << second;
}

TEST(HashSecretTest, AGivenSeedGivesTheSameSecretEveryStart) {
  ServerProcess server(server_binary, Flags({"--hash_seed=42"}));
  const std::string first = StartAndReadSecretLine(server);
  ASSERT_TRUE(server.Stop());
  const std::string second = StartAndReadSecretLine(server);
  ASSERT_TRUE(server.Stop());
  EXPECT_NE(first.find("from --hash_seed"), std::string::npos) << first;
  EXPECT_EQ(Fingerprint(first), Fingerprint(second));
}

// A warm restart must hash with the secret its spilled keys were indexed
// under: with a new secret every start (what the first test shows without
// --spill) it would come back cold and every key would miss.
TEST(HashSecretTest, AWarmRestartKeepsTheSecretFileAndTheKeys) {
  const std::string dir = DataDir("warm");
  ServerProcess server(server_binary,
                       Flags({"--spill", absl::StrCat("--data_dir=", dir)}));
  const std::string first = StartAndReadSecretLine(server);
  EXPECT_NE(first.find("random, new in " + dir + "/hash_secret"),
            std::string::npos)
      << first;
  {
    Client cache(server.address());
    for (int i = 0; i < 50; ++i) {
      ASSERT_TRUE(cache.Set(absl::StrCat("k", i), absl::StrCat("v", i)).ok());
    }
  }
  ASSERT_TRUE(server.Stop());

  struct stat st;
  ASSERT_EQ(stat((dir + "/hash_secret").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u) << "the secret file is readable by "
                                         "others";

  const std::string second = StartAndReadSecretLine(server);
  EXPECT_NE(second.find("random, kept in " + dir + "/hash_secret"),
            std::string::npos)
      << second;
  EXPECT_EQ(Fingerprint(first), Fingerprint(second));
  Client cache(server.address());
  int back = 0;
  for (int i = 0; i < 50; ++i) {
    absl::StatusOr<std::optional<Entry>> got = cache.Get(absl::StrCat("k", i));
    ASSERT_TRUE(got.ok()) << got.status();
    if (got->has_value()) {
      EXPECT_EQ((*got)->value, absl::StrCat("v", i));
      ++back;
    }
  }
  EXPECT_EQ(back, 50) << "keys lost over a warm restart";
  ASSERT_TRUE(server.Stop());
}

// A secret file that does not decode is replaced (the start is cold, and
// says why), not a reason to refuse to start.
TEST(HashSecretTest, AnUnreadableSecretFileIsReplacedAndTheStartIsCold) {
  const std::string dir = DataDir("corrupt");
  ServerProcess server(server_binary,
                       Flags({"--spill", absl::StrCat("--data_dir=", dir)}));
  const std::string first = StartAndReadSecretLine(server);
  {
    Client cache(server.address());
    ASSERT_TRUE(cache.Set("key", "value").ok());
  }
  ASSERT_TRUE(server.Stop());
  std::ofstream(dir + "/hash_secret", std::ios::trunc) << "not a secret";

  const std::string second = StartAndReadSecretLine(server);
  EXPECT_NE(second.find("the old file was unreadable"), std::string::npos)
      << second;
  EXPECT_NE(Fingerprint(first), Fingerprint(second));
  Client cache(server.address());
  absl::StatusOr<std::optional<Entry>> got = cache.Get("key");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_FALSE(got->has_value()) << "served a key indexed under another secret";
  ASSERT_TRUE(server.Stop());
}

}  // namespace
}  // namespace furrballs
