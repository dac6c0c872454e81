// engine/common/hash_secret_file.h: where the keyed hash's secret comes from
// when no seed is configured: a random secret from the kernel, kept in a
// file in the data directory so that a restarted server computes the same
// key identities and finds its spilled pages again (docs/spill.md).
//
// Thread safety: the functions are thread-safe; LoadOrCreateHashSecret may
// even race with another process on the same directory (the first file
// linked into place wins, and both return its secret).
//
// File format (kHashSecretFileBytes = 208, little-endian):
//   u32 magic "FBHS", u32 version 1
//   the 192-byte secret
//   u64 checksum: XXH3-64 of the 200 bytes before it
// written to a temporary file with mode 0600, synced, then hard-linked to
// its name (which fails if another writer got there first) and the
// directory synced: the file is whole or absent, never half written, and
// readable by its owner only.
#ifndef FURRBALLS_ENGINE_COMMON_HASH_SECRET_FILE_H_
#define FURRBALLS_ENGINE_COMMON_HASH_SECRET_FILE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <absl/status/statusor.h>

#include "engine/common/hash_pair.h"

namespace furrballs {

inline constexpr uint32_t kHashSecretFileMagic = 0x53484246;  // "FBHS"
inline constexpr uint32_t kHashSecretFileVersion = 1;
inline constexpr size_t kHashSecretFileBytes = 8 + kHashSecretSize + 8;
// The file's name inside the data directory.
inline constexpr char kHashSecretFileName[] = "hash_secret";

// kHashSecretSize bytes from getrandom(2). Unavailable if the kernel
// cannot supply them.
absl::StatusOr<HashSecret> RandomHashSecret();

std::string EncodeHashSecretFile(const HashSecret& secret);
// DataLoss for a file of the wrong size, magic or checksum; Unimplemented
// for another format version.
absl::StatusOr<HashSecret> DecodeHashSecretFile(std::string_view bytes);

struct LoadedHashSecret {
  HashSecret secret{};
  enum class Origin {
    kLoaded,    // read from the file
    kCreated,   // no file: a new random secret, now in the file
    kReplaced,  // the file did not decode: a new random secret replaced it
  } origin = Origin::kLoaded;
  std::string path;
  std::string note;  // kReplaced: why the old file was refused
};

// The secret in `dir`/hash_secret, creating `dir` and the file (with a new
// random secret) if missing. A file that does not decode is replaced by a
// new random secret: what was indexed under the old one cannot be found
// again anyway, and a cache that starts cold beats one that does not start
// (the caller reports it). Errors: the directory or file cannot be created,
// read or written (the status names the path and errno).
absl::StatusOr<LoadedHashSecret> LoadOrCreateHashSecret(const std::string& dir);

// A 64-bit fingerprint of a secret (XXH3-64 of it), to tell in logs whether
// two runs used the same secret without showing it.
uint64_t HashSecretFingerprint(const HashSecret& secret);

}  // namespace furrballs

#endif  // FURRBALLS_ENGINE_COMMON_HASH_SECRET_FILE_H_
