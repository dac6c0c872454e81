// engine/common/hash_secret_file_fuzz.cc: libFuzzer target for
// DecodeHashSecretFile, the decoder of the hash secret file read from the
// data directory at start-up (docs/fuzzing.md).
//
// Thread safety: single-threaded, as libFuzzer calls it.
//
// Input: one flag byte, then the file. Flag bit 0 set: the trailing
// checksum is recomputed first, so that mutations reach the checks behind
// it. Check: a file that decodes encodes back to exactly the same bytes.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <xxhash.h>

#include "engine/common/hash_secret_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  if ((data[0] & 1) != 0 && bytes.size() >= sizeof(uint64_t)) {
    const size_t body = bytes.size() - sizeof(uint64_t);
    const uint64_t sum = XXH3_64bits(bytes.data(), body);
    std::memcpy(bytes.data() + body, &sum, sizeof(sum));
  }
  absl::StatusOr<furrballs::HashSecret> secret =
      furrballs::DecodeHashSecretFile(bytes);
  if (secret.ok() && furrballs::EncodeHashSecretFile(*secret) != bytes) {
    std::fprintf(stderr, "hash_secret_file_fuzz: no round trip\n");
    std::abort();
  }
  return 0;
}
