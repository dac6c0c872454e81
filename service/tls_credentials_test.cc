// Tests of the start-up check of the TLS files: every way a file can be
// wrong is refused with the file's name and the reason. (Serving TLS and
// mTLS is tested end to end in //tests/security:tls_auth_test.)
#include "service/tls_credentials.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

namespace furrballs::service {
namespace {

class CheckTlsFilesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const char* tmp = std::getenv("TEST_TMPDIR");
    dir_ = new std::string(std::string(tmp != nullptr ? tmp : "/tmp") +
                           "/tls_credentials_test");
    const std::string make = "tests/security/make_test_certs.sh " + *dir_ +
                             " one two && openssl pkey -in " + *dir_ +
                             "/one-server.key -aes256 -passout pass:secret "
                             "-out " + *dir_ + "/encrypted.key";
    ASSERT_EQ(std::system(make.c_str()), 0) << make;
  }

  static std::string F(const std::string& name) { return *dir_ + "/" + name; }

  // Expects CheckTlsFiles to refuse `files` with a message containing
  // `want`.
  static void ExpectRefused(const TlsFiles& files, const std::string& want) {
    absl::StatusOr<std::string> r = CheckTlsFiles(files);
    ASSERT_FALSE(r.ok()) << "accepted: " << *r;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(want), std::string::npos)
        << "got: " << r.status().message() << "\nwant: " << want;
  }

  static std::string* dir_;
};

std::string* CheckTlsFilesTest::dir_ = nullptr;

TEST_F(CheckTlsFilesTest, PlaintextTlsAndMtls) {
  absl::StatusOr<std::string> plain = CheckTlsFiles({});
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_NE(plain->find("plaintext"), std::string::npos);

  absl::StatusOr<std::string> tls =
      CheckTlsFiles({F("one-server.crt"), F("one-server.key"), ""});
  ASSERT_TRUE(tls.ok()) << tls.status();
  EXPECT_NE(tls->find("CN=one server"), std::string::npos) << *tls;
  EXPECT_NE(tls->find("clients are not asked"), std::string::npos) << *tls;

  // A bundle of two CAs.
  {
    std::ofstream out(F("bundle.crt"));
    for (const char* ca : {"one-ca.crt", "two-ca.crt"}) {
      out << std::ifstream(F(ca)).rdbuf();
    }
  }
  absl::StatusOr<std::string> mtls = CheckTlsFiles(
      {F("one-server.crt"), F("one-server.key"), F("bundle.crt")});
  ASSERT_TRUE(mtls.ok()) << mtls.status();
  EXPECT_NE(mtls->find("mTLS: clients need a certificate from 2 CA(s)"),
            std::string::npos)
      << *mtls;
}

TEST_F(CheckTlsFilesTest, FlagsMustGoTogether) {
  ExpectRefused({"", F("one-server.key"), ""}, "need --tls_cert_file");
  ExpectRefused({"", "", F("one-ca.crt")}, "need --tls_cert_file");
  ExpectRefused({F("one-server.crt"), "", ""}, "needs --tls_key_file");
}

TEST_F(CheckTlsFilesTest, BadFilesAreNamedWithTheReason) {
  ExpectRefused({F("missing.crt"), F("one-server.key"), ""},
                "cannot open " + F("missing.crt") + ": No such file");
  ExpectRefused({F("one-server.crt"), F("missing.key"), ""},
                "cannot open " + F("missing.key"));
  ExpectRefused({F("one-server.key"), F("one-server.key"), ""},
                F("one-server.key") + ": no PEM certificate");
  ExpectRefused({F("one-server.crt"), F("one-server.crt"), ""},
                F("one-server.crt") + ": no PEM private key");
  ExpectRefused({F("one-server.crt"), F("encrypted.key"), ""},
                F("encrypted.key") +
                    ": the private key cannot be read (bad password read); "
                    "it must be unencrypted PEM");
  ExpectRefused({F("one-server.crt"), F("two-server.key"), ""},
                F("two-server.key") +
                    ": not the private key of the first certificate in " +
                    F("one-server.crt") + " (CN=one server)");
  ExpectRefused({F("one-expired.crt"), F("one-server.key"), ""},
                F("one-expired.crt") + ": the certificate (CN=one server) "
                                       "expired on ");
  ExpectRefused({F("one-server.crt"), F("one-server.key"), F("missing-ca")},
                "cannot open " + F("missing-ca"));
  ExpectRefused({F("one-server.crt"), F("one-server.key"), F("one-ca.key")},
                F("one-ca.key") + ": no PEM certificate");

  // A chain whose second certificate is cut off.
  std::stringstream ca;
  ca << std::ifstream(F("one-ca.crt")).rdbuf();
  std::ofstream(F("cut.crt")) << std::ifstream(F("one-server.crt")).rdbuf()
                              << ca.str().substr(0, ca.str().size() / 2);
  ExpectRefused({F("cut.crt"), F("one-server.key"), ""},
                F("cut.crt") + ": certificate 2 cannot be parsed");
}

}  // namespace
}  // namespace furrballs::service
