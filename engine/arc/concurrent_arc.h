// engine/arc/concurrent_arc.h: ConcurrentARC, a per-node cache of HashPair ->
// Value with ARC replacement: CMap for the entries, the flat ARC policy for
// the order, PromoteBuf to defer read hits, a SpinLock for writers (report
// §2.8).
//
// Thread safety: thread-safe. Find and UpdateInPlace are lock-free (CMap's
// seqlock read or write plus one PromoteBuf enqueue); Set, Erase,
// ForceEvictOne, ColdestKeys, GrowStep and the diagnostics take the
// SpinLock, Grow and Shrink take it only to install what they allocated.
// Callbacks run under the SpinLock and must not call back into the same
// ConcurrentARC.
//
// How the pieces fit
//
//   - CMap holds the entries; T1 ∪ T2 of the ARC policy is the set of keys
//     that are in CMap. Every change to CMap's key set (insert, erase) happens
//     under the SpinLock together with the matching list change, so under the
//     lock the two always agree; readers never change the key set.
//   - A read (Find) that hits enqueues the key in PromoteBuf and returns; the
//     ARC hit (Case I: move to MRU of T2) is applied later, in enqueue order,
//     by whoever next holds the lock: every Set, Erase and ForceEvictOne
//     drains first, and every 64th enqueue makes its reader try_lock and
//     drain. A promotion whose key is no longer resident by then is stale and
//     discarded (it must not become a ghost hit). Driven from one thread as
//     "Find; on a miss Set", the result is therefore exactly ARC: all hits
//     are applied, in order, before the next miss is handled.
//   - A write (Set) takes the lock, drains, asks the policy where the key is
//     (the index answers under the lock; no CMap probe is needed for that),
//     then:
//       resident (update): one CMap::Set, then the ARC hit path.
//       not resident (insert): the ARC miss path, ordered so that no list
//         changes before the table change it depends on is confirmed
//         (report §3.18):
//           1. PlanMiss: decide p, the ghost to delete and the victim.
//           2. CMap::FindAndEraseByHash(victim). kAbandonedSet (a concurrent
//              UpdateInPlace holds the victim's slot): return it; nothing
//              changed.
//           3. CommitEviction: p, the ghost deletion, the victim's move to
//              B1/B2 (or its drop, Finding 18); the eviction callback.
//           4. CMap::Set(key). On an error the eviction stands (it was
//              confirmed and reported) and the key is not admitted.
//           5. Admit: the key into T1 (new) or T2 (ghost hit).
//     REPLACE thus makes room before the insert, so CMap never holds more
//     than c keys, and CMap is created for exactly c live keys. No slack is
//     needed on top: CMap admits inserts by an exact live count (kCacheFull
//     only when c keys are live and the key is not one of them) and sizes
//     its own table for a load of at most 7/8, so whether an insert fits
//     never depends on how keys hash. The admission count is also a check:
//     if ARC ever let c + 1 keys in, CMap::Set would refuse the extra one.
//
// Growth (issue 13: the key table follows the keys). c can grow while the
// cache serves: the table is a ResizableCMap (engine/cmap/resizable_cmap.h,
// lock-free readers across its incremental rehash) and ARC's state grows
// with it (arc_flat_list.h). Grow allocates both with no lock held and
// installs them under the SpinLock in O(1); from then on c is the new
// capacity, and the old table's keys, ARC's index entries and arena slots
// move over a few at a time: GrowStep (the node's worker, in
// its maintenance pass) and every Set while growing (kGrowMovesPerSet, so
// a growth ends even with no worker). After each step, once the lock is
// dropped, the old pages its cursors left behind are given back (the
// GrowthTail below); when all have moved, the old memory is released
// (RetiredMemory, ReleaseRetired).
// One growth at a time: `growing_` is claimed by Grow and given back, under
// the SpinLock, by the step that finishes (or by a Grow that failed).
//
// Keys ARC names. ARC keeps a key's H2 only (arc_flat_list.h, "Keys are
// fingerprints"), as the table does, so the keys it hands out itself (to
// on_evict, in ForcedEviction, from ColdestKeys) are table keys, {h2, h2}
// (ArcTableKey): they name the entry to this table (Peek, Erase,
// UpdateInPlace...) but carry no H1. A consumer that needs the real H1
// rehashes the key it stored beside the value. on_promote is given the
// caller's own HashPair.
//
// Shrinking (issue 13: the key table gives its memory back when the values
// grow). Shrink(c') allocates the smaller table and ARC state with no lock
// held and, under the SpinLock in O(1), lowers ARC's c to c' (arc_policy.h);
// the same steps as a growth's (GrowStep, and every Set) then, a bounded
// amount each:
//   1. trim: evict residents in REPLACE order down to c' (each erased from
//      the table and passed to on_evict, counted as a forced eviction, as
//      ForceEvictOne's), then drop ghosts beyond c''s bounds;
//   2. compact: the table starts migrating into the smaller one
//      (ResizableCMap::BeginShrink: it holds at most c' keys now), and ARC's
//      tracked slots move below 2c' (ArcFlatLists::CompactStep);
//   3. copy: the smaller ARC state is installed as a growth's is, and both
//      migrations finish, releasing the old memory, as a growth's do.
// ARC across a shrink: from the Shrink on, it is ARC with c' (a Set during
// the trim meets a full cache: it evicts as many keys as it admits). Driven
// to the end of the shrink before the next access, it is exactly
// reference_arc.h's Shrink followed by ARC with c' (the equivalence tests).
//
// Erase, ForceEvictOne, the callbacks and the counters are documented at
// their declarations below; docs/arc.md has the whole design.
#ifndef FURRBALLS_ENGINE_ARC_CONCURRENT_ARC_H_
#define FURRBALLS_ENGINE_ARC_CONCURRENT_ARC_H_

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <absl/base/thread_annotations.h>
#include <absl/status/status.h>
#include <absl/status/statusor.h>
#include <absl/strings/str_cat.h>

#include "engine/arc/arc_flat_list.h"
#include "engine/arc/arc_policy.h"
#include "engine/arc/promote_buf.h"
#include "engine/arc/retired_memory.h"
#include "engine/cmap/cmap.h"
#include "engine/cmap/resizable_cmap.h"
#include "engine/common/error.h"
#include "engine/common/hash_pair.h"
#include "engine/common/raw_allocator.h"
#include "engine/common/spin_lock.h"

namespace furrballs {

// The HashPair ConcurrentARC hands out for a key of fingerprint `h2` (see
// "Keys ARC names"): the key table's own key for it.
inline HashPair ArcTableKey(uint64_t h2) { return HashPair{h2, h2}; }

template <typename Value>
struct ConcurrentArcOptions {
  // The cache's size in entries (ARC's c) at creation: at most this many
  // keys are resident, and ARC remembers as many again as ghosts. The
  // engine above translates its memory budget into entries, and may Grow
  // it later. Required; at most ArcFlatLists<>::kMaxCapacity.
  uint32_t capacity = 0;

  // Where the CMap and ARC's arena and index live (e.g. a NUMA
  // node's memory, from Numatic). Allocation happens in Create and Grow
  // only, never under the SpinLock.
  RawAllocator allocator = RawAllocator::Default();

  // Passed to CMap (its string-key convenience functions hash with it).
  KeyHasher hasher;

  // Called when ARC evicts a resident key: by Set's REPLACE (T1/T2 -> B1/B2),
  // by the Case IV drop of the LRU of T1 (Finding 18), and by ForceEvictOne.
  // Every entry that leaves the cache other than through Erase passes through
  // here exactly once, after it is gone from the table; the engine frees its
  // bytes here. The HashPair is the victim's table key (ArcTableKey: h1 ==
  // h2, not the key's real h1). Runs under the SpinLock: no I/O, no allocation, no blocking,
  // no calls into this ConcurrentARC. May be empty.
  std::function<void(const HashPair&, const Value&)> on_evict;

  // Called when a key enters T2, the frequency side: a resident key's first
  // re-reference moves it T1 -> T2 (from a drained read hit, an
  // UpdateInPlace or a Set of the resident key), and a key that is re-set
  // while it is a ghost comes back B1/B2 -> T2 (the report's b1/b2 -> t1/t2
  // promotion). Hits on keys already in T2 only refresh their position and
  // do not call it. Same rules as on_evict. May be empty.
  std::function<void(const HashPair&)> on_promote;
};

// Counters; each is exact and written only under the SpinLock, so reading
// them never slows the read path.
struct ConcurrentArcStats {
  uint64_t hits_applied = 0;       // drained read hits applied to a resident key
  uint64_t promotions = 0;         // keys that entered T2 (on_promote calls)
  uint64_t promotions_stale = 0;   // drained hits whose key was gone
  uint64_t promotions_dropped = 0; // read hits lost to a full PromoteBuf
  uint64_t inserts = 0;            // Sets that admitted a new key
  uint64_t ghost_hits = 0;         // ... of which the key was in B1 or B2
  uint64_t updates = 0;            // Sets of a resident key
  uint64_t evictions = 0;          // by Set (REPLACE or the Case IV drop)
  uint64_t forced_evictions = 0;   // by ForceEvictOne and a shrink's trim
  uint64_t erases = 0;             // Erase of a resident key
  uint64_t abandoned = 0;          // writes that returned kAbandonedSet
  uint64_t shrinks = 0;            // Shrinks installed
};

// What ForceEvictOne removed.
template <typename Value>
struct ForcedEviction {
  Error err = Error::kOk;  // kOk, kKeyNotFound (empty) or kAbandonedSet
  HashPair key;            // valid when err == kOk; a table key (ArcTableKey)
  std::optional<Value> value;
};

// The four list sizes and p, for diagnostics.
struct ArcShape {
  uint32_t t1 = 0, t2 = 0, b1 = 0, b2 = 0;
  uint64_t p = 0;
};

template <typename Value>
class ConcurrentARC {
 public:
  using Options = ConcurrentArcOptions<Value>;

  // Old-table keys, index entries (and 16 arena slots per entry) moved by every Set while growing: about 10 us under the lock
  // (cmap_bench's migrate_some_64, the table's part: 6-9 us).
  // So many because a new key lands anywhere in the new table and index,
  // bringing a whole page of them into memory: the fewer keys arrive
  // before the old generation is given back behind the cursors, the lower
  // the growth's peak. With 2 a Set, 1,000 Sets between the worker's steps
  // held the old generation's bytes 0.42 times above both the start and the
  // end of a 100,000 -> 200,000 growth; with 64, 0.15 (concurrent_arc_test,
  // AGrowthHoldsTheNewTableAndAQuarterOfTheOld).
  static constexpr size_t kGrowMovesPerSet = 64;

  static absl::StatusOr<std::unique_ptr<ConcurrentARC>> Create(
      const Options& options) {
    absl::StatusOr<ArcPolicy> policy =
        ArcPolicy::Create(options.capacity, options.allocator);
    if (!policy.ok()) return policy.status();
    std::unique_ptr<ConcurrentARC> arc(
        new ConcurrentARC(options, *std::move(policy)));
    switch (arc->table_.status()) {
      case Error::kOk:
        return arc;
      case Error::kAllocationFailed:
        return absl::ResourceExhaustedError(absl::StrCat(
            "ConcurrentARC: cannot allocate a CMap for ", options.capacity,
            " entries"));
      default:
        return absl::InvalidArgumentError(
            absl::StrCat("ConcurrentARC: CMap rejected capacity ",
                         options.capacity, ": ",
                         std::string(ErrorName(arc->table_.status()))));
    }
  }

  ConcurrentARC(const ConcurrentARC&) = delete;
  ConcurrentARC& operator=(const ConcurrentARC&) = delete;

  // The value of `h`, or nullopt on a miss (a miss changes nothing). A hit is
  // queued as a promotion; every 64th queued promotion, the caller drains the
  // queue if the SpinLock is free (try_lock: a reader never waits).
  std::optional<Value> Find(const HashPair& h) {
    std::optional<Value> v = table_.Find(h);
    if (v.has_value()) NoteHit(h);
    return v;
  }

  // CMap::TryVisit, noting a reference (a promotion) when `promote` and the
  // key was found: one probe for a validated read of what the value points
  // at, where Find and a Peek to validate take two.
  using VisitOutcome = typename CMap<Value>::VisitOutcome;
  template <typename Fn>
  VisitOutcome TryVisit(const HashPair& h, bool promote, Fn&& fn) {
    const VisitOutcome o = table_.TryVisit(h, std::forward<Fn>(fn));
    if (promote && o != VisitOutcome::kAbsent) NoteHit(h);
    return o;
  }

  // CMap::Prefetch: a hint before a batch of lookups; changes nothing.
  void Prefetch(const HashPair& h, int step) const { table_.Prefetch(h, step); }

  // The value of `h` without noting a reference (no promotion): for callers
  // that re-read a key to validate a copy, or inspect keys for maintenance.
  // Lock-free, like Find.
  std::optional<Value> Peek(const HashPair& h) const {
    return table_.Find(h);
  }

  // UpdateInPlace that is not a reference to the key (no promotion): for
  // maintenance that moves a value no client touched (relocation), which
  // must not make the key look hot to ARC.
  template <typename Fn>
  Error UpdateInPlaceWithoutHit(const HashPair& h, Fn&& fn) {
    return table_.UpdateInPlace(h, std::forward<Fn>(fn));
  }

  // Inserts or overwrites. Returns CMap's result: {kOk, inserted}, or an
  // error with nothing admitted (kAbandonedSet: a concurrent UpdateInPlace
  // held the key's or the victim's slot, retry; kCacheFull: cannot happen
  // with the sizing above, but is passed through). See the file comment for
  // the order of operations. While growing, also moves kGrowMovesPerSet.
  CMapSetResult Set(const HashPair& h, const Value& v) {
    GrowthTail tail(this);  // declared first: runs after the lock is dropped
    SpinLockHolder hold(lock_);
    DrainLocked();
    if (growth_installed_) {
      tail.finished = GrowStepLocked(kGrowMovesPerSet, &tail);
    }
    return policy_.lists().WithGrowthMode(
        [&](auto mode) ABSL_NO_THREAD_SAFETY_ANALYSIS {
          return SetLocked(h, v, mode);
        });
  }

  // Runs fn(Value&) on the resident value of `h` under CMap's per-slot
  // seqlock, without the SpinLock (CMap serializes writers of one slot).
  // kKeyNotFound if absent, kAbandonedSet if another writer holds the slot.
  // A successful update is a reference to the key, so it is queued as a
  // promotion exactly like a Find hit.
  template <typename Fn>
  Error UpdateInPlace(const HashPair& h, Fn&& fn) {
    const Error err = table_.UpdateInPlace(h, std::forward<Fn>(fn));
    if (err == Error::kOk) NoteHit(h);
    return err;
  }

  // Deletes `h`. kOk if it was resident (its value is copied to *erased when
  // given; on_evict is NOT called: a delete is not an eviction);
  // kKeyNotFound if not; kAbandonedSet if a concurrent UpdateInPlace held the
  // slot (nothing changed). Either way the key is also forgotten as a ghost:
  // a deleted key that comes back is a new key, not evidence that ARC
  // evicted it too early, so it must not move p.
  Error Erase(const HashPair& h, Value* erased = nullptr) {
    SpinLockHolder hold(lock_);
    DrainLocked();
    const ArcList where = policy_.lists().Where(h);
    if (IsResident(where)) {
      FindAndEraseResult<Value> r = table_.FindAndEraseByHash(h);
      if (r.err == Error::kAbandonedSet) {
        Bump(counters_.abandoned);
        return r.err;
      }
      policy_.Forget(h);
      if (r.err != Error::kOk) return r.err;
      Bump(counters_.erases);
      if (erased != nullptr) *erased = *r.value;
      return Error::kOk;
    }
    if (IsGhost(where)) policy_.Forget(h);
    return Error::kKeyNotFound;
  }

  // One eviction beyond ARC's count bound, for the engine, whose budget is in
  // bytes: the victim is the key REPLACE would choose for a request that is
  // not in B2 (LRU of T1 if |T1| >= 1 and |T1| > p, else LRU of T2; the
  // other list if that one is empty), and it becomes a ghost (T1 -> B1,
  // T2 -> B2) like any REPLACE victim. That leaves |T1| + |B1| and the
  // directory total unchanged, so ARC's bounds hold; the cache is then below
  // c and refills on later misses without evicting. on_evict is called as
  // for every eviction, and the key and value are also returned. kKeyNotFound
  // if the cache is empty; kAbandonedSet if the victim's slot was busy
  // (nothing changed).
  ForcedEviction<Value> ForceEvictOne() {
    SpinLockHolder hold(lock_);
    DrainLocked();
    ForcedEviction<Value> out = ForceEvictLocked();
    // Counted here, not in ForceEvictLocked: a shrink's trim that meets a
    // busy slot returns nothing to a caller and tries again next step.
    if (out.err == Error::kAbandonedSet) Bump(counters_.abandoned);
    return out;
  }

  // Appends to *out up to `max` resident keys in the order ForceEvictOne
  // would evict them one after another, without evicting or reordering
  // anything: ARC's coldest keys, as table keys (ArcTableKey), for the
  // engine's cold marking (report §2.9.2; it moves them to COLD pages
  // instead of evicting them). Queued
  // promotions are applied first, so a key read since the last drain is not
  // reported cold. Takes the SpinLock for a walk of `max` arena slots (and
  // each one's index cluster, for its fingerprint's low half); *out
  // is grown before the lock is taken, so nothing is allocated under it.
  void ColdestKeys(uint32_t max, std::vector<HashPair>* out) {
    out->reserve(out->size() + max);
    SpinLockHolder hold(lock_);
    DrainLocked();
    const ArcFlatLists<>& lists = policy_.lists();
    policy_.ForEachInReplaceOrder(
        max, [&](uint32_t slot) {
          out->push_back(ArcTableKey(lists.fingerprint(slot)));
        });
  }

  // Applies every queued promotion now.
  void DrainPromotions() {
    SpinLockHolder hold(lock_);
    DrainLocked();
  }

  // As DrainPromotions, but returns false at once when the lock is taken.
  // For maintenance ticks: the idle drain matters only when nothing else
  // holds the lock (a read-only period), and a background thread spinning
  // on the write path's lock steals time slices from the requests it is
  // waiting behind (seen in docs/engine_bench.md's profile on 2 CPUs).
  // Returns once every critical section of ARC's lock that began before the
  // call has ended. An eviction erases its victim and runs the eviction
  // callback inside one such section, so after this a caller sees either
  // the victim in the table or what the callback did with it.
  void WaitForEvictionsInFlight() { SpinLockHolder hold(lock_); }

  bool TryDrainPromotions() {
    if (!lock_.try_lock()) return false;
    DrainLocked();
    lock_.unlock();
    return true;
  }

  ConcurrentArcStats stats() const {
    ConcurrentArcStats s;
    s.hits_applied = Read(counters_.hits_applied);
    s.promotions = Read(counters_.promotions);
    s.promotions_stale = Read(counters_.promotions_stale);
    s.promotions_dropped = Read(counters_.promotions_dropped);
    s.inserts = Read(counters_.inserts);
    s.ghost_hits = Read(counters_.ghost_hits);
    s.updates = Read(counters_.updates);
    s.evictions = Read(counters_.evictions);
    s.forced_evictions = Read(counters_.forced_evictions);
    s.erases = Read(counters_.erases);
    s.abandoned = Read(counters_.abandoned);
    s.shrinks = Read(counters_.shrinks);
    return s;
  }

  // ---- Growth (see the file comment) ----

  // ARC's c now (the new one from the moment a growth is installed).
  uint32_t capacity() const {
    return capacity_.load(std::memory_order_relaxed);
  }

  // Grows c to `new_capacity`: allocates the new table and ARC state with
  // no lock held, then installs them under the SpinLock in O(1). Keys move
  // afterwards (GrowStep, and every Set). InvalidArgument if a growth is
  // under way or `new_capacity` is not larger than capacity() (or above
  // ArcFlatLists<>::kMaxCapacity); ResourceExhausted if an allocation fails.
  // Nothing changes on an error.
  absl::Status Grow(uint32_t new_capacity) {
    // acquire: pairs with the release that ended the previous growth, so
    // its installs, which AllocateGrowth reads, are visible.
    if (growing_.exchange(true, std::memory_order_acquire)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ConcurrentARC: already growing (to capacity ", capacity(), ")"));
    }
    absl::Status status = GrowClaimed(new_capacity);
    if (!status.ok()) growing_.store(false, std::memory_order_release);
    return status;
  }

  // Shrinks c to `new_capacity` (see the file comment): allocates the
  // smaller table and ARC state with no lock held, then lowers c under the
  // SpinLock in O(1); residents beyond it are evicted, and keys and ARC's
  // state move, afterwards (GrowStep, and every Set), and growing() is true
  // until the old memory is released. InvalidArgument if a growth or shrink
  // is under way or `new_capacity` is 0 or not smaller than capacity();
  // ResourceExhausted if an allocation fails. Nothing changes on an error.
  absl::Status Shrink(uint32_t new_capacity) {
    if (growing_.exchange(true, std::memory_order_acquire)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ConcurrentARC: already resizing (to capacity ", capacity(), ")"));
    }
    absl::Status status = ShrinkClaimed(new_capacity);
    if (!status.ok()) growing_.store(false, std::memory_order_release);
    return status;
  }

  // From Grow (or Shrink) until it is complete.
  bool growing() const { return growing_.load(std::memory_order_acquire); }

  // Moves up to `max_moves` keys of the old table and as many ARC index
  // entries (with 16 arena slots each) under the
  // SpinLock. Returns true when no growth is under way any more: this call
  // or an earlier one (perhaps a Set's) completed it, and the memory it
  // retired has been released, outside the lock. False while keys remain,
  // or while a Grow is still allocating.
  bool GrowStep(size_t max_moves) {
    if (!growing()) return true;
    GrowthTail tail(this);
    {
      SpinLockHolder hold(lock_);
      if (growth_installed_) {
        tail.finished = GrowStepLocked(max_moves, &tail);
      }
    }
    tail.Finish();
    return tail.finished;
  }

  // Everything Create maps for capacity c: the table and ARC's state.
  static size_t BytesFor(uint32_t capacity) {
    return ResizableCMap<Value>::BytesFor(capacity) +
           ArcFlatLists<>::BytesFor(capacity);
  }
  // Resident entries, as CMap counts them.
  size_t size() const { return table_.size(); }
  // Live keys CMap admits (== capacity()).
  size_t table_capacity() const { return table_.capacity(); }
  // ARC's arena and index, both generations while growing
  // (CMap reports its own memory).
  size_t policy_memory_bytes() const {
    return policy_memory_bytes_.load(std::memory_order_relaxed);
  }
  // Bytes still mapped whose pages were given back: the key table's
  // retired tables and the old table's slots behind its migration cursor
  // (ResizableCMap::released_bytes), and while growing the old index and
  // arena behind theirs (ArcFlatLists::GrowStep). What the structures hold
  // in memory is what they map less this.
  size_t released_bytes() const {
    return table_.released_bytes() +
           arc_released_bytes_.load(std::memory_order_relaxed);
  }

  // Diagnostics; each takes the SpinLock.
  ArcList Where(const HashPair& h) {
    SpinLockHolder hold(lock_);
    return policy_.lists().Where(h);
  }
  ArcShape Shape() {
    SpinLockHolder hold(lock_);
    const ArcFlatLists<>& l = policy_.lists();
    return ArcShape{l.size(ArcList::kT1), l.size(ArcList::kT2),
                    l.size(ArcList::kB1), l.size(ArcList::kB2), policy_.p()};
  }
  // Checks ARC's bounds and that T1 ∪ T2 and CMap hold the same keys.
  // Returns "" or what is wrong. Meaningful when no writer runs (concurrent
  // Finds and UpdateInPlaces are fine). During a shrink's trim the lists
  // may still exceed the new c: the bounds are checked once it is done.
  std::string CheckInvariants() {
    SpinLockHolder hold(lock_);
    const ArcFlatLists<>& l = policy_.lists();
    std::ostringstream bad;
    const uint64_t c = policy_.capacity();
    if (c != capacity()) bad << "capacity() " << capacity() << " != ARC's c; ";
    const uint64_t t1 = l.size(ArcList::kT1), t2 = l.size(ArcList::kT2);
    const uint64_t b1 = l.size(ArcList::kB1), b2 = l.size(ArcList::kB2);
    // A shrink's trim brings the lists down to the new c step by step:
    // until it is done they may still hold the old c's keys.
    if (shrink_phase_ != ShrinkPhase::kTrim) {
      if (t1 + t2 > c) bad << "|T1|+|T2| = " << t1 + t2 << " > c; ";
      if (t1 + b1 > c) bad << "|T1|+|B1| = " << t1 + b1 << " > c; ";
      if (t1 + t2 + b1 + b2 > 2 * c) bad << "directory > 2c; ";
      if (policy_.p() > c) bad << "p > c; ";
    }
    for (ArcList list : {ArcList::kT1, ArcList::kT2}) {
      for (uint32_t s = l.mru(list); s != kArcNil; s = l.next(s)) {
        if (!table_.Find(ArcTableKey(l.fingerprint(s))).has_value()) {
          bad << "resident key " << l.fingerprint(s) << " missing from CMap; ";
        }
      }
    }
    // Every listed resident is in CMap; equal counts mean CMap holds no
    // key that is not listed.
    if (table_.size() != t1 + t2) {
      bad << "CMap holds " << table_.size() << " keys, T1+T2 " << t1 + t2
          << "; ";
    }
    return bad.str();
  }

 private:
  // Counters written only under lock_ by Bump (a load and a store, not a
  // read-modify-write: there is one writer at a time) and read anywhere.
  struct alignas(kCacheLineSize) Counters {
    std::atomic<uint64_t> hits_applied{0}, promotions{0}, promotions_stale{0},
        promotions_dropped{0}, inserts{0}, ghost_hits{0}, updates{0},
        evictions{0}, forced_evictions{0}, erases{0}, abandoned{0},
        shrinks{0};
  };

  ConcurrentARC(const Options& options, ArcPolicy policy)
      : options_(options),
        table_(options.capacity, options.allocator, options.hasher),
        capacity_(options.capacity),
        policy_(std::move(policy)),
        policy_memory_bytes_(policy_.memory_bytes()) {}

  // Gives back, once the lock is dropped, the old pages a growth step left
  // behind (table and ARC state), and frees what the finishing step
  // retired: declared before the SpinLockHolder, so destroyed after it.
  // A step that handed out ARC pages (`spans`) counts itself in
  // spans_outstanding_ under the lock; the finishing step's tail waits for
  // that count to reach 0 before it frees the old arrays, so no madvise
  // ever runs on a range that was unmapped (and perhaps mapped again for
  // something else).
  struct GrowthTail {
    explicit GrowthTail(ConcurrentARC* arc) : arc(arc) {}
    ~GrowthTail() { Finish(); }
    void Finish() {
      if (done || !stepped) return;  // no growth step ran: nothing to do
      done = true;
      if (!finished) {
        if (spans) {
          arc->arc_released_bytes_.fetch_add(retired.Release(),
                                             std::memory_order_relaxed);
          // release: the finishing tail's acquire load sees the add.
          arc->spans_outstanding_.fetch_sub(1, std::memory_order_release);
        }
        arc->table_.ReleaseRetired(ArcFlatLists<>::kReleaseBatchBytes);
        return;
      }
      while (arc->spans_outstanding_.load(std::memory_order_acquire) != 0) {
        std::this_thread::yield();  // another step's tail is in madvise
      }
      // Before the unmap: the accounting may count these bytes as held a
      // moment too long, never as released once they are unmapped.
      arc->arc_released_bytes_.store(0, std::memory_order_relaxed);
      retired.Release();
      arc->table_.ReleaseRetired();
      // Only now is the growth over: growing() stays true until the old
      // memory is gone, so the engine's accounting (and the next Grow)
      // never sees a finished growth whose memory is still mapped.
      // release: the next Grow's acquire sees this growth's installs.
      arc->growing_.store(false, std::memory_order_release);
    }
    ConcurrentARC* arc;
    RetiredMemory retired;
    bool stepped = false;   // a growth step ran (GrowStepLocked)
    bool finished = false;  // this step completed the growth
    bool spans = false;     // this step handed out ARC pages to release
    bool done = false;
  };

  // The Grow of the claimant of growing_. Reads ARC's state without the
  // lock in AllocateGrowth: only BeginGrow changes what it reads, and only
  // this claimant calls BeginGrow.
  absl::Status GrowClaimed(uint32_t new_capacity)
      ABSL_NO_THREAD_SAFETY_ANALYSIS {
    if (new_capacity <= capacity() ||
        new_capacity > ArcFlatLists<>::kMaxCapacity) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ConcurrentARC: cannot grow from capacity ", capacity(), " to ",
          new_capacity, " (must be larger, at most ",
          ArcFlatLists<>::kMaxCapacity, ")"));
    }
    absl::StatusOr<std::unique_ptr<CMap<Value>>> table =
        AllocateTable(new_capacity);
    if (!table.ok()) return table.status();
    absl::StatusOr<ArcPolicy::Growth> growth =
        policy_.AllocateGrowth(new_capacity);
    if (!growth.ok()) return growth.status();
    SpinLockHolder hold(lock_);
    const Error err = table_.BeginGrow(*std::move(table));
    if (err != Error::kOk) {
      // The checks above rule this out; nothing was installed.
      return absl::InternalError(absl::StrCat(
          "ConcurrentARC: the table refused to grow: ",
          std::string(ErrorName(err))));
    }
    policy_.BeginGrow(*std::move(growth));
    growth_installed_ = true;
    capacity_.store(new_capacity, std::memory_order_relaxed);
    policy_memory_bytes_.store(policy_.memory_bytes(),
                               std::memory_order_relaxed);
    return absl::OkStatus();
  }

  // ForceEvictOne's eviction (also a shrink's trim), after the drain.
  ForcedEviction<Value> ForceEvictLocked()
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(lock_) {
    ForcedEviction<Value> out;
    const ArcVictim victim = policy_.PlanForceEvict();
    if (victim.slot == kArcNil) {
      out.err = Error::kKeyNotFound;
      return out;
    }
    out.key = ArcTableKey(policy_.lists().fingerprint(victim.slot));
    FindAndEraseResult<Value> r = table_.FindAndEraseByHash(out.key);
    if (r.err == Error::kAbandonedSet) {
      out.err = r.err;
      return out;
    }
    policy_.CommitForceEvict(victim);  // on kKeyNotFound too, as in Set
    if (r.err != Error::kOk) {
      out.err = r.err;
      return out;
    }
    Bump(counters_.forced_evictions);
    if (options_.on_evict) options_.on_evict(out.key, *r.value);
    out.value = std::move(r.value);
    return out;
  }

  // A table of `capacity` keys for a growth or shrink, allocated with no
  // lock held.
  absl::StatusOr<std::unique_ptr<CMap<Value>>> AllocateTable(
      uint32_t capacity) const {
    std::unique_ptr<CMap<Value>> table = ResizableCMap<Value>::AllocateTable(
        capacity, options_.allocator, options_.hasher);
    if (table->status() != Error::kOk) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "ConcurrentARC: cannot allocate a CMap for ", capacity,
          " entries: ", std::string(ErrorName(table->status()))));
    }
    return table;
  }

  // The Shrink of the claimant of growing_ (as GrowClaimed).
  absl::Status ShrinkClaimed(uint32_t new_capacity)
      ABSL_NO_THREAD_SAFETY_ANALYSIS {
    if (new_capacity == 0 || new_capacity >= capacity()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ConcurrentARC: cannot shrink from capacity ", capacity(), " to ",
          new_capacity, " (must be smaller, above 0)"));
    }
    absl::StatusOr<std::unique_ptr<CMap<Value>>> table =
        AllocateTable(new_capacity);
    if (!table.ok()) return table.status();
    absl::StatusOr<ArcPolicy::Growth> arc_state =
        policy_.AllocateShrink(new_capacity);
    if (!arc_state.ok()) return arc_state.status();
    SpinLockHolder hold(lock_);
    shrink_table_ = *std::move(table);
    shrink_arc_state_.emplace(*std::move(arc_state));
    policy_.BeginShrink(new_capacity);
    shrink_phase_ = ShrinkPhase::kTrim;
    growth_installed_ = true;
    capacity_.store(new_capacity, std::memory_order_relaxed);
    Bump(counters_.shrinks);
    return absl::OkStatus();
  }

  // A shrink's steps 1 and 2 (file comment), bounded by `max_moves`
  // evictions, ghosts, keys moved and ~16 * max_moves ARC slots; true once
  // the smaller ARC state is installed (step 3, the growth's migration,
  // goes on from there).
  bool ShrinkPrepareLocked(size_t max_moves)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(lock_) {
    if (shrink_phase_ == ShrinkPhase::kTrim) {
      DrainLocked();  // evict in the order the reads since left it
      for (size_t n = 0;
           n < max_moves && policy_.resident() > policy_.capacity(); ++n) {
        if (ForceEvictLocked().err != Error::kOk) return false;  // busy
      }
      if (policy_.resident() > policy_.capacity() ||
          !policy_.TrimGhosts(max_moves)) {
        return false;
      }
      // The table holds exactly the residents, at most c' of them.
      if (table_.BeginShrink(std::move(shrink_table_)) != Error::kOk) {
        std::abort();  // ruled out by the trim and the lock discipline
      }
      policy_.BeginCompact();
      shrink_phase_ = ShrinkPhase::kCompact;
    }
    table_.MigrateSome(max_moves);
    if (!policy_.CompactStep(max_moves)) return false;
    policy_.BeginGrow(*std::move(shrink_arc_state_));
    shrink_arc_state_.reset();
    shrink_phase_ = ShrinkPhase::kNone;
    policy_memory_bytes_.store(policy_.memory_bytes(),
                               std::memory_order_relaxed);
    return true;
  }

  // One bounded step of both migrations (after a shrink's steps 1 and 2);
  // true when this step completed the growth (its retired ARC memory is
  // then in *retired; the GrowthTail releases it after the lock and then
  // gives growing_ back). REQUIRES: a growth or shrink is installed.
  bool GrowStepLocked(size_t max_moves, GrowthTail* tail)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(lock_) {
    tail->stepped = true;
    if (shrink_phase_ != ShrinkPhase::kNone &&
        !ShrinkPrepareLocked(max_moves)) {
      return false;
    }
    RetiredMemory* const retired = &tail->retired;
    const size_t table_left = table_.MigrateSome(max_moves);
    const bool policy_done = policy_.GrowStep(max_moves, retired);
    if (table_left != 0 || !policy_done) {
      tail->spans = !retired->empty();
      if (tail->spans) {
        spans_outstanding_.fetch_add(1, std::memory_order_relaxed);
      }
      return false;
    }
    // The finishing step's own spans lie in the arrays it retires, which
    // its tail frees whole.
    retired->DropReleases();
    policy_.TakeRetired(retired);
    policy_memory_bytes_.store(policy_.memory_bytes(),
                               std::memory_order_relaxed);
    growth_installed_ = false;
    return true;
  }

  static void Bump(std::atomic<uint64_t>& c, uint64_t n = 1) {
    c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  static uint64_t Read(const std::atomic<uint64_t>& c) {
    return c.load(std::memory_order_relaxed);
  }

  void NoteHit(const HashPair& h) {
    const PromoteBuf::EnqueueResult r = promote_buf_.Enqueue(h);
    if (r.should_drain && lock_.try_lock()) {
      DrainLocked();
      lock_.unlock();
    }
  }

  // Set after the drain and the growth step, in mode `mode`
  // (ArcFlatLists::WithGrowthMode).
  template <typename Mode>
  CMapSetResult SetLocked(const HashPair& h, const Value& v, Mode mode)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(lock_) {
    const ArcFlatLists<>& lists = policy_.lists();
    const uint32_t slot = lists.Find(h, mode);
    if (slot != kArcNil && IsResident(lists.list_of(slot, mode))) {
      const CMapSetResult r = table_.Set(h, v);
      if (r.err != Error::kOk) return Failed(r);
      Bump(counters_.updates);
      if (policy_.Hit(slot, mode)) PromotedLocked(h);
      return r;
    }

    const ArcMissPlan plan = policy_.PlanMiss(slot, mode);
    if (plan.victim != kArcNil) {
      const HashPair victim = ArcTableKey(lists.fingerprint(plan.victim, mode));
      FindAndEraseResult<Value> erased = table_.FindAndEraseByHash(victim);
      if (erased.err != Error::kOk && erased.err != Error::kKeyNotFound) {
        return Failed(CMapSetResult{erased.err, false});
      }
      // kKeyNotFound would mean the table lost a listed key, which the lock
      // discipline rules out; the lists then simply follow the table.
      policy_.CommitEviction(plan, mode);
      Bump(counters_.evictions);
      if (erased.value.has_value() && options_.on_evict) {
        options_.on_evict(victim, *erased.value);
      }
    } else {
      policy_.CommitEviction(plan, mode);
    }

    const CMapSetResult r = table_.Set(h, v);
    if (r.err != Error::kOk) return Failed(r);
    policy_.Admit(plan, h, mode);
    Bump(counters_.inserts);
    if (plan.x_to == ArcList::kT2) {
      Bump(counters_.ghost_hits);
      PromotedLocked(h);
    }
    return r;
  }

  CMapSetResult Failed(CMapSetResult r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(lock_) {
    if (r.err == Error::kAbandonedSet) Bump(counters_.abandoned);
    return r;
  }

  void PromotedLocked(const HashPair& h) ABSL_EXCLUSIVE_LOCKS_REQUIRED(lock_) {
    Bump(counters_.promotions);
    if (options_.on_promote) options_.on_promote(h);
  }

  void DrainLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(lock_) {
    policy_.lists().WithGrowthMode(
        [this](auto mode) ABSL_NO_THREAD_SAFETY_ANALYSIS {
          this->DrainLocked(mode);
        });
  }
  // The queued hits are taken out first and applied after, in queue order.
  // In between, the cache lines of their lookups and moves are brought in a
  // step at a time for all of them (ArcFlatLists::PrefetchFindAndMove).
  // Each hit is a chain of dependent misses (index bucket, arena slot, then
  // the slot's list neighbours; until 2026-11-25 also a key record), and
  // applied one after
  // another they made the drain 13% of a Get-only profile (YCSB-C in
  // bench/engine), on the request path. Nothing changes ARC between the
  // two loops (the lock is held, and a hit moves no key to another slot),
  // so this applies exactly what draining hit by hit did.
  template <typename Mode>
  void DrainLocked(Mode mode) ABSL_EXCLUSIVE_LOCKS_REQUIRED(lock_) {
    const ArcFlatLists<>& lists = policy_.lists();
    // 4 KiB of stack, left uninitialized (HashPair's initializers would
    // zero it on every drain).
    struct QueuedHit {
      uint64_t h1, h2;
    };
    std::array<QueuedHit, PromoteBuf::kSlots> hits;
    size_t n = 0;
    promote_buf_.Drain([&hits, &n](const HashPair& h) {
      hits[n++] = QueuedHit{h.h1, h.h2};
    });
    for (int step = 0; step < 3; ++step) {
      for (size_t i = 0; i < n; ++i) {
        lists.PrefetchFindAndMove(HashPair{hits[i].h1, hits[i].h2}, step,
                                  mode);
      }
    }
    for (size_t i = 0; i < n; ++i) {
      const HashPair h{hits[i].h1, hits[i].h2};
      const uint32_t slot = lists.Find(h, mode);
      if (slot == kArcNil || !IsResident(lists.list_of(slot, mode))) {
        Bump(counters_.promotions_stale);
        continue;
      }
      Bump(counters_.hits_applied);
      if (policy_.Hit(slot, mode)) PromotedLocked(h);
    }
    counters_.promotions_dropped.store(promote_buf_.dropped(),
                                       std::memory_order_relaxed);
  }

  const Options options_;
  // Thread-safe on its own; read by every Find.
  ResizableCMap<Value> table_;
  std::atomic<uint32_t> capacity_;
  // Claimed by Grow, given back by the step that completes the growth.
  std::atomic<bool> growing_{false};

  // The write lock, alone on its cache line: readers only try_lock it, every
  // 64th hit.
  alignas(kCacheLineSize) SpinLock lock_;
  ArcPolicy policy_ ABSL_GUARDED_BY(lock_);
  // Between the install of a growth and the step that completes it.
  bool growth_installed_ ABSL_GUARDED_BY(lock_) = false;
  // A shrink before its ARC state is installed (ShrinkPrepareLocked), and
  // what Shrink allocated for it.
  enum class ShrinkPhase : uint8_t { kNone, kTrim, kCompact };
  ShrinkPhase shrink_phase_ ABSL_GUARDED_BY(lock_) = ShrinkPhase::kNone;
  std::unique_ptr<CMap<Value>> shrink_table_ ABSL_GUARDED_BY(lock_);
  std::optional<ArcPolicy::Growth> shrink_arc_state_ ABSL_GUARDED_BY(lock_);
  std::atomic<size_t> policy_memory_bytes_;
  // GrowthTail: steps whose ARC pages are still being given back, and the
  // bytes given back of the old arrays, which are mapped until the growth
  // ends.
  std::atomic<uint32_t> spans_outstanding_{0};
  std::atomic<size_t> arc_released_bytes_{0};
  // Enqueue is lock-free; Drain is serialized by lock_ (DrainLocked).
  PromoteBuf promote_buf_;
  Counters counters_;
};

}  // namespace furrballs

#endif  // FURRBALLS_ENGINE_ARC_CONCURRENT_ARC_H_
