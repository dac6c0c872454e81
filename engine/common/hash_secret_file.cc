#include "engine/common/hash_secret_file.h"

#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <system_error>

#include <absl/status/status.h>
#include <absl/strings/str_cat.h>
#include <xxhash.h>

#include "engine/common/byte_codec.h"

namespace furrballs {
namespace {

absl::Status Errno(int err, const char* what, const std::string& path) {
  return absl::ErrnoToStatus(err, absl::StrCat(what, " ", path));
}

// The whole file (up to one byte more than a valid one); NotFound if absent.
absl::StatusOr<std::string> ReadSmallFile(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Errno(errno, "cannot open", path);
  std::string bytes(kHashSecretFileBytes + 1, '\0');
  size_t got = 0;
  while (got < bytes.size()) {
    const ssize_t n = read(fd, bytes.data() + got, bytes.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      close(fd);
      return Errno(err, "cannot read", path);
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  close(fd);
  bytes.resize(got);
  return bytes;
}

absl::Status WriteAll(int fd, std::string_view bytes, const std::string& path) {
  while (!bytes.empty()) {
    const ssize_t n = write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Errno(errno, "cannot write", path);
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

absl::Status SyncDir(const std::string& dir) {
  const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Errno(errno, "cannot open directory", dir);
  const int rc = fsync(fd);
  const int err = errno;
  close(fd);
  return rc == 0 ? absl::OkStatus() : Errno(err, "cannot sync directory", dir);
}

// Writes `secret` to `path` through a synced temporary file. `replace`:
// renamed over whatever is there; otherwise hard-linked into place, and
// AlreadyExists if another writer's file got there first.
absl::Status WriteSecretFile(const std::string& dir, const std::string& path,
                             const HashSecret& secret, bool replace) {
  const std::string tmp = absl::StrCat(path, ".tmp.", getpid());
  unlink(tmp.c_str());  // a leftover of a crash of a process with our pid
  const int fd =
      open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return Errno(errno, "cannot create", tmp);
  absl::Status s = WriteAll(fd, EncodeHashSecretFile(secret), tmp);
  if (s.ok() && fsync(fd) != 0) s = Errno(errno, "cannot sync", tmp);
  close(fd);
  if (s.ok()) {
    if (replace) {
      if (rename(tmp.c_str(), path.c_str()) != 0) {
        s = Errno(errno, "cannot rename to", path);
      }
    } else if (link(tmp.c_str(), path.c_str()) != 0) {
      s = errno == EEXIST
              ? absl::AlreadyExistsError(path)
              : Errno(errno, "cannot link", path);
    }
  }
  unlink(tmp.c_str());  // after a rename: already gone
  if (!s.ok()) return s;
  return SyncDir(dir);
}

}  // namespace

absl::StatusOr<HashSecret> RandomHashSecret() {
  HashSecret secret;
  size_t got = 0;
  while (got < secret.size()) {
    const ssize_t n = getrandom(secret.data() + got, secret.size() - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return absl::ErrnoToStatus(errno, "getrandom for the hash secret");
    }
    got += static_cast<size_t>(n);
  }
  return secret;
}

std::string EncodeHashSecretFile(const HashSecret& secret) {
  std::string out;
  AppendLe<uint32_t>(out, kHashSecretFileMagic);
  AppendLe<uint32_t>(out, kHashSecretFileVersion);
  out.append(reinterpret_cast<const char*>(secret.data()), secret.size());
  AppendLe<uint64_t>(out, XXH3_64bits(out.data(), out.size()));
  return out;
}

absl::StatusOr<HashSecret> DecodeHashSecretFile(std::string_view bytes) {
  if (bytes.size() != kHashSecretFileBytes) {
    return absl::DataLossError(absl::StrCat("hash secret file of ",
                                            bytes.size(), " bytes, expected ",
                                            kHashSecretFileBytes));
  }
  ByteReader r(bytes);
  uint32_t magic = 0, version = 0;
  uint64_t sum = 0;
  HashSecret secret;
  // The size check above leaves enough bytes for every read.
  r.Read(&magic);
  r.Read(&version);
  r.Bytes(secret.data(), secret.size());
  r.Read(&sum);
  if (magic != kHashSecretFileMagic) {
    return absl::DataLossError("not a hash secret file (bad magic)");
  }
  if (version != kHashSecretFileVersion) {
    return absl::UnimplementedError(
        absl::StrCat("hash secret file format version ", version,
                     " (this build reads ", kHashSecretFileVersion, ")"));
  }
  if (sum != XXH3_64bits(bytes.data(), bytes.size() - sizeof(sum))) {
    return absl::DataLossError("hash secret file checksum mismatch");
  }
  return secret;
}

absl::StatusOr<LoadedHashSecret> LoadOrCreateHashSecret(
    const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Errno(ec.value(), "cannot create directory", dir);
  LoadedHashSecret out;
  out.path = (std::filesystem::path(dir) / kHashSecretFileName).string();
  // Twice at most: if another process links its file first, read that one.
  for (int attempt = 0; attempt < 2; ++attempt) {
    absl::StatusOr<std::string> bytes = ReadSmallFile(out.path);
    if (bytes.ok()) {
      absl::StatusOr<HashSecret> decoded = DecodeHashSecretFile(*bytes);
      if (decoded.ok()) {
        out.secret = *decoded;
        out.origin = LoadedHashSecret::Origin::kLoaded;
        return out;
      }
      absl::StatusOr<HashSecret> fresh = RandomHashSecret();
      if (!fresh.ok()) return fresh.status();
      absl::Status written =
          WriteSecretFile(dir, out.path, *fresh, /*replace=*/true);
      if (!written.ok()) return written;
      out.secret = *fresh;
      out.origin = LoadedHashSecret::Origin::kReplaced;
      out.note = std::string(decoded.status().message());
      return out;
    }
    if (!absl::IsNotFound(bytes.status())) return bytes.status();
    absl::StatusOr<HashSecret> fresh = RandomHashSecret();
    if (!fresh.ok()) return fresh.status();
    absl::Status written =
        WriteSecretFile(dir, out.path, *fresh, /*replace=*/false);
    if (written.ok()) {
      out.secret = *fresh;
      out.origin = LoadedHashSecret::Origin::kCreated;
      return out;
    }
    if (!absl::IsAlreadyExists(written)) return written;
  }
  return absl::AbortedError(absl::StrCat(
      out.path, " was created and removed again while being read"));
}

uint64_t HashSecretFingerprint(const HashSecret& secret) {
  return XXH3_64bits(secret.data(), secret.size());
}

}  // namespace furrballs
