#include "service/tls_credentials.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include <absl/status/status.h>
#include <absl/strings/str_cat.h>
#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>

#include "engine/common/read_file.h"

namespace furrballs::service {
namespace {

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct PkeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
using BioPtr = std::unique_ptr<BIO, BioFree>;
using X509Ptr = std::unique_ptr<X509, X509Free>;
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyFree>;

// OpenSSL's reason for the last failure on this thread, and a clean queue.
std::string TakeOpenSslError() {
  const unsigned long code = ERR_peek_last_error();
  ERR_clear_error();
  const char* reason = ERR_reason_error_string(code);
  return reason != nullptr ? reason : "unknown OpenSSL error";
}

absl::Status Bad(const std::string& path, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
}

absl::StatusOr<BioPtr> OpenPem(const std::string& path, std::string* text) {
  absl::StatusOr<std::string> read = ReadFileToString(path);
  if (!read.ok()) return absl::InvalidArgumentError(read.status().message());
  *text = std::move(*read);
  return BioPtr(BIO_new_mem_buf(text->data(), static_cast<int>(text->size())));
}

// Every certificate in a PEM file, in order; an error if there is none or
// one is corrupt.
absl::StatusOr<std::vector<X509Ptr>> ReadCertificates(const std::string& path) {
  std::string text;
  absl::StatusOr<BioPtr> bio = OpenPem(path, &text);
  if (!bio.ok()) return bio.status();
  std::vector<X509Ptr> certs;
  while (X509* cert =
             PEM_read_bio_X509(bio->get(), nullptr, nullptr, nullptr)) {
    certs.emplace_back(cert);
  }
  // The loop ends on "no start line" once the file is used up; any other
  // error is a damaged certificate.
  const unsigned long end = ERR_peek_last_error();
  if (ERR_GET_LIB(end) != ERR_LIB_PEM ||
      ERR_GET_REASON(end) != PEM_R_NO_START_LINE) {
    return Bad(path, absl::StrCat("certificate ", certs.size() + 1,
                                  " cannot be parsed: ", TakeOpenSslError()));
  }
  ERR_clear_error();
  if (certs.empty()) {
    return Bad(path, "no PEM certificate (-----BEGIN CERTIFICATE-----)");
  }
  return certs;
}

// An encrypted key would make OpenSSL prompt on the terminal; refuse instead.
int NoPassphrase(char*, int, int, void*) { return -1; }

absl::StatusOr<PkeyPtr> ReadKey(const std::string& path) {
  std::string text;
  absl::StatusOr<BioPtr> bio = OpenPem(path, &text);
  if (!bio.ok()) return bio.status();
  if (text.find("PRIVATE KEY-----") == std::string::npos) {
    return Bad(path, "no PEM private key (-----BEGIN PRIVATE KEY-----)");
  }
  EVP_PKEY* key =
      PEM_read_bio_PrivateKey(bio->get(), nullptr, &NoPassphrase, nullptr);
  if (key == nullptr) {
    return Bad(path, absl::StrCat("the private key cannot be read (",
                                  TakeOpenSslError(),
                                  "); it must be unencrypted PEM"));
  }
  return PkeyPtr(key);
}

// What was written to a memory BIO.
std::string BioText(BIO* bio) {
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio, &data);
  return std::string(data, size > 0 ? static_cast<size_t>(size) : 0);
}

std::string Subject(const X509* cert) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  X509_NAME_print_ex(bio.get(), X509_get_subject_name(cert), 0,
                     XN_FLAG_RFC2253);
  return BioText(bio.get());
}

std::string Time(const ASN1_TIME* time) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  ASN1_TIME_print(bio.get(), time);
  return BioText(bio.get());
}

}  // namespace

absl::StatusOr<std::string> CheckTlsFiles(const TlsFiles& files) {
  if (!files.enabled()) {
    if (!files.key_file.empty() || !files.client_ca_file.empty()) {
      return absl::InvalidArgumentError(
          "--tls_key_file and --tls_client_ca_file need --tls_cert_file");
    }
    return std::string("plaintext (no --tls_cert_file)");
  }
  if (files.key_file.empty()) {
    return absl::InvalidArgumentError(
        "--tls_cert_file needs --tls_key_file (the certificate's private key)");
  }
  absl::StatusOr<std::vector<X509Ptr>> chain =
      ReadCertificates(files.cert_file);
  if (!chain.ok()) return chain.status();
  absl::StatusOr<PkeyPtr> key = ReadKey(files.key_file);
  if (!key.ok()) return key.status();
  X509* leaf = chain->front().get();
  if (X509_check_private_key(leaf, key->get()) != 1) {
    ERR_clear_error();
    return Bad(files.key_file,
               absl::StrCat("not the private key of the first certificate in ",
                            files.cert_file, " (", Subject(leaf), ")"));
  }
  const ASN1_TIME* not_after = X509_get0_notAfter(leaf);
  if (X509_cmp_current_time(not_after) <= 0) {
    return Bad(files.cert_file, absl::StrCat("the certificate (", Subject(leaf),
                                             ") expired on ", Time(not_after)));
  }
  std::string summary = absl::StrCat("TLS with ", Subject(leaf), " (",
                                     files.cert_file, ", valid until ",
                                     Time(not_after), ")");
  if (files.client_ca_file.empty()) {
    absl::StrAppend(&summary, "; clients are not asked for certificates");
    return summary;
  }
  absl::StatusOr<std::vector<X509Ptr>> cas =
      ReadCertificates(files.client_ca_file);
  if (!cas.ok()) return cas.status();
  absl::StrAppend(&summary, "; mTLS: clients need a certificate from ",
                  cas->size(), " CA(s) in ", files.client_ca_file);
  return summary;
}

std::shared_ptr<grpc::ServerCredentials> MakeServerCredentials(
    const TlsFiles& files, std::chrono::seconds reload_interval) {
  if (!files.enabled()) return grpc::InsecureServerCredentials();
  const unsigned int interval_s =
      static_cast<unsigned int>(std::max<int64_t>(1, reload_interval.count()));
  auto provider =
      std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
          files.key_file, files.cert_file, files.client_ca_file, interval_s);
  grpc::experimental::TlsServerCredentialsOptions options(provider);
  options.watch_identity_key_cert_pairs();
  if (files.client_ca_file.empty()) {
    options.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  } else {
    options.watch_root_certs();
    options.set_cert_request_type(
        GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  }
  return grpc::experimental::TlsServerCredentials(options);
}

}  // namespace furrballs::service
