// engine/arc/arc_policy.h: the single-threaded ARC policy core over HashPair
// keys (Megiddo & Modha, "ARC: A Self-Tuning, Low Overhead Replacement
// Cache", FAST 2003, Fig. 4), on the flat lists of arc_flat_list.h.
//
// Thread safety: thread-compatible (REQUIRES external synchronization).
// ConcurrentARC drives it under its write SpinLock.
//
// The policy only tracks keys; it stores no values. T1 ∪ T2 is the set of
// resident keys (c at most); B1 and B2 are ghosts, keys recently evicted from
// T1 and T2, whose re-reference steers the target size p of T1.
//
// The algorithm (c = capacity, "full" = |T1| + |T2| >= c):
//
//   Case I    x in T1 ∪ T2 (hit): move x to MRU of T2.
//   Case II   x in B1: p = min(p + d1, c), d1 = 1 if |B1| >= |B2| else
//             |B2| / |B1|; if full, REPLACE(x, p); move x to MRU of T2.
//   Case III  x in B2: p = max(p - d2, 0), d2 = 1 if |B2| >= |B1| else
//             |B1| / |B2|; if full, REPLACE(x, p); move x to MRU of T2.
//   Case IV   x untracked (miss):
//     A. |T1| + |B1| == c:
//          |T1| < c: delete LRU of B1; if full, REPLACE(x, p).
//          else (B1 is empty): delete LRU of T1 from the cache entirely. It
//          is DROPPED, not moved to B1 (Finding 18: moving it inflates the
//          ghosts, over-adapts p, and wrecks Zipfian hit rates).
//     B. |T1| + |B1| < c: if the total is 2c, delete LRU of B2;
//          if full, REPLACE(x, p).
//     Put x at MRU of T1.
//   REPLACE(x, p): if |T1| >= 1 and ((x in B2 and |T1| == p) or |T1| > p),
//     move LRU of T1 to MRU of B1; else move LRU of T2 to MRU of B2.
//
// Two deliberate details:
//
//   - p and the deltas are integers (floor division), as in ZFS and most ARC
//     implementations; the reference ARC in the tests does the same. The
//     decrement is guarded against unsigned underflow (report §3.19):
//     `p = p >= d ? p - d : 0`, never `max(0, p - d)`.
//   - The paper REPLACEs when the directory holds >= c keys (Case IV B) or
//     unconditionally (Cases II, III, IV A). Under the paper's own invariant
//     ("if the directory holds >= c keys, the cache holds exactly c") that
//     is the same as "if the cache is full", which is what is written here.
//     The two differ only after keys leave the cache outside the algorithm
//     (Forget, ForceEvict): the paper's rule would then evict on every miss
//     forever and never let the cache refill; this one refills first. On any
//     pure access trace the two produce identical hits and evictions (the
//     equivalence tests check exactly that).
//
// The bounds |T1| + |T2| <= c, |T1| + |B1| <= c and |T1| + |T2| + |B1| +
// |B2| <= 2c hold after every operation, including Forget and ForceEvict.
//
// c may grow (BeginGrow). The lists and p are kept as they
// are, which satisfies the bounds for any larger c, and from then on the
// algorithm above runs with the new c: between two changes of c it is
// exactly the ARC above. Right after a growth the cache is not full while
// ghosts remain, the situation Forget and ForceEvict also leave behind, so
// the rule "REPLACE when the cache is full" (second detail above) is what
// lets the bigger cache fill: misses and ghost hits are admitted without
// evicting until c keys are resident. reference_arc.h's Grow does the same,
// and the equivalence tests check traces with growths at chosen points.
//
// c may also shrink (issue 13: the key table gives its memory back when the
// values grow). BeginShrink lowers c and clamps p to it at once; the caller
// then evicts residents in REPLACE order (PlanForceEvict, to B1/B2) until
// at most c are resident, and TrimGhosts drops the LRU of B1 while |T1| +
// |B1| > c, then the LRU of B2 (of B1 if B2 is empty) while the total
// exceeds 2c. From then on the bounds hold for the smaller c and the
// algorithm above runs with it: a shrink is ARC with a smaller c from then
// on, starting from the most recent part of its state. Misses that come
// while the trim is under way (a bounded number of steps) meet a full cache
// and evict as many keys as they admit, so they never add to what is left
// to trim: Case IV A with |T1| >= c drops the LRU of T1, every other case
// REPLACEs. reference_arc.h's Shrink does the same trim at once, and the
// equivalence tests compare traces with shrinks at chosen points.
//
// Each miss is split in three steps so that ConcurrentARC can interleave the
// CMap operations that must succeed before the lists change (report §3.18):
//
//   ArcMissPlan plan = PlanMiss(slot);   // pure: decides, changes nothing
//   ... erase plan.victim from the table; on failure stop here ...
//   CommitEviction(plan);                // p, ghost deletion, victim move
//   ... insert x into the table; on failure stop here ...
//   Admit(plan, x);                      // x into T1 or T2
//
// Access() runs the three back to back; it is the simulator and benchmark
// entry point.
#ifndef FURRBALLS_ENGINE_ARC_ARC_POLICY_H_
#define FURRBALLS_ENGINE_ARC_ARC_POLICY_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>

#include <absl/status/statusor.h>

#include "engine/arc/arc_flat_list.h"
#include "engine/arc/arc_index.h"
#include "engine/arc/retired_memory.h"
#include "engine/common/hash_pair.h"
#include "engine/common/raw_allocator.h"

namespace furrballs {

// What PlanMiss decided for a key that is not resident.
struct ArcMissPlan {
  uint64_t new_p = 0;
  ArcList x_from = ArcList::kNone;  // kNone (new key), kB1 or kB2
  ArcList x_to = ArcList::kT1;      // kT1 (new key) or kT2 (ghost hit)
  uint32_t x_slot = kArcNil;        // x's ghost slot, for a ghost hit
  uint32_t ghost_to_delete = kArcNil;  // LRU of B1 or B2, or none
  uint32_t victim = kArcNil;           // resident key leaving the cache
  ArcList victim_to = ArcList::kNone;  // kB1, kB2, or kNone = dropped
};

// What one Access() did, for simulators and equivalence tests.
struct ArcAccessResult {
  bool hit = false;
  bool evicted = false;            // a resident key left the cache
  uint64_t evicted_fingerprint = 0;  // its H2 (arc_flat_list.h), if evicted
  ArcList evicted_to = ArcList::kNone;  // kB1, kB2, or kNone = dropped
};

// A resident key chosen for eviction outside the miss path.
struct ArcVictim {
  uint32_t slot = kArcNil;
  ArcList to = ArcList::kNone;  // kB1 or kB2
};

template <typename Index = ArcIndex>
class BasicArcPolicy {
 public:
  static absl::StatusOr<BasicArcPolicy> Create(uint32_t capacity,
                                               RawAllocator alloc) {
    absl::StatusOr<ArcFlatLists<Index>> lists =
        ArcFlatLists<Index>::Create(capacity, alloc);
    if (!lists.ok()) return lists.status();
    return BasicArcPolicy(capacity, *std::move(lists));
  }

  BasicArcPolicy(BasicArcPolicy&&) noexcept = default;
  BasicArcPolicy& operator=(BasicArcPolicy&&) = delete;

  // One reference to `x`, start to finish.
  ArcAccessResult Access(const HashPair& x) {
    return lists_.WithGrowthMode([&](auto mode) { return Access(x, mode); });
  }

  // The operations below that take a `Mode` run as ArcFlatLists' do: with
  // ArcNotGrowing only when !growing() (WithGrowthMode chooses).

  // Case I. Moves resident `slot` to MRU of T2; returns true if it came from
  // T1 (a promotion), false if it was already in T2.
  // REQUIRES: slot is resident.
  template <typename Mode = ArcMayGrow>
  bool Hit(uint32_t slot, Mode mode = {}) {
    const bool promoted = lists_.list_of(slot, mode) == ArcList::kT1;
    lists_.MoveToFront(slot, ArcList::kT2, mode);
    return promoted;
  }

  // Cases II-IV for a non-resident key x, decided but not applied. `x_slot`
  // is where lists().Find(x) found it: kArcNil (untracked) or its ghost
  // slot. The caller has looked x up already to learn that it is not
  // resident; a second index probe per miss would only repeat that.
  // REQUIRES: x is not in T1 ∪ T2.
  template <typename Mode = ArcMayGrow>
  ArcMissPlan PlanMiss(uint32_t x_slot, Mode mode = {}) const {
    const uint64_t c = capacity_;
    const uint64_t t1 = lists_.size(ArcList::kT1);
    const uint64_t t2 = lists_.size(ArcList::kT2);
    const uint64_t b1 = lists_.size(ArcList::kB1);
    const uint64_t b2 = lists_.size(ArcList::kB2);
    const bool full = t1 + t2 >= c;

    ArcMissPlan plan;
    plan.new_p = p_;
    plan.x_slot = x_slot;
    plan.x_from =
        x_slot == kArcNil ? ArcList::kNone : lists_.list_of(x_slot, mode);

    if (plan.x_from == ArcList::kB1) {  // Case II
      const uint64_t d1 = b1 >= b2 ? 1 : b2 / b1;
      plan.new_p = std::min(p_ + d1, c);
      plan.x_to = ArcList::kT2;
      if (full) PlanReplace(/*x_in_b2=*/false, plan.new_p, &plan);
      return plan;
    }
    if (plan.x_from == ArcList::kB2) {  // Case III
      const uint64_t d2 = b2 >= b1 ? 1 : b1 / b2;
      plan.new_p = p_ >= d2 ? p_ - d2 : 0;  // §3.19 underflow guard
      plan.x_to = ArcList::kT2;
      if (full) PlanReplace(/*x_in_b2=*/true, plan.new_p, &plan);
      return plan;
    }
    // Case IV.
    plan.x_to = ArcList::kT1;
    if (t1 + b1 >= c) {  // A: L1 is full
      if (t1 < c) {
        plan.ghost_to_delete = lists_.lru(ArcList::kB1);
        if (full) PlanReplace(/*x_in_b2=*/false, p_, &plan);
      } else {
        plan.victim = lists_.lru(ArcList::kT1);
        plan.victim_to = ArcList::kNone;  // dropped: Finding 18
      }
    } else {  // B
      if (t1 + t2 + b1 + b2 >= 2 * c) {
        plan.ghost_to_delete = lists_.lru(ArcList::kB2);
      }
      if (full) PlanReplace(/*x_in_b2=*/false, p_, &plan);
    }
    return plan;
  }

  // Applies the adaptation, the ghost deletion and the victim's move.
  template <typename Mode = ArcMayGrow>
  void CommitEviction(const ArcMissPlan& plan, Mode mode = {}) {
    p_ = plan.new_p;
    if (plan.ghost_to_delete != kArcNil) {
      lists_.Remove(plan.ghost_to_delete, mode);
    }
    if (plan.victim != kArcNil) {
      if (plan.victim_to == ArcList::kNone) {
        lists_.Remove(plan.victim, mode);
      } else {
        lists_.MoveToFront(plan.victim, plan.victim_to, mode);
      }
    }
  }

  // Makes `x` resident per `plan`. REQUIRES: CommitEviction(plan) ran and
  // nothing else changed the lists since PlanMiss.
  template <typename Mode = ArcMayGrow>
  void Admit(const ArcMissPlan& plan, const HashPair& x, Mode mode = {}) {
    if (plan.x_from == ArcList::kNone) {
      lists_.PushFront(plan.x_to, x, mode);
    } else {
      // x is the key whose fingerprint matched the ghost.
      lists_.MoveToFront(plan.x_slot, plan.x_to, mode);
    }
  }

  // The resident key REPLACE would evict for a request not in B2: LRU of T1
  // if |T1| >= 1 and |T1| > p, else LRU of T2 (falling back to the other list
  // when the chosen one is empty). It goes to B1 or B2 respectively, which
  // keeps |T1| + |B1| and the total unchanged. slot == kArcNil if the cache is
  // empty.
  ArcVictim PlanForceEvict() const {
    ArcMissPlan plan;
    PlanReplace(/*x_in_b2=*/false, p_, &plan);
    return ArcVictim{plan.victim, plan.victim_to};
  }
  void CommitForceEvict(const ArcVictim& v) {
    lists_.MoveToFront(v.slot, v.to);
  }

  // Calls fn(slot) for up to `max` resident keys in the order that
  // successive PlanForceEvict/CommitForceEvict pairs would evict them, and
  // changes nothing: the keys ARC gives up next (the engine's cold marking).
  // A forced eviction leaves p alone and takes the LRU of T1 or T2, so the
  // sequence is a merge of the two lists walked from their LRU ends, with
  // PlanReplace's rule applied to the sizes that remain.
  template <typename Fn>
  void ForEachInReplaceOrder(uint32_t max, Fn&& fn) const {
    uint64_t t1 = lists_.size(ArcList::kT1);
    uint64_t t2 = lists_.size(ArcList::kT2);
    uint32_t s1 = lists_.lru(ArcList::kT1);
    uint32_t s2 = lists_.lru(ArcList::kT2);
    for (uint32_t n = 0; n < max && t1 + t2 > 0; ++n) {
      // PlanReplace(x_in_b2 = false) with its fallback to a non-empty list.
      if (t1 >= 1 && (t1 > p_ || t2 == 0)) {
        fn(s1);
        s1 = lists_.prev(s1);
        --t1;
      } else {
        fn(s2);
        s2 = lists_.prev(s2);
        --t2;
      }
    }
  }

  // Stops tracking `x` wherever it is: a resident key leaves the cache
  // without becoming a ghost, and a ghost is forgotten, so a deleted key can
  // never later count as a recency signal and move p. Returns the list it was
  // on (kNone if it was untracked).
  ArcList Forget(const HashPair& x) {
    const uint32_t s = lists_.Find(x);
    if (s == kArcNil) return ArcList::kNone;
    const ArcList was = lists_.list_of(s);
    lists_.Remove(s);
    return was;
  }

  // ---- Growth of c (arc_flat_list.h has the three steps) ----

  using Growth = typename ArcFlatLists<Index>::Growth;

  // Allocates what capacity `new_capacity` needs, taking no lock.
  // REQUIRES: !growing(), and growths are serialized by the caller.
  absl::StatusOr<Growth> AllocateGrowth(uint32_t new_capacity) const {
    return lists_.AllocateGrowth(new_capacity);
  }
  // c becomes growth.capacity() at once; O(1).
  void BeginGrow(Growth&& growth) {
    capacity_ = growth.capacity();
    lists_.BeginGrow(std::move(growth));
  }
  // Bounded work (up to `max_moves` index entries); true once done. With
  // `released`, the old pages the step left behind, to give back after the
  // lock (ArcFlatLists::GrowStep).
  bool GrowStep(size_t max_moves, RetiredMemory* released = nullptr) {
    return lists_.GrowStep(max_moves, released);
  }
  bool growing() const { return lists_.growing(); }

  // ---- Shrinking of c (see the file comment; arc_flat_list_compact.h has
  // the compaction) ----

  // Allocates what capacity `new_capacity` needs, taking no lock.
  // REQUIRES: !growing(), resizes serialized by the caller.
  absl::StatusOr<Growth> AllocateShrink(uint32_t new_capacity) const {
    return lists_.AllocateShrink(new_capacity);
  }
  // c becomes `new_capacity`, p at most c. O(1). REQUIRES: !growing(),
  // new_capacity < c.
  void BeginShrink(uint32_t new_capacity) {
    capacity_ = new_capacity;
    p_ = std::min<uint64_t>(p_, capacity_);
  }
  // Drops up to `max` ghosts beyond c's bounds (LRU of B1 while |T1| + |B1|
  // > c, then the LRU of B2, or of B1 if B2 is empty, while the total
  // exceeds 2c). True when the lists are within c's bounds.
  // REQUIRES: at most c resident.
  bool TrimGhosts(size_t max) {
    const auto t1 = [this] { return lists_.size(ArcList::kT1); };
    for (; max > 0 && t1() + lists_.size(ArcList::kB1) > capacity_; --max) {
      lists_.Remove(lists_.lru(ArcList::kB1));
    }
    for (; max > 0 && lists_.tracked() > uint64_t{2} * capacity_; --max) {
      lists_.Remove(lists_.lru(lists_.size(ArcList::kB2) > 0 ? ArcList::kB2
                                                             : ArcList::kB1));
    }
    return t1() + lists_.size(ArcList::kB1) <= capacity_ &&
           lists_.tracked() <= uint64_t{2} * capacity_;
  }
  // The lists' compaction (ArcFlatLists::BeginCompact, CompactStep) for the
  // c set by BeginShrink. REQUIRES: TrimGhosts returned true.
  void BeginCompact() { lists_.BeginCompact(capacity_); }
  bool CompactStep(size_t max_moves) { return lists_.CompactStep(max_moves); }
  // After GrowStep returned true: the old memory, to free after the lock.
  void TakeRetired(RetiredMemory* out) { lists_.TakeRetired(out); }

  uint32_t capacity() const { return capacity_; }
  uint64_t p() const { return p_; }
  uint32_t resident() const {
    return lists_.size(ArcList::kT1) + lists_.size(ArcList::kT2);
  }
  const ArcFlatLists<Index>& lists() const { return lists_; }
  size_t memory_bytes() const { return lists_.memory_bytes(); }

 private:
  BasicArcPolicy(uint32_t capacity, ArcFlatLists<Index> lists)
      : capacity_(capacity), lists_(std::move(lists)) {}

  template <typename Mode>
  ArcAccessResult Access(const HashPair& x, Mode mode) {
    ArcAccessResult r;
    const uint32_t s = lists_.Find(x, mode);
    if (s != kArcNil && IsResident(lists_.list_of(s, mode))) {
      Hit(s, mode);
      r.hit = true;
      return r;
    }
    const ArcMissPlan plan = PlanMiss(s, mode);
    if (plan.victim != kArcNil) {
      r.evicted = true;
      r.evicted_fingerprint = lists_.fingerprint(plan.victim, mode);
      r.evicted_to = plan.victim_to;
    }
    CommitEviction(plan, mode);
    Admit(plan, x, mode);
    return r;
  }

  void PlanReplace(bool x_in_b2, uint64_t p, ArcMissPlan* plan) const {
    const uint64_t t1 = lists_.size(ArcList::kT1);
    const bool from_t1 = t1 >= 1 && ((x_in_b2 && t1 == p) || t1 > p);
    // The fallbacks never fire inside the algorithm proper (a full cache with
    // an empty T2 has |T1| == c > p or x in B2 with |T1| == p == c); they
    // matter for PlanForceEvict on a cache that is not full.
    if ((from_t1 || lists_.size(ArcList::kT2) == 0) && t1 >= 1) {
      plan->victim = lists_.lru(ArcList::kT1);
      plan->victim_to = ArcList::kB1;
    } else if (lists_.size(ArcList::kT2) >= 1) {
      plan->victim = lists_.lru(ArcList::kT2);
      plan->victim_to = ArcList::kB2;
    }
  }

  uint32_t capacity_;
  uint64_t p_ = 0;
  ArcFlatLists<Index> lists_;
};

using ArcPolicy = BasicArcPolicy<ArcIndex>;

}  // namespace furrballs

#endif  // FURRBALLS_ENGINE_ARC_ARC_POLICY_H_
