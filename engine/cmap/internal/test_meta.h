// engine/cmap/internal/test_meta.h: what engine/cmap's tests and fuzz
// targets share: a mixing function and a self-validating 20-byte value
// shaped like the engine's KeyMeta.
//
// Thread safety: pure functions and plain values.
#ifndef FURRBALLS_ENGINE_CMAP_INTERNAL_TEST_META_H_
#define FURRBALLS_ENGINE_CMAP_INTERNAL_TEST_META_H_

#include <cstdint>

namespace furrballs::cmap_internal {

// splitmix64's finalizer: spreads consecutive numbers over 64 bits.
inline uint64_t Mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9;
  x ^= x >> 27;
  x *= 0x94d049bb133111eb;
  return x ^ (x >> 31);
}

// 20 bytes, as KeyMeta, so a CMap slot keeps its last 4 in the seq word's
// high half (slot.h, "The tail"). Every word depends on (id, version), so a
// torn copy or another key's value fails IsWholeFor.
struct TestMeta {
  uint32_t id;
  uint32_t version;
  uint32_t more[2];
  uint32_t check;
};
static_assert(sizeof(TestMeta) == 20);

inline TestMeta MakeTestMeta(uint32_t id, uint32_t version) {
  return TestMeta{id,
                  version,
                  {~id, ~version},
                  static_cast<uint32_t>(Mix((uint64_t{id} << 32) | version))};
}

// Whether m is a whole value of key `id` (any version).
inline bool IsWholeFor(const TestMeta& m, uint32_t id) {
  const TestMeta expected = MakeTestMeta(id, m.version);
  return m.id == id && m.more[0] == expected.more[0] &&
         m.more[1] == expected.more[1] && m.check == expected.check;
}

}  // namespace furrballs::cmap_internal

#endif  // FURRBALLS_ENGINE_CMAP_INTERNAL_TEST_META_H_
