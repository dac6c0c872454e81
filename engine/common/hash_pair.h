// engine/common/hash_pair.h: the 128-bit key identity (report §2.7.3, §3.8).
//
// Thread safety: HashPair is a plain value. KeyHasher is immutable after
// construction and safe to share between threads.
//
// Furrballs never stores key strings. A key is identified by one keyed
// XXH3-128 hash: H1 (the high 64 bits) selects the probe group, H2 (the low 64
// bits) is the fingerprint stored in the slot, and the top 7 bits of H2 are the
// control byte used for SIMD pre-filtering. Two distinct keys collide only
// with probability ~2^-64 per pair; a collision behaves like a miss or an
// overwrite of an unrelated key, which a cache tolerates.
//
// The hash is keyed with a per-deployment secret so that a client cannot
// choose keys that collide (hash flooding). The secret is persisted beside the
// spill store so that a restart keeps the same identities.
#ifndef FURRBALLS_ENGINE_COMMON_HASH_PAIR_H_
#define FURRBALLS_ENGINE_COMMON_HASH_PAIR_H_

#include <array>
#include <cstdint>
#include <cstring>
#include <string_view>

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace furrballs {

struct HashPair {
  uint64_t h1 = 0;  // group selector
  uint64_t h2 = 0;  // fingerprint

  friend bool operator==(const HashPair&, const HashPair&) = default;
};
static_assert(sizeof(HashPair) == 16,
              "HashPair is copied into fixed 16-byte PromoteBuf and PageBlob "
              "entries");

// The secret's size: XXH3 requires at least XXH3_SECRET_SIZE_MIN (136) bytes;
// 192 is the size of XXH3's own default secret.
inline constexpr size_t kHashSecretSize = 192;
using HashSecret = std::array<uint8_t, kHashSecretSize>;

class KeyHasher {
 public:
  // A hasher with a secret derived from `seed`. Seed 0 is the fixed secret
  // used by tests and benchmarks that need reproducible hashes.
  explicit KeyHasher(uint64_t seed = 0) {
    XXH3_generateSecret_fromSeed(secret_.data(), seed);
  }

  // A hasher with an explicit secret, e.g. one restored from the data
  // directory so that a restarted server computes the same identities.
  explicit KeyHasher(const HashSecret& secret) : secret_(secret) {}

  HashPair Hash(std::string_view key) const {
    const XXH128_hash_t h = XXH3_128bits_withSecret(
        key.data(), key.size(), secret_.data(), secret_.size());
    return HashPair{h.high64, h.low64};
  }

  const HashSecret& secret() const { return secret_; }

 private:
  HashSecret secret_;
};

}  // namespace furrballs

#endif  // FURRBALLS_ENGINE_COMMON_HASH_PAIR_H_
