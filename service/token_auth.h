// service/token_auth.h: bearer-token authentication and authorization of
// furrballs.v1.Cache calls (--auth_token_file), with the token file re-read
// while serving.
//
// Thread safety: thread-safe. Authorize() runs on gRPC threads, concurrently
// with the reload thread that swaps in a new token table.
//
// The token file. One token per line, its role first:
//
//   # Lines starting with '#' and text after '#' are comments.
//   read-write  3f8a0c...   # the web tier
//   read-only   91bb7e...   # dashboards
//
// A token is an RFC 6750 b64token (letters, digits, "-._~+/", then any
// "="s) of at least kMinTokenLength characters: `openssl rand -hex 32` makes
// a good one. A read-only token may call Get, MultiGet, Stats and the Gets of
// a Pipeline; a read-write token may call everything. Duplicate tokens, an
// unknown role and a file without any token are errors.
//
// Clients send "authorization: Bearer <token>" with every call. A call
// without it, or with a token the file does not list, is answered
// UNAUTHENTICATED; a write with a read-only token PERMISSION_DENIED. Health
// (gRPC's) and reflection (service/reflection.h) are services of their own
// and stay open.
//
// Tokens are kept only as SHA-256 digests and looked up by digest, so the
// time a lookup takes tells a caller nothing about the stored tokens (a
// string comparison with a real token would stop at the first differing
// byte).
//
// Reloading. A thread reads the file every `reload_interval` and, when its
// bytes changed, parses it and swaps the table in; calls that start after
// the swap use the new table, including the next op of an open Pipeline
// (each op is checked). A file that no longer parses, or cannot be read, is
// reported on stderr and the previous table stays in force, so a half-edited
// file locks nobody out (nor lets anybody in).
#ifndef FURRBALLS_SERVICE_TOKEN_AUTH_H_
#define FURRBALLS_SERVICE_TOKEN_AUTH_H_

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <string>
#include <thread>

#include <absl/base/thread_annotations.h>
#include <absl/container/flat_hash_map.h>
#include <absl/status/statusor.h>
#include <absl/strings/string_view.h>
#include <grpcpp/server_context.h>
#include <grpcpp/support/status.h>

#include "engine/common/sync.h"

namespace furrballs::service {

enum class Role : uint8_t { kReadOnly, kReadWrite };

// What a call needs from its token.
enum class Access : uint8_t { kRead, kWrite };

inline constexpr size_t kMinTokenLength = 16;

using TokenDigest = std::array<uint8_t, 32>;  // SHA-256

// SHA-256 of `token`.
TokenDigest DigestToken(absl::string_view token);

// The digests of a parsed token file and their roles.
struct TokenTable {
  absl::flat_hash_map<TokenDigest, Role> roles;
  size_t read_only = 0;
  size_t read_write = 0;
};

// Parses the token file format above. Errors name `path` and the line.
absl::StatusOr<TokenTable> ParseTokenFile(absl::string_view text,
                                          absl::string_view path);

// The token a call presents: the digest of <token> in its
// "authorization: Bearer <token>" metadata (the scheme is matched without
// regard to case), or nullopt when there is no such metadata.
std::optional<TokenDigest> PresentedToken(
    const grpc::ServerContextBase& context);

class TokenAuthenticator {
 public:
  // Reads and parses `path` (failing with the reason, naming the file and
  // line) and starts the reload thread.
  static absl::StatusOr<std::unique_ptr<TokenAuthenticator>> Open(
      std::string path, std::chrono::milliseconds reload_interval);

  // Stops the reload thread.
  ~TokenAuthenticator();
  TokenAuthenticator(const TokenAuthenticator&) = delete;
  TokenAuthenticator& operator=(const TokenAuthenticator&) = delete;

  // OK if `token` is listed with a role that grants `need`; otherwise
  // UNAUTHENTICATED (none or unknown) or PERMISSION_DENIED (a write with a
  // read-only token), with a message naming `what` (the method).
  grpc::Status Authorize(const std::optional<TokenDigest>& token, Access need,
                         absl::string_view what) const;

  const std::string& path() const { return path_; }
  // Tokens of the table in force (for the start-up line and tests).
  size_t read_only_tokens() const;
  size_t read_write_tokens() const;
  // Reloads that kept the previous table because the file could not be read
  // or parsed (each bad version of the file counts once).
  uint64_t failed_reloads() const {
    return failed_reloads_.load(std::memory_order_relaxed);
  }

 private:
  TokenAuthenticator(std::string path, std::string text, TokenTable table,
                     std::chrono::milliseconds reload_interval);
  void ReloadLoop();

  const std::string path_;
  const std::chrono::milliseconds reload_interval_;

  // Guards table_: readers (every call) share it, the reload thread takes it
  // exclusively to swap the table. A std::shared_mutex (pthread rwlock) so
  // that TSAN sees it; it carries no capability annotation, hence no
  // ABSL_GUARDED_BY below.
  mutable std::shared_mutex table_mu_;
  TokenTable table_;

  // Only the reload thread touches these: the file's bytes when last read,
  // and whether the last attempt could not read it.
  std::string last_text_;
  bool unreadable_ = false;
  std::atomic<uint64_t> failed_reloads_{0};

  Mutex stop_mu_;
  CondVar stop_cv_;
  bool stop_ ABSL_GUARDED_BY(stop_mu_) = false;
  std::thread reloader_;
};

}  // namespace furrballs::service

#endif  // FURRBALLS_SERVICE_TOKEN_AUTH_H_
