// service/tls_credentials.h: the gRPC port's TLS and mTLS credentials from PEM
// files (--tls_cert_file, --tls_key_file, --tls_client_ca_file), re-read
// while serving.
//
// Thread safety: pure functions; the credentials they return are gRPC's and
// thread-safe.
//
// Rotation. The credentials use gRPC's FileWatcherCertificateProvider, which
// re-reads the three files every `reload_interval` and hands new contents to
// connections that start afterwards (established connections keep the
// certificate they were set up with). Kubernetes updates a mounted Secret by
// swapping a symlink, so both files change at once; outside Kubernetes,
// replace them by rename, key first. A file that cannot be read during a
// reload makes new handshakes fail until it can (gRPC's provider behaves so);
// a bad file at start-up is refused by CheckTlsFiles before anything listens.
#ifndef FURRBALLS_SERVICE_TLS_CREDENTIALS_H_
#define FURRBALLS_SERVICE_TLS_CREDENTIALS_H_

#include <chrono>
#include <memory>
#include <string>

#include <absl/status/statusor.h>
#include <grpcpp/security/server_credentials.h>

namespace furrballs::service {

struct TlsFiles {
  // PEM certificate chain, leaf first. Empty: plaintext (and the other two
  // must be empty too).
  std::string cert_file;
  // PEM private key of the leaf certificate, unencrypted.
  std::string key_file;
  // PEM bundle of the CAs whose client certificates are accepted. Non-empty
  // turns on mTLS: a client without a certificate signed by one of them
  // fails the handshake.
  std::string client_ca_file;

  bool enabled() const { return !cert_file.empty(); }
};

// Checks at start-up what gRPC would otherwise find only at the first
// handshake: the files are set consistently, can be read, hold PEM
// certificates and an unencrypted key, the key belongs to the leaf
// certificate, and the leaf has not expired. Returns a one-line summary for
// the start-up line (subject, expiry, mTLS), or INVALID_ARGUMENT naming the
// file and what is wrong with it.
absl::StatusOr<std::string> CheckTlsFiles(const TlsFiles& files);

// Plaintext credentials when !files.enabled(); otherwise TLS (and mTLS with
// a client CA) from the files, re-read every `reload_interval` (at least
// 1 s: gRPC's provider raises anything shorter to that).
std::shared_ptr<grpc::ServerCredentials> MakeServerCredentials(
    const TlsFiles& files, std::chrono::seconds reload_interval);

}  // namespace furrballs::service

#endif  // FURRBALLS_SERVICE_TLS_CREDENTIALS_H_
