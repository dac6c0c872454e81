#include "service/token_auth.h"

#include <openssl/evp.h>

#include <cstdio>
#include <mutex>
#include <utility>
#include <vector>

#include <absl/strings/ascii.h>
#include <absl/strings/match.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_split.h>

#include "engine/common/read_file.h"

namespace furrballs::service {
namespace {

using grpc::Status;
using grpc::StatusCode;

constexpr absl::string_view kReadOnly = "read-only";
constexpr absl::string_view kReadWrite = "read-write";

// RFC 6750's b64token: 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" /
// "/" ) *"=".
bool IsB64Token(absl::string_view token) {
  size_t i = 0;
  while (i < token.size() &&
         (absl::ascii_isalnum(static_cast<unsigned char>(token[i])) ||
          absl::string_view("-._~+/").find(token[i]) !=
              absl::string_view::npos)) {
    ++i;
  }
  if (i == 0) return false;
  while (i < token.size() && token[i] == '=') ++i;
  return i == token.size();
}

}  // namespace

TokenDigest DigestToken(absl::string_view token) {
  // Fetched once: EVP_sha256() makes OpenSSL 3 look the algorithm up on
  // every digest, which took 580-720 ns per short token here against
  // 150-240 ns with the fetched one.
  static EVP_MD* const sha256 = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  TokenDigest digest{};
  unsigned int length = 0;
  EVP_Digest(token.data(), token.size(), digest.data(), &length, sha256,
             nullptr);
  return digest;
}

absl::StatusOr<TokenTable> ParseTokenFile(absl::string_view text,
                                          absl::string_view path) {
  TokenTable table;
  absl::flat_hash_map<TokenDigest, int> line_of;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    // No token contains '#' (b64token), so a comment starts at the first.
    line = line.substr(0, line.find('#'));
    std::vector<absl::string_view> fields =
        absl::StrSplit(line, absl::ByAnyChar(" \t\r"), absl::SkipEmpty());
    if (fields.empty()) continue;
    const std::string where = absl::StrCat(path, " line ", line_number);
    if (fields.size() != 2) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": expected \"<role> <token>\" (role read-only or "
                 "read-write), found ", fields.size(), " field(s)"));
    }
    Role role;
    if (fields[0] == kReadOnly) {
      role = Role::kReadOnly;
    } else if (fields[0] == kReadWrite) {
      role = Role::kReadWrite;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": unknown role \"", fields[0],
                       "\"; expected read-only or read-write"));
    }
    const absl::string_view token = fields[1];
    if (!IsB64Token(token)) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": the token has characters a bearer token cannot carry "
                 "(letters, digits, \"-._~+/\" and trailing \"=\" only)"));
    }
    if (token.size() < kMinTokenLength) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": the token has ", token.size(),
          " characters; use at least ", kMinTokenLength,
          " (e.g. `openssl rand -hex 32`)"));
    }
    const TokenDigest digest = DigestToken(token);
    if (auto [it, added] = line_of.emplace(digest, line_number); !added) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": the same token as line ", it->second));
    }
    table.roles.emplace(digest, role);
    ++(role == Role::kReadOnly ? table.read_only : table.read_write);
  }
  if (table.roles.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": no tokens (expected lines \"<role> <token>\"); with no "
              "token no client could call"));
  }
  return table;
}

std::optional<TokenDigest> PresentedToken(
    const grpc::ServerContextBase& context) {
  const auto& metadata = context.client_metadata();
  const auto it = metadata.find("authorization");
  if (it == metadata.end()) return std::nullopt;
  const absl::string_view value(it->second.data(), it->second.size());
  constexpr absl::string_view kScheme = "bearer ";
  if (value.size() <= kScheme.size() ||
      !absl::EqualsIgnoreCase(value.substr(0, kScheme.size()), kScheme)) {
    return std::nullopt;
  }
  return DigestToken(absl::StripAsciiWhitespace(value.substr(kScheme.size())));
}

absl::StatusOr<std::unique_ptr<TokenAuthenticator>> TokenAuthenticator::Open(
    std::string path, std::chrono::milliseconds reload_interval) {
  absl::StatusOr<std::string> text = ReadFileToString(path);
  if (!text.ok()) return text.status();
  absl::StatusOr<TokenTable> table = ParseTokenFile(*text, path);
  if (!table.ok()) return table.status();
  return std::unique_ptr<TokenAuthenticator>(
      new TokenAuthenticator(std::move(path), std::move(*text),
                             std::move(*table), reload_interval));
}

TokenAuthenticator::TokenAuthenticator(
    std::string path, std::string text, TokenTable table,
    std::chrono::milliseconds reload_interval)
    : path_(std::move(path)),
      reload_interval_(reload_interval),
      table_(std::move(table)),
      last_text_(std::move(text)) {
  reloader_ = std::thread([this] { ReloadLoop(); });
}

TokenAuthenticator::~TokenAuthenticator() {
  {
    MutexLock lock(&stop_mu_);
    stop_ = true;
    stop_cv_.SignalAll();
  }
  reloader_.join();
}

void TokenAuthenticator::ReloadLoop() {
  for (;;) {
    {
      MutexLock lock(&stop_mu_);
      const auto until = CondVar::Clock::now() + reload_interval_;
      while (!stop_ && CondVar::Clock::now() < until) {
        stop_cv_.WaitUntil(&stop_mu_, until);
      }
      if (stop_) return;
    }
    absl::StatusOr<std::string> text = ReadFileToString(path_);
    if (!text.ok()) {
      // Reported once, until the file can be read again.
      if (!unreadable_) {
        failed_reloads_.fetch_add(1, std::memory_order_relaxed);
        std::fprintf(stderr,
                     "furrballs: auth: %s; keeping the previous tokens\n",
                     std::string(text.status().message()).c_str());
      }
      unreadable_ = true;
      continue;
    }
    unreadable_ = false;
    if (*text == last_text_) continue;
    // A file that does not parse is reported once per change, not per poll.
    last_text_ = std::move(*text);
    absl::StatusOr<TokenTable> table = ParseTokenFile(last_text_, path_);
    if (!table.ok()) {
      failed_reloads_.fetch_add(1, std::memory_order_relaxed);
      std::fprintf(stderr,
                   "furrballs: auth: %s; keeping the previous tokens\n",
                   std::string(table.status().message()).c_str());
      continue;
    }
    const size_t read_only = table->read_only;
    const size_t read_write = table->read_write;
    {
      std::unique_lock<std::shared_mutex> lock(table_mu_);
      table_ = std::move(*table);
    }
    std::fprintf(stderr,
                 "furrballs: auth: reloaded %s: %zu read-write, %zu read-only "
                 "token(s)\n",
                 path_.c_str(), read_write, read_only);
  }
}

Status TokenAuthenticator::Authorize(const std::optional<TokenDigest>& token,
                                     Access need,
                                     absl::string_view what) const {
  if (!token.has_value()) {
    return Status(StatusCode::UNAUTHENTICATED,
                  absl::StrCat(what, ": no bearer token; this server needs "
                                     "\"authorization: Bearer <token>\" "
                                     "metadata on every call"));
  }
  std::optional<Role> role;
  {
    std::shared_lock<std::shared_mutex> lock(table_mu_);
    if (const auto it = table_.roles.find(*token); it != table_.roles.end()) {
      role = it->second;
    }
  }
  if (!role.has_value()) {
    return Status(StatusCode::UNAUTHENTICATED,
                  absl::StrCat(what, ": unknown bearer token"));
  }
  if (need == Access::kWrite && *role == Role::kReadOnly) {
    return Status(StatusCode::PERMISSION_DENIED,
                  absl::StrCat(what, ": the token is read-only; writes need "
                                     "a read-write token"));
  }
  return Status::OK;
}

size_t TokenAuthenticator::read_only_tokens() const {
  std::shared_lock<std::shared_mutex> lock(table_mu_);
  return table_.read_only;
}

size_t TokenAuthenticator::read_write_tokens() const {
  std::shared_lock<std::shared_mutex> lock(table_mu_);
  return table_.read_write;
}

}  // namespace furrballs::service
