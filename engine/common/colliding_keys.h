// engine/common/colliding_keys.h: 256 key identities that collide on
// purpose, for the fuzz targets of the hash-keyed structures (CMap, the ARC
// index): a fuzzer picks a key by its number, and keys with nearby numbers
// share a home group and often a control byte.
//
// Thread safety: pure functions.
//
// Key k has h1 = k / 32 (8 home groups; 32 keys compete for each, twice a
// group's 16 slots, so probes overflow into the next groups) and an h2
// whose top 7 bits (CMap's control byte) take only 3 values, while its low
// bits hold k + 1: the full 64-bit fingerprint, which is what identifies a
// key, still differs between keys, and is never 0.
#ifndef FURRBALLS_ENGINE_COMMON_COLLIDING_KEYS_H_
#define FURRBALLS_ENGINE_COMMON_COLLIDING_KEYS_H_

#include <cstdint>

#include "engine/common/hash_pair.h"

namespace furrballs {

inline HashPair CollidingKey(uint8_t k) {
  return HashPair{uint64_t{k} / 32,
                  (uint64_t{k} % 3) << 57 | (uint64_t{k} + 1)};
}

// The k of CollidingKey(k).
inline uint8_t CollidingKeyNumber(const HashPair& h) {
  return static_cast<uint8_t>((h.h2 & 0x1ff) - 1);
}

}  // namespace furrballs

#endif  // FURRBALLS_ENGINE_COMMON_COLLIDING_KEYS_H_
