#include "engine/common/thread_slot.h"

#include <atomic>
#include <bit>

namespace furrballs {
namespace thread_slot_internal {

thread_local constinit ThreadSlot this_thread_slot;

namespace {

static_assert(kOwnedThreadSlots <= 32, "the claim mask is 32 bits");
constexpr uint32_t kOwnedMask = kOwnedThreadSlots == 32
                                    ? ~uint32_t{0}
                                    : (uint32_t{1} << kOwnedThreadSlots) - 1;

// Bit i: owned slot i is held by a live thread.
constinit std::atomic<uint32_t> owned{0};
// Relaxed: spreads the threads without an owned slot, orders nothing.
constinit std::atomic<uint32_t> next_shared{0};

ThreadSlot Shared() {
  return ThreadSlot{next_shared.fetch_add(1, std::memory_order_relaxed), true,
                    false};
}

// Gives the owned slot back when its thread exits.
struct Release {
  ~Release() {
    ThreadSlot& slot = this_thread_slot;
    if (!slot.exclusive) return;
    const uint32_t bit = uint32_t{1} << slot.index;
    slot = Shared();
    // Release: this thread's writes to the slot's state happen before the
    // next owner's acquire claim.
    owned.fetch_and(~bit, std::memory_order_release);
  }
};

}  // namespace

void Claim() {
  ThreadSlot& slot = this_thread_slot;
  uint32_t taken = owned.load(std::memory_order_relaxed);
  for (;;) {
    const uint32_t free = ~taken & kOwnedMask;
    if (free == 0) {
      slot = Shared();
      return;
    }
    const uint32_t bit = free & (~free + 1);  // the lowest free slot
    // Acquire: pairs with the previous owner's release at its exit.
    if (owned.compare_exchange_weak(taken, taken | bit,
                                    std::memory_order_acquire,
                                    std::memory_order_relaxed)) {
      slot = ThreadSlot{static_cast<uint32_t>(std::countr_zero(bit)), true,
                        true};
      // Constructed here, on the thread's first claim; destroyed at its exit.
      thread_local Release release;
      (void)release;
      return;
    }
  }
}

}  // namespace thread_slot_internal
}  // namespace furrballs
