#include "engine/furrball/node_stats.h"

#include <bit>

namespace furrballs {
namespace furrball_internal {
namespace stats_internal {

thread_local constinit StatShardClaim this_thread_claim;

namespace {

constexpr uint32_t kOwnedMask =
    NodeStats::kExclusiveShards == 32
        ? ~uint32_t{0}
        : (uint32_t{1} << NodeStats::kExclusiveShards) - 1;
constexpr uint32_t kSharedShards =
    NodeStats::kShards - NodeStats::kExclusiveShards;

// Bit i: owned index i is held by a live thread.
constinit std::atomic<uint32_t> owned{0};
// Relaxed: spreads the shared indices, orders nothing.
constinit std::atomic<uint32_t> next_shared{0};

uint32_t SharedIndex() {
  return static_cast<uint32_t>(NodeStats::kExclusiveShards) +
         next_shared.fetch_add(1, std::memory_order_relaxed) % kSharedShards;
}

// Gives the owned index back when its thread exits. A counter added after
// this (another thread_local's destructor) goes to a shared shard.
struct Release {
  ~Release() {
    StatShardClaim& claim = this_thread_claim;
    if (!claim.exclusive) return;
    const uint32_t bit = uint32_t{1} << claim.index;
    claim = StatShardClaim{SharedIndex(), true, false};
    // Release: this thread's counter stores happen before the next owner's
    // acquire claim, so its loads continue from them.
    owned.fetch_and(~bit, std::memory_order_release);
  }
};

}  // namespace

void ClaimStatShard() {
  StatShardClaim& claim = this_thread_claim;
  uint32_t taken = owned.load(std::memory_order_relaxed);
  for (;;) {
    const uint32_t free = ~taken & kOwnedMask;
    if (free == 0) {
      claim = StatShardClaim{SharedIndex(), true, false};
      return;
    }
    const uint32_t bit = free & (~free + 1);  // the lowest free index
    // Acquire: pairs with the previous owner's release at its exit.
    if (owned.compare_exchange_weak(taken, taken | bit,
                                    std::memory_order_acquire,
                                    std::memory_order_relaxed)) {
      claim = StatShardClaim{static_cast<uint32_t>(std::countr_zero(bit)),
                             true, true};
      // Constructed on first use, destroyed at this thread's exit.
      thread_local Release release;
      (void)release;
      return;
    }
  }
}

}  // namespace stats_internal
}  // namespace furrball_internal
}  // namespace furrballs
