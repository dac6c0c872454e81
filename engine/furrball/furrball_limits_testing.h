// engine/furrball/furrball_limits_testing.h: what the tests of the entry
// format's limits share (furrball_limits_test, furrball_limits_spill_test):
// the longest keys and a cache of the largest pages.
//
// Thread safety: pure functions.
#ifndef FURRBALLS_ENGINE_FURRBALL_FURRBALL_LIMITS_TESTING_H_
#define FURRBALLS_ENGINE_FURRBALL_FURRBALL_LIMITS_TESTING_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "engine/furrball/chunked_value.h"
#include "engine/furrball/entry.h"
#include "engine/furrball/furrball.h"
#include "engine/furrball/page_pool.h"

namespace furrballs {
namespace furrball_internal {

// A key of the largest size the header holds, distinct per `i` in its first
// and last bytes (a walker hashes all of it).
inline std::string LongestKey(int i) {
  std::string k(kMaxPayloadKeyBytes, '\0');
  for (size_t j = 0; j < k.size(); ++j) k[j] = static_cast<char>('a' + j % 23);
  const std::string tag = "key" + std::to_string(i) + ":";
  k.replace(0, tag.size(), tag);
  k.replace(k.size() - tag.size(), tag.size(), tag);
  return k;
}

// One node of `pages` pages of `page_size` bytes (the largest by default),
// keys of the largest size.
inline FurrBallOptions LongKeyPages(uint64_t pages,
                                    uint32_t page_size = kMaxPageSize) {
  FurrBallOptions o;
  o.node_count = 1;
  o.simulate_topology = true;
  o.page_size_bytes = page_size;
  o.memory_budget_bytes = pages * page_size;
  o.max_key_bytes = kMaxPayloadKeyBytes;
  o.max_value_bytes = 3 * MaxWholeEntryBytes(page_size);
  return o;
}

// The value size whose entry under LongestKey is exactly the largest one
// that is not chunked (chunked_value.h: an eighth of the page).
inline size_t LargestWholeValue(uint32_t page_size = kMaxPageSize) {
  return MaxWholeEntryBytes(page_size) - kEntryHeaderBytes -
         kMaxPayloadKeyBytes;
}

}  // namespace furrball_internal
}  // namespace furrballs

#endif  // FURRBALLS_ENGINE_FURRBALL_FURRBALL_LIMITS_TESTING_H_
