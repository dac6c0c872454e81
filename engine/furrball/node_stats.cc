#include "engine/furrball/node_stats.h"

namespace furrballs {
namespace furrball_internal {

size_t ThisThreadStatShard() {
  // Relaxed: the index only has to differ between threads, it orders nothing.
  static std::atomic<size_t> next_index{0};
  thread_local const size_t index =
      next_index.fetch_add(1, std::memory_order_relaxed);
  return index;
}

}  // namespace furrball_internal
}  // namespace furrballs
