// Tests of the token file format, the authorization decision and the reload
// of a changed token file.
#include "service/token_auth.h"

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "tests/common/eventually.h"

namespace furrballs::service {
namespace {

using grpc::StatusCode;
using test_support::Eventually;

constexpr char kWriter[] = "rw-0123456789abcdef";
constexpr char kReader[] = "ro-0123456789abcdef";

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

void WriteFile(const std::string& path, const std::string& text) {
  // Written beside and renamed over, so that a reload never reads half a
  // file (as Kubernetes swaps a Secret's files).
  const std::string tmp = path + ".tmp";
  std::ofstream(tmp, std::ios::trunc) << text;
  ASSERT_EQ(std::rename(tmp.c_str(), path.c_str()), 0);
}

TEST(ParseTokenFileTest, RolesCommentsAndBlankLines) {
  auto table = ParseTokenFile(
      "# tokens\n"
      "\n"
      "read-write  rw-0123456789abcdef   # the web tier\n"
      "\tread-only\tro-0123456789abcdef=\r\n"
      "read-only abcdefghijklmnop.-_~+/==\n",
      "tokens");
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_EQ(table->read_write, 1u);
  EXPECT_EQ(table->read_only, 2u);
  EXPECT_EQ(table->roles.at(DigestToken(kWriter)), Role::kReadWrite);
  EXPECT_EQ(table->roles.at(DigestToken("ro-0123456789abcdef=")),
            Role::kReadOnly);
  EXPECT_FALSE(table->roles.contains(DigestToken(kReader)));
}

TEST(ParseTokenFileTest, ErrorsNameTheFileAndLine) {
  struct Case {
    const char* text;
    const char* message;
  } cases[] = {
      {"read-write rw-0123456789abcdef\nadmin x-0123456789abcdef\n",
       "tokens line 2: unknown role \"admin\""},
      {"rw-0123456789abcdef\n", "tokens line 1: expected \"<role> <token>\""},
      {"read-only a b\n", "tokens line 1: expected \"<role> <token>\""},
      {"read-only short\n", "tokens line 1: the token has 5 characters"},
      {"read-only bad,0123456789abcdef\n",
       "tokens line 1: the token has characters"},
      {"read-only ab=cdefghijklmnopqrs\n",
       "tokens line 1: the token has characters"},
      {"read-only rw-0123456789abcdef\n\nread-write rw-0123456789abcdef\n",
       "tokens line 3: the same token as line 1"},
      {"# nothing\n\n", "tokens: no tokens"},
  };
  for (const Case& c : cases) {
    auto table = ParseTokenFile(c.text, "tokens");
    ASSERT_FALSE(table.ok()) << c.text;
    EXPECT_EQ(table.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(table.status().message().find(c.message), std::string::npos)
        << "got: " << table.status().message() << "\nwant: " << c.message;
  }
}

TEST(TokenAuthenticatorTest, OpenFailsWithTheReason) {
  auto missing = TokenAuthenticator::Open(TempPath("no-such-tokens"),
                                          std::chrono::seconds(1));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("No such file"),
            std::string::npos)
      << missing.status();
  const std::string path = TempPath("bad-tokens");
  WriteFile(path, "read-only tiny\n");
  auto bad = TokenAuthenticator::Open(path, std::chrono::seconds(1));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("line 1"), std::string::npos);
}

TEST(TokenAuthenticatorTest, RolesGrantReadOrWrite) {
  const std::string path = TempPath("roles-tokens");
  WriteFile(path, std::string("read-write ") + kWriter + "\nread-only " +
                      kReader + "\n");
  auto auth = TokenAuthenticator::Open(path, std::chrono::seconds(60));
  ASSERT_TRUE(auth.ok()) << auth.status();
  const TokenAuthenticator& a = **auth;
  EXPECT_TRUE(a.Authorize(DigestToken(kWriter), Access::kWrite, "Set").ok());
  EXPECT_TRUE(a.Authorize(DigestToken(kWriter), Access::kRead, "Get").ok());
  EXPECT_TRUE(a.Authorize(DigestToken(kReader), Access::kRead, "Get").ok());
  grpc::Status denied =
      a.Authorize(DigestToken(kReader), Access::kWrite, "Set");
  EXPECT_EQ(denied.error_code(), StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(denied.error_message(),
            "Set: the token is read-only; writes need a read-write token");
  grpc::Status unknown =
      a.Authorize(DigestToken("xx-0123456789abcdef"), Access::kRead, "Get");
  EXPECT_EQ(unknown.error_code(), StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(unknown.error_message(), "Get: unknown bearer token");
  grpc::Status none = a.Authorize(std::nullopt, Access::kRead, "Get");
  EXPECT_EQ(none.error_code(), StatusCode::UNAUTHENTICATED);
  EXPECT_NE(none.error_message().find("no bearer token"), std::string::npos);
}

TEST(TokenAuthenticatorTest, ReloadsAChangedFileAndKeepsTheOldOneOnErrors) {
  const std::string path = TempPath("reload-tokens");
  WriteFile(path, std::string("read-only ") + kReader + "\n");
  auto opened = TokenAuthenticator::Open(path, std::chrono::milliseconds(10));
  ASSERT_TRUE(opened.ok()) << opened.status();
  const TokenAuthenticator& a = **opened;
  ASSERT_FALSE(a.Authorize(DigestToken(kWriter), Access::kWrite, "Set").ok());

  // The reader is promoted and a writer added.
  WriteFile(path, std::string("read-write ") + kReader + "\nread-write " +
                      kWriter + "\n");
  ASSERT_TRUE(Eventually([&] { return a.read_write_tokens() == 2; }));
  EXPECT_TRUE(a.Authorize(DigestToken(kReader), Access::kWrite, "Set").ok());
  EXPECT_TRUE(a.Authorize(DigestToken(kWriter), Access::kWrite, "Set").ok());

  // A file that does not parse changes nothing, and neither does a missing
  // one.
  WriteFile(path, "read-write\n");
  ASSERT_TRUE(Eventually([&] { return a.failed_reloads() == 1; }));
  EXPECT_TRUE(a.Authorize(DigestToken(kReader), Access::kWrite, "Set").ok());
  ASSERT_EQ(std::remove(path.c_str()), 0);
  ASSERT_TRUE(Eventually([&] { return a.failed_reloads() == 2; }));
  EXPECT_TRUE(a.Authorize(DigestToken(kReader), Access::kWrite, "Set").ok());
  EXPECT_EQ(a.read_write_tokens(), 2u);

  // Then a good file revokes the reader.
  WriteFile(path, std::string("read-write ") + kWriter + "\n");
  ASSERT_TRUE(Eventually([&] { return a.read_write_tokens() == 1; }));
  EXPECT_EQ(a.Authorize(DigestToken(kReader), Access::kRead, "Get")
                .error_code(),
            StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(a.Authorize(DigestToken(kWriter), Access::kWrite, "Set").ok());
}

}  // namespace
}  // namespace furrballs::service
