// engine/arc/arc_flat_list_compact.h: the compaction of ArcFlatLists'
// arena before a shrink (member definitions; included by arc_flat_list.h,
// which declares them).
//
// Thread safety: as ArcFlatLists (thread-compatible; in ConcurrentARC only
// under the write SpinLock).
//
// Shrinking (issue 13: the key table gives its memory back when the values
// grow). A smaller c' reuses the growth's copy, which needs every tracked
// slot below 2c' (the copy keeps slot numbers). The caller (ArcPolicy)
// first trims the lists to c''s bounds (at most c' resident, 2c' tracked),
// then:
//
//   BeginCompact(c')  under the lock, O(1): the free slot chain is set
//                     aside (`old_free_slot`); from now on a freed slot
//                     below 2c' goes on a new chain, one above is dropped
//                     (tagged kNone, never reused).
//   CompactStep(n)    under the lock, bounded: (1) moves up to 16n entries of
//                     the set-aside chain to the new one (those below the
//                     limit) or drops them; (2) once it is empty, takes new
//                     slots only from the new chain or the high-water mark
//                     below 2c' and walks down from the high-water mark to
//                     2c', moving each tracked slot it meets into a free one
//                     below (relinking its neighbours, renumbering its index
//                     entry). True when all is done: the caller then
//                     installs a growth to c' (AllocateShrink, BeginGrow),
//                     whose copy and release run as for any growth.
//
// A moved slot keeps its name: its word (the fingerprint's high half) goes
// with it and its index bucket, which holds the low half and stays where it
// is, is renumbered to the new slot, so fingerprint() walks from the same
// home to the same bucket. Nothing else names a slot by number (there are
// no key records: "Keys are fingerprints").
//
// A free slot below the limit exists for every push and every move: the
// bounds leave at most 2c' tracked slots, so while one lies above 2c' (the
// move), or fewer than 2c' are tracked (a push), one below is free; once the
// set-aside chain is empty, every free slot below the high-water mark and
// the limit is on the new chain. The tests of slot allocation against
// compaction run only in ArcMayGrow mode, which growing() selects while
// compacting.
#ifndef FURRBALLS_ENGINE_ARC_ARC_FLAT_LIST_COMPACT_H_
#define FURRBALLS_ENGINE_ARC_ARC_FLAT_LIST_COMPACT_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "engine/arc/arc_flat_list.h"

namespace furrballs {

template <typename Index>
uint32_t ArcFlatLists<Index>::CompactTakeSlot() {
  uint32_t s = free_head_;
  if (s != kArcNil) {
    free_head_ = At(s).next;
    return s;
  }
  s = compact_.old_free_slot;
  if (s != kArcNil) {
    compact_.old_free_slot = At(s).next;
    return s;
  }
  const uint32_t end =
      compact_.chains_done ? std::min(compact_.slot_limit, slot_count())
                           : slot_count();
  return high_water_ < end ? high_water_++ : kArcNil;
}

template <typename Index>
void ArcFlatLists<Index>::Relocate(uint32_t from, uint32_t to) {
  Slot& f = At(from);
  const uint32_t high = HighOfSlot(from);
  const ArcList l = f.list();
  const uint32_t prev = f.prev(), next = f.next;
  At(to) = f;
  if (prev != kArcNil) {
    At(prev).next = to;
  } else {
    head(l).first = to;
  }
  if (next != kArcNil) {
    At(next).SetPrev(to);
  } else {
    head(l).last = to;
  }
  index_.Renumber(high, from, to);
  f.Set(ArcList::kNone, kArcNil);
}

template <typename Index>
bool ArcFlatLists<Index>::CompactStep(size_t max_moves) {
  if (!compact_.on) return true;
  Compaction& c = compact_;
  size_t budget = 16 * max_moves;
  // (1) The set-aside chain: keep what lies below the limit.
  while (budget > 0 && c.old_free_slot != kArcNil) {
    --budget;
    const uint32_t s = c.old_free_slot;
    c.old_free_slot = At(s).next;
    if (s < c.slot_limit) {
      At(s).next = free_head_;
      free_head_ = s;
    }
  }
  if (c.old_free_slot != kArcNil) return false;
  if (!c.chains_done) {
    // From here on nothing above the limit is handed out: the high-water
    // mark beyond it stops, and what is tracked above it is what step (2)
    // moves.
    c.chains_done = true;
    c.top = high_water_;
  }
  // (2) Tracked slots above the limit move below it.
  while (budget > 0 && c.top > c.slot_limit) {
    --budget;
    const uint32_t s = --c.top;
    if (At(s).list() == ArcList::kNone) continue;
    const uint32_t to = CompactTakeSlot();
    Relocate(s, to);
  }
  if (c.top > c.slot_limit) return false;
  high_water_ = std::min(high_water_, c.slot_limit);
  c.on = false;
  return true;
}

}  // namespace furrballs

#endif  // FURRBALLS_ENGINE_ARC_ARC_FLAT_LIST_COMPACT_H_
