// engine/furrball/self_validating_values_testing.h: values that carry their
// key id, their writer's sequence number, their length and a checksum, so
// that a reader detects a torn read (bytes of two writes), a foreign value
// (another key's bytes) or bytes of a recycled page; for the engine's stress
// tests.
//
// Thread safety: pure functions.
#ifndef FURRBALLS_ENGINE_FURRBALL_SELF_VALIDATING_VALUES_TESTING_H_
#define FURRBALLS_ENGINE_FURRBALL_SELF_VALIDATING_VALUES_TESTING_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include "engine/common/hash_pair.h"  // XXH3 (xxhash.h, inlined)

namespace furrballs {
namespace furrball_testing {

inline constexpr size_t kHeader = 8 + 8 + 4;  // key id, writer sequence, length
inline constexpr size_t kChecksum = 8;

inline uint64_t SplitMix(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// [key id | sequence | length | payload from (key, sequence) | checksum]
inline std::string MakeValue(uint64_t key_id, uint64_t seq, size_t size) {
  size = std::max(size, kHeader + kChecksum);
  std::string v(size, '\0');
  const uint32_t len = static_cast<uint32_t>(size);
  std::memcpy(v.data(), &key_id, 8);
  std::memcpy(v.data() + 8, &seq, 8);
  std::memcpy(v.data() + 16, &len, 4);
  uint64_t state = key_id * 1000003 + seq;
  for (size_t i = kHeader; i < size - kChecksum; ++i) {
    v[i] = static_cast<char>(SplitMix(state));
  }
  const uint64_t sum = XXH3_64bits(v.data(), size - kChecksum);
  std::memcpy(v.data() + size - kChecksum, &sum, 8);
  return v;
}

// "" if `v` is a whole, uncorrupted value of `key_id`; else what is wrong.
inline std::string Check(const std::string& v, uint64_t key_id, uint64_t* seq) {
  if (v.size() < kHeader + kChecksum) return "too short";
  uint64_t id, s, sum;
  uint32_t len;
  std::memcpy(&id, v.data(), 8);
  std::memcpy(&s, v.data() + 8, 8);
  std::memcpy(&len, v.data() + 16, 4);
  std::memcpy(&sum, v.data() + v.size() - kChecksum, 8);
  if (len != v.size()) return "length field disagrees with the size";
  if (sum != XXH3_64bits(v.data(), v.size() - kChecksum)) return "torn: checksum";
  if (id != key_id) return "foreign value (another key's bytes)";
  *seq = s;
  return "";
}

}  // namespace furrball_testing
}  // namespace furrballs

#endif  // FURRBALLS_ENGINE_FURRBALL_SELF_VALIDATING_VALUES_TESTING_H_
