// engine/common/thread_slot.h: a small per-thread index that at most one
// live thread owns, so that per-thread state indexed by it (ConcurrentARC's
// hit rings, engine/arc/hit_rings.h) has a single writer and needs no
// read-modify-write.
//
// Thread safety: thread-safe. ThisThreadSlot is called by a thread about
// itself; its answer never changes while the thread runs, except once at
// thread exit (below).
//
// Protocol
//
//   Owned slots 0 .. kOwnedThreadSlots-1. A thread's first ThisThreadSlot
//   claims the lowest free one: a CAS (acquire) that sets its bit in a
//   process-wide mask. The thread gives it back when it exits (a
//   thread_local destructor): fetch_and (release) of the bit. The release
//   pairs with the next owner's acquire claim, so everything the previous
//   owner wrote to state indexed by the slot happens before the next owner
//   touches it: the slot's state has one writer at a time, in a
//   happens-before chain, and plain (relaxed) loads and stores suffice.
//   Shared: a thread that finds every owned slot taken (more than
//   kOwnedThreadSlots live threads) gets exclusive = false and a
//   round-robin number in `index`; so does a thread whose owned slot was
//   already given back (a thread_local destructor that runs after ours).
//   Users keep a read-modify-write path for it.
//
// The answer is per thread, not per object: every structure that indexes
// by it sees the same owner for a slot.
#ifndef FURRBALLS_ENGINE_COMMON_THREAD_SLOT_H_
#define FURRBALLS_ENGINE_COMMON_THREAD_SLOT_H_

#include <cstdint>

namespace furrballs {

inline constexpr uint32_t kOwnedThreadSlots = 12;

struct ThreadSlot {
  // exclusive: the owned slot, < kOwnedThreadSlots. Else a number that
  // spreads the threads without one over shared state (any value).
  uint32_t index = 0;
  bool claimed = false;    // the thread asked once
  bool exclusive = false;  // the thread owns `index` alone
};

namespace thread_slot_internal {
// The thread's answer, filled by its first ThisThreadSlot. Only its thread
// touches it.
extern thread_local constinit ThreadSlot this_thread_slot;
void Claim();
}  // namespace thread_slot_internal

inline const ThreadSlot& ThisThreadSlot() {
  if (!thread_slot_internal::this_thread_slot.claimed) {
    thread_slot_internal::Claim();
  }
  return thread_slot_internal::this_thread_slot;
}

}  // namespace furrballs

#endif  // FURRBALLS_ENGINE_COMMON_THREAD_SLOT_H_
