// engine/cmap/cmap.h: CMap, the fixed-capacity concurrent Swiss table that
// maps a key's 128-bit hash to a small trivially copyable Value (report §2.7).
//
// Thread safety: thread-safe. Every operation may run concurrently with every
// other on any thread. Find never writes shared memory and takes no lock;
// writers use a per-slot seqlock and fail fast (Error::kAbandonedSet) rather
// than wait for one another. Construction and destruction are not concurrent
// with anything.
//
// Hash as key (report §3.8). No key is stored. HashPair{h1, h2} is the key's
// identity: h1 picks the home group, h2 is stored as the slot's fingerprint,
// and the top 7 bits of h2 are the slot's control byte. Two keys are confused
// only if their h2 are equal and their probe paths overlap (~2^-64 per pair
// with a keyed hash); a cache reads that as a miss or an overwrite.
//
// ---------------------------------------------------------------------------
// Layout
// ---------------------------------------------------------------------------
//
// Two allocations from the caller's RawAllocator (report §2.7.7):
//
//   ctrl:  groups * 16 control bytes (internal/group.h has the encoding),
//          then one SENTINEL group, then one uint32_t overflow count per
//          group (see "Tombstones" below).
//   slots: groups * 16 slots packed back to back, each [seq | fingerprint |
//          value] (internal/slot.h: 40 bytes for the engine's KeyMeta).
//
// The number of groups is the smallest that keeps the load at or below 3/4
// (kMaxLoad*) when `capacity` keys are live; it need not be a power of two
// (internal/group.h, GroupRange). CMap never resizes.
//
// Probing (report §2.7.4). A key's path starts at its home group (the low 32
// bits of h1 modulo the group count) and
// continues with the next group, wrapping around. In each group one SIMD
// compare finds the slots whose control byte equals H2Short(h2); each
// candidate is confirmed by the full 64-bit fingerprint. The path ends at the
// first group that contains an EMPTY byte or whose overflow count is zero.
// Probe<kFindDeleted = true> (Set) also remembers the first DELETED slot on
// the path, else the first EMPTY one, so that inserts reuse tombstones.
//
// Tombstones (a deviation from the report, measured in docs/cmap.md). Erase
// marks a slot DELETED, never EMPTY: an EMPTY byte must mean "no key was ever
// placed past this group", and only a rehash could restore that, which a
// fixed lock-free table cannot do. With the report's design alone, churn at
// full capacity turns every EMPTY into a tombstone within a few times
// `capacity` erase+insert pairs, and from then on every miss walks the whole
// table. So each group also counts the live keys whose path runs past
// it (folly F14's "outbound overflow count"): an insert that lands beyond its
// home group increments the count of every group it passed, the erase of that
// key decrements them, and a probe may stop at any group whose count is zero,
// tombstones or not. A miss then costs the run of groups that displaced keys
// actually cross, which stays short (cmap_test checks it under churn).
//
// Capacity. A live count, raised by CAS before an insert claims a slot and
// lowered after an erase (or a failed claim), admits at most `capacity` keys;
// Set returns kCacheFull beyond that. Because capacity < slot_count(), an
// insert always has a free slot to find, tombstones included. The count is
// the one shared write per insert/erase; updates and reads never touch it.
//
// ---------------------------------------------------------------------------
// Concurrency protocol
// ---------------------------------------------------------------------------
//
// A slot is (ctrl byte, seq, fingerprint, value words). Every field is
// accessed only through atomic operations: std::atomic<uint64_t> for seq,
// fingerprint and value words, __atomic builtins on the plain uint8_t control
// bytes so that groups can be loaded in bulk. There is no plain shared access
// anywhere, hence nothing for a data race to be about.
//
// The slot lock. seq even = stable, odd = one writer inside. Every change to
// ctrl, fingerprint or value happens inside a lock:
//
//   Lock    seq CAS even -> odd, acquire; then a release fence. CAS failure
//           (odd, or lost the race) returns kAbandonedSet at once: no
//           spinning (report §2.7.8).
//   Unlock  seq store odd -> odd + 1 (= even + 2, modulo 2^32 in the low
//           half; the high half is the value's tail), release.
//
// States of a slot, as (ctrl, seq parity) with what the other fields hold:
//
//   EMPTY    (0x80, even)  fingerprint 0, value 0; never used
//   DELETED  (0xFE, even)  fingerprint 0, value 0; a tombstone
//   LIVE(K)  (H2Short(K), even)  fingerprint K.h2, value = K's last value
//   LOCKED   (any, odd)    a writer is inside; fields may be mid-change
//
// Transitions (all writers: Lock first, Unlock last):
//
//   Insert K, EMPTY|DELETED -> LIVE(K)    (Set of an absent key)
//     1. overflow[g] fetch_add(relaxed) for each group g the path passes
//        before the target slot's group.
//     2. Lock.
//     3. fingerprint store K.h2 (relaxed), remembering the old value.
//     4. ctrl CAS DELETED -> H2Short, else EMPTY -> H2Short (release): the
//        report's structural claim. Nothing else changes a ctrl byte outside
//        the slot lock, so this fails only if the slot was taken between the
//        probe and step 2: restore the fingerprint, Unlock, undo step 1,
//        kAbandonedSet.
//     5. seq_cst fence, then probe K's path again for another slot with
//        ctrl H2Short and fingerprint K.h2 (an acquire fence before each
//        fingerprint load). If one exists, a concurrent Set of K claimed it:
//        ctrl store DELETED, fingerprint 0, Unlock, undo step 1,
//        kAbandonedSet. See "Duplicates" below.
//     6. value stores (relaxed). Unlock.
//   Update K, LIVE(K) -> LIVE(K)           (Set of a present key,
//                                           UpdateInPlace)
//     Lock; check ctrl == H2Short and fingerprint == K.h2 (else the key was
//     erased since the probe: Unlock, kAbandonedSet); UpdateInPlace copies
//     the value out with relaxed loads and runs fn on the copy; value stores
//     (relaxed); Unlock. ctrl and fingerprint are not written.
//   Erase K, LIVE(K) -> DELETED            (FindAndErase, FindAndEraseByHash)
//     Lock; check as for Update; value loads (relaxed) for the result; ctrl
//     store DELETED (relaxed: the lock already excludes every other writer);
//     fingerprint and value stores 0; Unlock; overflow fetch_sub(relaxed)
//     along the path, undoing the insert's step 1.
//   Move K out, LIVE(K) -> DELETED         (MoveSomeTo, ResizableCMap's
//                                           migration; keys with h1 == h2)
//     Lock; check the slot is occupied; fingerprint and value loads
//     (relaxed); Insert K into the other table (its own Lock..Unlock);
//     release fence; then as Erase: ctrl DELETED, fingerprint and value 0,
//     Unlock, overflow fetch_sub. The lock is held across the insert, so
//     an Update of K here either finished before the move (which copies its
//     result) or finds K gone; the release fence orders the other table's
//     insert before every store of the erase, for readers that see one of
//     them and then probe the other table (resizable_cmap.h).
//
// Reader (Find), for each candidate slot the group compare proposes:
//
//   R1. s1 = seq load (acquire). Odd: back off and retry R1.
//   R2. ctrl load, fingerprint load (relaxed). Not (H2Short, K.h2): the key
//       is not in this slot; try the next candidate.
//   R3. value loads (relaxed) into a local buffer; a value's tail is the
//       high half of the seq word R1 read.
//   R4. acquire fence; s2 = seq load (relaxed). s2 != s1: retry R1.
//   R5. return the buffer as a Value.
//
// Visit runs R1..R4, then the caller's fn on the copy, then another acquire
// fence and seq load; a changed seq (a writer entered meanwhile) restarts it
// from the probe. The fence keeps fn's own loads before that seq load, so
// they all happened while the slot held the value fn was given.
//
// What pairs with what:
//
//   - R1's acquire load reads some Unlock's release store: the reader sees
//     everything that writer (and every writer before it) stored.
//   - Lock's release fence and R4's acquire fence: if any load in R2..R3
//     read a store of a writer that is still inside, the fences synchronize,
//     that writer's Lock happens before R4's seq load, and s2 != s1. So a
//     reader that passes R4 saw one stable state, never a mix (Boehm,
//     "Can Seqlocks Get Along with Programming Language Memory Models?").
//   - Lock's acquire CAS reads the previous Unlock's release store: writers
//     of a slot are totally ordered and each sees its predecessor's stores.
//   - Insert step 4's release CAS and step 5's acquire fence: an inserter
//     that sees another inserter's control byte also sees its fingerprint.
//   - Insert step 5's seq_cst fence against another inserter's: see
//     "Duplicates".
//   - Overflow counts: an insert's increments are sequenced before its
//     Unlock, so a Find that starts after the insert completed reads them
//     (or later values, which still include this key's share until its
//     erase). A counter read as zero therefore never hides a key that was
//     present for the whole Find.
//
// Benign stale control bytes. A probe's group load is a relaxed snapshot and
// may be out of date by the time it is used. That is fine because the
// control byte is only a hint: R2 re-reads the control byte and the
// fingerprint inside the seqlock window, and writers re-check both under the
// lock. A stale match costs one extra seq check; a stale non-match or a stale
// EMPTY makes Find miss a key that is being inserted concurrently, which
// linearizes the Find before that insert. A stale EMPTY can never hide an
// older key: EMPTY bytes are never written after construction, so a byte
// read as EMPTY was EMPTY for the key's whole life, and no key is ever placed
// past a group that had an EMPTY byte when its insert probed it.
//
// A slot erased and reused by another key. A reader looking for K may have
// picked slot s from a snapshot in which s was LIVE(K); meanwhile s is erased
// and re-inserted for K' (possibly with the same control byte). The reader's
// R1..R4 window either lies inside one stable state, or it retries. In
// DELETED the control byte fails R2; in LIVE(K') the fingerprint fails R2
// (K'.h2 != K.h2, even if the control bytes collide); only in LIVE(K) does
// it return, and then with K's value. A foreign value is never returned. An
// R2 failure ends the candidate without R4's validation: the only way to
// read a fingerprint other than K.h2 from a slot that holds K stably is a
// concurrent writer, i.e. a concurrent erase, and missing K then linearizes
// after that erase.
//
// ABA on seq. A reader is fooled only if the seq word returns to s1 between
// R1 and R4 (and, for Visit, around fn), i.e. after exactly a multiple of
// 2^31 writer windows on that slot that also left its value's tail as it
// was. The report's seq is one byte, which a reader preempted for one time
// slice can see wrap on a hot key (128 updates). Here the sequence is the
// low 32 bits of a word whose high half holds a value's last bytes
// (internal/slot.h, "The tail"; until 2026-11-24 it was all 64 bits, and
// the 20-byte KeyMeta would have needed a 40-byte slot). A writer window is
// a CAS, the value's stores and a release store on one line, tens of
// nanoseconds; the engine's are longer (an in-place write copies the value
// inside it). So 2^31 of them on one slot take about a minute of nothing
// but writes to that key, all while one reader sits between two loads a few
// instructions apart: the reader would have to stay descheduled for that
// whole minute while the key is written nonstop. We accept that.
//
// Duplicates. Two concurrent Sets of an absent key K can choose different
// free slots (a tombstone may appear on the path between their probes). Each
// inserter publishes its control byte (step 4), executes a seq_cst fence,
// then looks for the other (step 5). Whichever fence is later in the single
// total order of seq_cst fences sees the other's control byte, fingerprint
// and overflow increments, so at least one of them backs out: at most one
// copy of K survives (none, if both see each other; both then return
// kAbandonedSet and the caller retries). A back-out leaves a tombstone, never
// EMPTY, for the reason given under "Tombstones".
//
// Progress. Find takes no lock and writes nothing; like any seqlock reader
// it waits (spin, then yield) while a writer is inside the one slot it is
// reading. Writers never wait: every write finishes in a bounded number of
// steps or returns kAbandonedSet.
//
// ---------------------------------------------------------------------------
// Construction failure
// ---------------------------------------------------------------------------
//
// The constructor never throws. If the allocator returns nullptr (or memory
// that is not cache-line aligned) or `capacity` exceeds kMaxCapacity, status()
// says so and the map is inert: lookups miss, Set returns {status(), false}.
// A status accessor rather than a StatusOr<unique_ptr<CMap>> factory, because
// owners (ConcurrentARC, the node shard) embed the map by value in memory
// that is itself node-local; a factory would force a separate heap object and
// a pointer hop on every lookup.
#ifndef FURRBALLS_ENGINE_CMAP_CMAP_H_
#define FURRBALLS_ENGINE_CMAP_CMAP_H_

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <new>
#include <optional>
#include <string_view>
#include <type_traits>
#include <utility>

#include <absl/base/attributes.h>

#include "engine/cmap/internal/group.h"
#include "engine/cmap/internal/slot.h"
#include "engine/common/error.h"
#include "engine/common/hash_pair.h"
#include "engine/common/raw_allocator.h"

namespace furrballs {

using cmap_internal::DefaultGroup;
using cmap_internal::GroupPortable;
#if defined(__SSE2__)
using cmap_internal::GroupSse2;
#endif

// Result of Set: `inserted` is true iff the key was absent and is now
// present (report §3.21); false with kOk means an existing value was
// overwritten.
struct CMapSetResult {
  Error err;
  bool inserted;
};

// Result of FindAndErase: the erased value on kOk; kKeyNotFound if absent;
// kAbandonedSet if another writer held the slot (retry).
template <typename Value>
struct FindAndEraseResult {
  Error err;
  std::optional<Value> value;
};

namespace cmap_internal {

class CMapTestPeer;

// The state of a map whose construction failed: one all-EMPTY group (zero
// bytes in stored form, group.h), so every probe ends at once. Never
// written, because an inert map admits no insert.
struct InertTable {
  alignas(kCacheLineSize) uint8_t ctrl[kGroupWidth];
  std::atomic<uint32_t> overflow[1];
};
static_assert(StoredCtrl(kCtrlEmpty) == 0);
inline constinit InertTable inert_table = {{}, {0}};

}  // namespace cmap_internal

// Value must be trivially copyable: readers copy it as words while a writer
// may be storing it, and discard the copy if it was torn.
template <typename Value, typename GroupImpl = DefaultGroup>
class CMap {
  static_assert(std::is_trivially_copyable_v<Value>,
                "CMap copies values as words inside a seqlock (report §2.7.1)");
  static_assert(cmap_internal::CtrlGroup<GroupImpl>,
                "GroupImpl must provide the interface of internal/group.h");

 public:
  // At most this many live keys: each group's overflow count is a uint32_t
  // and can count every live key.
  static constexpr size_t kMaxCapacity = std::numeric_limits<uint32_t>::max();

  // Maximum fraction of slots in use at `capacity` live keys: 3/4, not the
  // report's 7/8. A fixed table cannot rehash away the displacement that
  // churn accumulates; after 40 * capacity erase+insert pairs a miss walks
  // 2.9 groups on average at 3/4 load, 57 at 7/8 (docs/cmap.md).
  static constexpr size_t kMaxLoadNumerator = 3;
  static constexpr size_t kMaxLoadDenominator = 4;

  // A table for up to `capacity` live keys. The table sizes itself (the
  // fewest 16-slot groups at load <= 3/4) so that `capacity` keys always
  // fit. Check status() afterwards.
  explicit CMap(size_t capacity, const KeyHasher& hasher = KeyHasher(),
                RawAllocator alloc = RawAllocator::Default());
  ~CMap();

  CMap(const CMap&) = delete;
  CMap& operator=(const CMap&) = delete;

  // kOk, kAllocationFailed (the allocator returned nullptr or unaligned
  // memory), or kInvalidArgument (capacity > kMaxCapacity).
  Error status() const { return status_; }
  bool ok() const { return status_ == Error::kOk; }

  const KeyHasher& hasher() const { return hasher_; }

  // A copy of the key's value, or nullopt if absent. Takes no lock; waits
  // only while a writer is inside the one slot holding the key. Always
  // inlined: a lookup is a short chain of dependent loads, and inlined the
  // CPU overlaps consecutive lookups (measured 1.5x on misses, docs/cmap.md).
  ABSL_ATTRIBUTE_ALWAYS_INLINE inline std::optional<Value> Find(
      const HashPair& h) const;
  std::optional<Value> Find(std::string_view key) const {
    return Find(hasher_.Hash(key));
  }

  // Runs fn(const Value&) on a consistent copy of the key's value, then
  // checks that no writer entered the slot while fn ran; if one did, looks
  // the key up again and reruns fn. So when Visit returns true, everything
  // fn read happened while the value was the one it was given: a reader can
  // copy data the value points at (a page entry) and know that the writer
  // who changes both, under UpdateInPlace, did not interleave. fn must be
  // repeatable and must make its own reads race-free (atomic loads).
  // Returns false, without calling fn, if the key is absent.
  template <typename Fn>
  bool Visit(const HashPair& h, Fn&& fn) const;
  // One round of Visit: kChanged, instead of a retry, when a writer entered
  // the slot while fn ran (fn's reads are then to be discarded), so that a
  // caller can bound its attempts and fall back to a lock.
  enum class VisitOutcome { kAbsent, kVisited, kChanged };
  template <typename Fn>
  VisitOutcome TryVisit(const HashPair& h, Fn&& fn) const;
  template <typename Fn>
  bool Visit(std::string_view key, Fn&& fn) const {
    return Visit(hasher_.Hash(key), std::forward<Fn>(fn));
  }

  // A hint for a caller about to look up many keys (a batch), with no
  // effect a caller can observe: step 0 prefetches the control bytes of h's
  // home group; step 1, called once step 0's line had time to arrive (after
  // step 0 for the batch's other keys), the slots of that group whose
  // control byte matches h (read relaxed and unvalidated: a wrong guess only
  // wastes a prefetch). One lookup is a chain of dependent cache misses
  // (control bytes, slot, then what the value points to); prefetched step by
  // step over a batch, the batch's misses overlap instead of queueing.
  void Prefetch(const HashPair& h, int step) const;

  // Inserts or overwrites. {kOk, true}: inserted; {kOk, false}: overwritten;
  // kAbandonedSet: another writer held the slot (nothing changed; retry);
  // kCacheFull: `capacity` keys are live and this one is not among them.
  CMapSetResult Set(const HashPair& h, const Value& v);
  CMapSetResult Set(std::string_view key, const Value& v) {
    return Set(hasher_.Hash(key), v);
  }

  // Runs fn(Value&) on the key's value under the slot's lock; readers see
  // the value before or after fn, never in between. fn operates on a copy
  // that is stored back when it returns, so it may read and write the Value
  // freely and perform side effects that must be atomic with the update
  // (report §2.7.5). kKeyNotFound if absent; kAbandonedSet if another writer
  // held the slot (fn not called). fn must not throw, and must not call Find
  // for the same key (the lookup would wait for this very lock); other
  // writes to the same key return kAbandonedSet.
  template <typename Fn>
  Error UpdateInPlace(const HashPair& h, Fn&& fn);
  template <typename Fn>
  Error UpdateInPlace(std::string_view key, Fn&& fn) {
    return UpdateInPlace(hasher_.Hash(key), std::forward<Fn>(fn));
  }

  // Removes the key and returns the value it had, in one probe.
  FindAndEraseResult<Value> FindAndErase(std::string_view key) {
    return FindAndEraseByHash(hasher_.Hash(key));
  }
  // The same for callers that keep hashes, not keys (ConcurrentARC's
  // eviction, report §3.16).
  FindAndEraseResult<Value> FindAndEraseByHash(const HashPair& h);

  // The `capacity` passed in.
  size_t capacity() const { return capacity_; }
  // Live keys plus admitted inserts still in flight, never more than
  // capacity(). A relaxed load: approximate under concurrent writes, exact
  // when quiescent.
  size_t size() const { return live_.load(std::memory_order_relaxed); }
  // Slots in the table (0 for an inert map).
  size_t slot_count() const { return ok() ? groups_.size() * kGroupWidth : 0; }

  // ---- For ResizableCMap (resizable_cmap.h) --------------------------------
  // These assume a table whose every key has h1 == h2: a slot keeps only h2
  // (the fingerprint), and a key can be re-placed from its slot alone only if
  // its home group is a function of h2.

  // Moves up to `max_keys` keys into `dest` (Insert K into dest, then the
  // "Move K out" transition below), visiting at most max_keys * 16 slots from
  // *cursor on (wrapping; *cursor is where the next call goes on). Returns
  // the keys moved. Stops early, leaving *cursor at the slot, if a slot's
  // lock is held (kAbandonedSet) or `dest` refuses the key: the next call
  // tries it again. REQUIRES: no concurrent insert or erase on either table
  // (the caller's lock); h1 == h2 for every key; dest holds none of ours.
  size_t MoveSomeTo(CMap& dest, size_t* cursor, size_t max_keys);

  // The slot bytes of a group.
  static constexpr size_t SlotBytesPerGroup() {
    return Slots::BytesFor(kGroupWidth);
  }
  // Gives back, through the allocator's Release, the whole pages of slots
  // that lie below group `to` and not below group `from` (an earlier call's
  // `to`), so that successive calls over a growing prefix release each page
  // once. Those slots then read as zeros (seq 0, fingerprint 0); control
  // bytes and overflow counts are kept, so probes still walk past them.
  // Returns the bytes released. REQUIRES: no slot below group `to` holds a
  // key, and none ever will (ResizableCMap's old table behind its
  // migration cursor: resizable_cmap.h, "Released behind the cursor").
  size_t ReleaseSlotsBelow(size_t from, size_t to) {
    if (!ok() || to <= from) return 0;
    const RawAllocator::PageSpan span = RawAllocator::WholePagesBetween(
        slot_memory_, Slots::BytesFor(from * kGroupWidth),
        Slots::BytesFor(to * kGroupWidth));
    return span.bytes == 0 ? 0 : alloc_.Release(span.p, span.bytes);
  }

  // Gives the table's memory back through the allocator's Release: it then
  // reads as zeros, an empty table (control bytes EMPTY, seq 0, overflow
  // counts 0), and is deallocated only by the destructor, so that lock-free
  // readers and UpdateInPlace calls still probing it find nothing and never
  // fault. Returns the bytes released (0 without a release function: the
  // memory then keeps the empty table it holds).
  // REQUIRES: size() == 0 and no insert or erase ever again.
  size_t ReleaseMemory() {
    if (!ok()) return 0;
    return alloc_.Release(ctrl_memory_, ctrl_bytes_) +
           alloc_.Release(slot_memory_, slot_bytes_);
  }

  // The bytes a map of this capacity takes from its allocator (both
  // allocations), for callers that budget a node's memory: 16 bytes plus the
  // value (rounded up to words) per slot, and one control byte; slots are
  // about 4/3 times `capacity`.
  static size_t BytesFor(size_t capacity) {
    const size_t groups = GroupsFor(capacity);
    return CtrlBytesFor(groups) + Slots::BytesFor(groups * kGroupWidth);
  }

 private:
  friend class cmap_internal::CMapTestPeer;

  using Slots = cmap_internal::SlotArray<Value>;
  using Words = cmap_internal::WordBuffer<Value>;
  static constexpr size_t kGroupWidth = cmap_internal::kGroupWidth;
  static constexpr size_t kNoSlot = ~size_t{0};

  struct ProbeResult {
    size_t match = kNoSlot;  // the slot where is_key returned true
    size_t match_index = 0;  // groups on the path before match's group
    size_t free = kNoSlot;   // kFindDeleted: the slot an insert should take
    size_t free_index = 0;   // groups on the path before free's group
    size_t groups_visited = 0;
  };

  static size_t GroupsFor(size_t capacity) {
    const size_t slots =
        (capacity * kMaxLoadDenominator + kMaxLoadNumerator - 1) /
        kMaxLoadNumerator;
    const size_t groups = (slots + kGroupWidth - 1) / kGroupWidth;
    return groups < 1 ? size_t{1} : groups;
  }
  static size_t RoundToLine(size_t bytes) {
    return (bytes + kCacheLineSize - 1) / kCacheLineSize * kCacheLineSize;
  }
  // Control bytes, the SENTINEL group, then the overflow counts.
  static size_t CtrlBytesFor(size_t groups) {
    return OverflowOffset(groups) + RoundToLine(groups * sizeof(uint32_t));
  }
  static size_t OverflowOffset(size_t groups) {
    return RoundToLine((groups + 1) * kGroupWidth);
  }

  // Control bytes are read and written in their stored form (group.h).
  uint8_t LoadCtrl(size_t i) const {
    return cmap_internal::CtrlFromStored(
        __atomic_load_n(&ctrl_[i], __ATOMIC_RELAXED));
  }
  // REQUIRES: the slot's lock is held.
  void StoreCtrl(size_t i, uint8_t c) {
    __atomic_store_n(&ctrl_[i], cmap_internal::StoredCtrl(c), __ATOMIC_RELAXED);
  }
  // Insert step 4. REQUIRES: the slot's lock is held.
  bool ClaimCtrl(size_t i, uint8_t h2s) {
    const uint8_t desired = cmap_internal::StoredCtrl(h2s);
    uint8_t expected = cmap_internal::StoredCtrl(cmap_internal::kCtrlDeleted);
    if (__atomic_compare_exchange_n(&ctrl_[i], &expected, desired, false,
                                    __ATOMIC_RELEASE, __ATOMIC_RELAXED)) {
      return true;
    }
    expected = cmap_internal::StoredCtrl(cmap_internal::kCtrlEmpty);
    return __atomic_compare_exchange_n(&ctrl_[i], &expected, desired, false,
                                       __ATOMIC_RELEASE, __ATOMIC_RELAXED);
  }

  // Whether slot i holds h. REQUIRES: the slot's lock is held, so neither
  // field can change under us.
  bool HoldsKey(size_t i, const HashPair& h) const {
    return LoadCtrl(i) == cmap_internal::H2Short(h.h2) &&
           slots_[i].fingerprint.load(std::memory_order_relaxed) == h.h2;
  }

  // The candidate check of writers: a relaxed fingerprint compare. Only a
  // hint; writers re-check with HoldsKey under the lock.
  auto FingerprintIs(const HashPair& h) const {
    return [this, &h](size_t i) {
      return slots_[i].fingerprint.load(std::memory_order_relaxed) == h.h2;
    };
  }

  // Always inlined: the body of every operation, and of Find in particular.
  template <bool kFindDeleted, typename IsKey>
  ABSL_ATTRIBUTE_ALWAYS_INLINE inline ProbeResult Probe(const HashPair& h,
                                                 IsKey&& is_key) const;

  // Reader steps R1..R4 on slot i. True with the value in `out` iff the slot
  // held h in one stable state, whose seq goes to `*stable`.
  ABSL_ATTRIBUTE_ALWAYS_INLINE inline bool ReadIfKey(size_t i,
                                                     const HashPair& h,
                                                     Words& out,
                                                     uint64_t* stable) const;

  // The insert half of Set, given Probe<true>'s result for an absent key:
  // admission, then Claim.
  CMapSetResult Insert(const HashPair& h, const ProbeResult& r, const Value& v);
  // Insert steps 1..6 into r.free. REQUIRES: an admission was taken.
  Error Claim(const HashPair& h, const ProbeResult& r, const Value& v);
  // Step 5: another slot on h's path holds h.
  bool HasOtherCopy(const HashPair& h, size_t mine) const;
  // "Move K out" of slot i into dest; kKeyNotFound if slot i holds no key.
  Error MoveSlotTo(size_t i, CMap& dest);
  // Erases the key in slot i, whose seq the caller locked at `stable`, and
  // unlocks it: the slot's stores, then its overflow count on the key's
  // path (`groups_passed` groups from h1's home) and the live count.
  void EraseLockedSlot(size_t i, uint64_t stable, uint64_t h1,
                       size_t groups_passed);

  // Adds or removes h's share of the overflow counts of the first
  // `groups_passed` groups of its path.
  void AddOverflow(uint64_t h1, size_t groups_passed);
  void RemoveOverflow(uint64_t h1, size_t groups_passed);

  // Read-mostly fields first; the live count is on its own line below.
  cmap_internal::GroupRange groups_{1};
  uint8_t* ctrl_ = cmap_internal::inert_table.ctrl;
  std::atomic<uint32_t>* overflow_ = cmap_internal::inert_table.overflow;
  Slots slots_;
  size_t admit_limit_ = 0;  // capacity_ once constructed, 0 while inert
  size_t capacity_;
  Error status_ = Error::kOk;
  void* ctrl_memory_ = nullptr;
  size_t ctrl_bytes_ = 0;
  void* slot_memory_ = nullptr;
  size_t slot_bytes_ = 0;
  RawAllocator alloc_;
  KeyHasher hasher_;

  // Written by every insert and erase; kept off the read-mostly lines.
  alignas(kCacheLineSize) std::atomic<size_t> live_{0};
};

// ---------------------------------------------------------------------------
// Implementation
// ---------------------------------------------------------------------------

template <typename Value, typename GroupImpl>
CMap<Value, GroupImpl>::CMap(size_t capacity, const KeyHasher& hasher,
                             RawAllocator alloc)
    : capacity_(capacity), alloc_(alloc), hasher_(hasher) {
  if (capacity > kMaxCapacity) {
    status_ = Error::kInvalidArgument;
    return;
  }
  const size_t groups = GroupsFor(capacity);
  const size_t slots = groups * kGroupWidth;
  const size_t ctrl_bytes = CtrlBytesFor(groups);
  const size_t slot_bytes = Slots::BytesFor(slots);
  void* ctrl = alloc_.Allocate(ctrl_bytes);
  void* slot = ctrl != nullptr ? alloc_.Allocate(slot_bytes) : nullptr;
  const auto aligned = [](void* p) {
    return reinterpret_cast<uintptr_t>(p) % kCacheLineSize == 0;
  };
  if (slot == nullptr || !aligned(ctrl) || !aligned(slot)) {
    if (ctrl != nullptr) alloc_.Deallocate(ctrl, ctrl_bytes);
    if (slot != nullptr) alloc_.Deallocate(slot, slot_bytes);
    status_ = Error::kAllocationFailed;
    return;
  }

  // Placement-new every atomic (report §3.17): raw memory holds no objects.
  // From a zeroing allocator the control bytes (EMPTY is stored as zero,
  // group.h), slots and overflow counts already hold their initial all-zero
  // bytes and are left untouched, so only the SENTINEL group is written now
  // and a page of the table enters the RSS when a key first lands on it
  // (slot.h, SlotArray::Init).
  auto* ctrl_bytes_ptr = static_cast<uint8_t*>(ctrl);
  if (!alloc_.zeroed) {
    std::memset(ctrl_bytes_ptr,
                cmap_internal::StoredCtrl(cmap_internal::kCtrlEmpty), slots);
  }
  std::memset(ctrl_bytes_ptr + slots,
              cmap_internal::StoredCtrl(cmap_internal::kCtrlSentinel),
              kGroupWidth);
  auto* overflow = reinterpret_cast<std::atomic<uint32_t>*>(
      ctrl_bytes_ptr + OverflowOffset(groups));
  if (!alloc_.zeroed) {
    for (size_t g = 0; g < groups; ++g) {
      new (&overflow[g]) std::atomic<uint32_t>(0);
    }
  }
  slots_.Init(slot, slots, alloc_.zeroed);

  ctrl_memory_ = ctrl;
  ctrl_bytes_ = ctrl_bytes;
  slot_memory_ = slot;
  slot_bytes_ = slot_bytes;
  ctrl_ = ctrl_bytes_ptr;
  overflow_ = overflow;
  groups_ = cmap_internal::GroupRange(groups);
  admit_limit_ = capacity;
}

template <typename Value, typename GroupImpl>
CMap<Value, GroupImpl>::~CMap() {
  // Every field is trivially destructible (static_asserts in slot.h).
  if (ctrl_memory_ != nullptr) alloc_.Deallocate(ctrl_memory_, ctrl_bytes_);
  if (slot_memory_ != nullptr) alloc_.Deallocate(slot_memory_, slot_bytes_);
}

template <typename Value, typename GroupImpl>
template <bool kFindDeleted, typename IsKey>
auto CMap<Value, GroupImpl>::Probe(const HashPair& h, IsKey&& is_key) const
    -> ProbeResult {
  const uint8_t h2s = cmap_internal::H2Short(h.h2);
  ProbeResult r;
  cmap_internal::ProbeSeq seq(h.h1, groups_);
  for (;; seq.Next()) {
    const size_t base = seq.group() * kGroupWidth;
    const GroupImpl g(ctrl_ + base);
    ++r.groups_visited;
    for (uint32_t i : g.Match(h2s)) {
      if (is_key(base + i)) {
        r.match = base + i;
        r.match_index = seq.index();
        return r;
      }
    }
    if constexpr (kFindDeleted) {
      if (r.free == kNoSlot) {
        if (const cmap_internal::BitMask deleted = g.MaskDeleted()) {
          r.free = base + deleted.LowestBitSet();
          r.free_index = seq.index();
        }
      }
    }
    if (const cmap_internal::BitMask empty = g.MaskEmpty()) {
      if constexpr (kFindDeleted) {
        if (r.free == kNoSlot) {
          r.free = base + empty.LowestBitSet();
          r.free_index = seq.index();
        }
      }
      return r;
    }
    // No displaced key runs past this group, so none lives beyond it.
    if (overflow_[seq.group()].load(std::memory_order_relaxed) == 0) break;
    if (seq.index() + 1 == groups_.size()) return r;  // visited every group
  }
  if constexpr (kFindDeleted) {
    // The key is absent and every group of its path so far is full: the
    // insert goes to the first free slot further on, displacing the key past
    // its home group. One exists (live <= capacity < slots) unless
    // concurrent inserts take them all while we look.
    while (r.free == kNoSlot && seq.index() + 1 < groups_.size()) {
      seq.Next();
      const size_t base = seq.group() * kGroupWidth;
      ++r.groups_visited;
      if (const cmap_internal::BitMask free = GroupImpl(ctrl_ + base).MaskFree()) {
        r.free = base + free.LowestBitSet();
        r.free_index = seq.index();
      }
    }
  }
  return r;
}

template <typename Value, typename GroupImpl>
bool CMap<Value, GroupImpl>::ReadIfKey(size_t i, const HashPair& h,
                                       Words& out, uint64_t* stable) const {
  const cmap_internal::SlotRef s = slots_[i];
  const uint8_t h2s = cmap_internal::H2Short(h.h2);
  for (cmap_internal::Backoff backoff;; backoff.Wait()) {
    // R1. Acquire: pairs with the last Unlock's release store.
    const uint64_t before = s.seq.load(std::memory_order_acquire);
    if (before & 1) continue;
    // R2. Unvalidated "not here" is fine; see "A slot erased and reused".
    if (LoadCtrl(i) != h2s ||
        s.fingerprint.load(std::memory_order_relaxed) != h.h2) {
      return false;
    }
    // R3.
    cmap_internal::LoadWords<Value>(s, before, out);
    // R4. The fence pairs with Lock's release fence: if R2..R3 saw any store
    // of a writer still inside, this reload sees its odd seq (or later).
    cmap_internal::AcquireFence();
    if (s.seq.load(std::memory_order_relaxed) == before) {
      *stable = before;
      return true;
    }
  }
}

template <typename Value, typename GroupImpl>
std::optional<Value> CMap<Value, GroupImpl>::Find(const HashPair& h) const {
  Words words;
  uint64_t stable;
  const ProbeResult r = Probe</*kFindDeleted=*/false>(
      h, [&](size_t i) { return ReadIfKey(i, h, words, &stable); });
  if (r.match == kNoSlot) return std::nullopt;
  return cmap_internal::FromWords<Value>(words);
}

template <typename Value, typename GroupImpl>
template <typename Fn>
bool CMap<Value, GroupImpl>::Visit(const HashPair& h, Fn&& fn) const {
  for (;;) {
    Words words;
    uint64_t stable;
    const ProbeResult r = Probe</*kFindDeleted=*/false>(
        h, [&](size_t i) { return ReadIfKey(i, h, words, &stable); });
    if (r.match == kNoSlot) return false;
    const Value value = cmap_internal::FromWords<Value>(words);
    std::invoke(fn, value);
    // R4 again, now around fn: the fence keeps fn's loads before the seq
    // reload. Unchanged seq: no writer entered the slot while fn ran.
    cmap_internal::AcquireFence();
    if (slots_[r.match].seq.load(std::memory_order_relaxed) == stable) {
      return true;
    }
  }
}

template <typename Value, typename GroupImpl>
template <typename Fn>
auto CMap<Value, GroupImpl>::TryVisit(const HashPair& h, Fn&& fn) const
    -> VisitOutcome {
  Words words;
  uint64_t stable;
  const ProbeResult r = Probe</*kFindDeleted=*/false>(
      h, [&](size_t i) { return ReadIfKey(i, h, words, &stable); });
  if (r.match == kNoSlot) return VisitOutcome::kAbsent;
  const Value value = cmap_internal::FromWords<Value>(words);
  std::invoke(fn, value);
  // As in Visit: the fence keeps fn's loads before the seq reload.
  cmap_internal::AcquireFence();
  return slots_[r.match].seq.load(std::memory_order_relaxed) == stable
             ? VisitOutcome::kVisited
             : VisitOutcome::kChanged;
}

template <typename Value, typename GroupImpl>
void CMap<Value, GroupImpl>::Prefetch(const HashPair& h, int step) const {
  if (!ok()) return;
  const size_t base = groups_.Home(h.h1) * kGroupWidth;
  if (step == 0) {
    __builtin_prefetch(ctrl_ + base);
    return;
  }
  const GroupImpl g(ctrl_ + base);
  for (uint32_t i : g.Match(cmap_internal::H2Short(h.h2))) {
    __builtin_prefetch(&slots_[base + i].seq);
  }
}

template <typename Value, typename GroupImpl>
CMapSetResult CMap<Value, GroupImpl>::Set(const HashPair& h, const Value& v) {
  const ProbeResult r = Probe</*kFindDeleted=*/true>(h, FingerprintIs(h));
  if (r.match != kNoSlot) {  // Update
    const cmap_internal::SlotRef s = slots_[r.match];
    uint64_t stable;
    if (!cmap_internal::TryLock(s.seq, &stable)) {
      return {Error::kAbandonedSet, false};
    }
    if (!HoldsKey(r.match, h)) {  // erased since the probe
      cmap_internal::Unlock(s.seq, stable);
      return {Error::kAbandonedSet, false};
    }
    cmap_internal::StoreWords<Value>(s, cmap_internal::ToWords(v));
    cmap_internal::Unlock(s.seq, stable);
    return {Error::kOk, false};
  }

  return Insert(h, r, v);
}

template <typename Value, typename GroupImpl>
CMapSetResult CMap<Value, GroupImpl>::Insert(const HashPair& h,
                                             const ProbeResult& r,
                                             const Value& v) {
  // Admission first: a CAS rather than fetch_add, so that the count never
  // exceeds capacity even transiently.
  size_t live = live_.load(std::memory_order_relaxed);
  do {
    if (live >= admit_limit_) return {ok() ? Error::kCacheFull : status_, false};
  } while (!live_.compare_exchange_weak(live, live + 1,
                                        std::memory_order_relaxed));
  const Error err = Claim(h, r, v);
  if (err != Error::kOk) live_.fetch_sub(1, std::memory_order_relaxed);
  return {err, err == Error::kOk};
}

template <typename Value, typename GroupImpl>
Error CMap<Value, GroupImpl>::Claim(const HashPair& h, const ProbeResult& r,
                                    const Value& v) {
  // Every free slot on the path was taken while we probed.
  if (r.free == kNoSlot) return Error::kAbandonedSet;
  const size_t target = r.free;
  const cmap_internal::SlotRef s = slots_[target];

  AddOverflow(h.h1, r.free_index);  // step 1
  uint64_t stable;
  if (!cmap_internal::TryLock(s.seq, &stable)) {  // step 2
    RemoveOverflow(h.h1, r.free_index);
    return Error::kAbandonedSet;
  }
  // Step 3. Written before the claim so that an inserter that sees our
  // control byte (step 5) also sees whose it is.
  const uint64_t old_fingerprint =
      s.fingerprint.load(std::memory_order_relaxed);
  s.fingerprint.store(h.h2, std::memory_order_relaxed);
  if (!ClaimCtrl(target, cmap_internal::H2Short(h.h2))) {  // step 4
    s.fingerprint.store(old_fingerprint, std::memory_order_relaxed);
    cmap_internal::Unlock(s.seq, stable);
    RemoveOverflow(h.h1, r.free_index);
    return Error::kAbandonedSet;
  }
  // Step 5. The fence orders our claim before the loads of the re-probe, for
  // both of two racing inserters; see "Duplicates".
  cmap_internal::SeqCstFence();
  if (HasOtherCopy(h, target)) {
    StoreCtrl(target, cmap_internal::kCtrlDeleted);
    s.fingerprint.store(0, std::memory_order_relaxed);
    cmap_internal::Unlock(s.seq, stable);
    RemoveOverflow(h.h1, r.free_index);
    return Error::kAbandonedSet;
  }
  cmap_internal::StoreWords<Value>(s, cmap_internal::ToWords(v));  // 6
  cmap_internal::Unlock(s.seq, stable);
  return Error::kOk;
}

template <typename Value, typename GroupImpl>
bool CMap<Value, GroupImpl>::HasOtherCopy(const HashPair& h,
                                          size_t mine) const {
  const ProbeResult other =
      Probe</*kFindDeleted=*/false>(h, [&](size_t i) {
        if (i == mine) return false;
        // Pairs with the other inserter's release claim of the control byte
        // this probe just matched: its fingerprint store is visible.
        cmap_internal::AcquireFence();
        return slots_[i].fingerprint.load(std::memory_order_relaxed) == h.h2;
      });
  return other.match != kNoSlot;
}

template <typename Value, typename GroupImpl>
template <typename Fn>
Error CMap<Value, GroupImpl>::UpdateInPlace(const HashPair& h, Fn&& fn) {
  const ProbeResult r = Probe</*kFindDeleted=*/false>(h, FingerprintIs(h));
  if (r.match == kNoSlot) return Error::kKeyNotFound;
  const cmap_internal::SlotRef s = slots_[r.match];
  uint64_t stable;
  if (!cmap_internal::TryLock(s.seq, &stable)) return Error::kAbandonedSet;
  if (!HoldsKey(r.match, h)) {
    cmap_internal::Unlock(s.seq, stable);
    return Error::kAbandonedSet;
  }
  // fn works on a copy: readers load these words concurrently, so they may
  // only be written with atomic stores, never through a Value&.
  Words words;
  cmap_internal::LoadWords<Value>(s, stable, words);
  Value value = cmap_internal::FromWords<Value>(words);
  std::invoke(std::forward<Fn>(fn), value);
  cmap_internal::StoreWords<Value>(s, cmap_internal::ToWords(value));
  cmap_internal::Unlock(s.seq, stable);
  return Error::kOk;
}

template <typename Value, typename GroupImpl>
FindAndEraseResult<Value> CMap<Value, GroupImpl>::FindAndEraseByHash(
    const HashPair& h) {
  const ProbeResult r = Probe</*kFindDeleted=*/false>(h, FingerprintIs(h));
  if (r.match == kNoSlot) return {Error::kKeyNotFound, std::nullopt};
  const cmap_internal::SlotRef s = slots_[r.match];
  uint64_t stable;
  if (!cmap_internal::TryLock(s.seq, &stable)) {
    return {Error::kAbandonedSet, std::nullopt};
  }
  if (!HoldsKey(r.match, h)) {
    cmap_internal::Unlock(s.seq, stable);
    return {Error::kAbandonedSet, std::nullopt};
  }
  Words words;
  cmap_internal::LoadWords<Value>(s, stable, words);
  EraseLockedSlot(r.match, stable, h.h1, r.match_index);
  return {Error::kOk, cmap_internal::FromWords<Value>(words)};
}

template <typename Value, typename GroupImpl>
void CMap<Value, GroupImpl>::EraseLockedSlot(size_t i, uint64_t stable,
                                             uint64_t h1,
                                             size_t groups_passed) {
  const cmap_internal::SlotRef s = slots_[i];
  StoreCtrl(i, cmap_internal::kCtrlDeleted);
  s.fingerprint.store(0, std::memory_order_relaxed);
  cmap_internal::StoreWords<Value>(s, Words{});
  cmap_internal::Unlock(s.seq, stable);
  RemoveOverflow(h1, groups_passed);
  live_.fetch_sub(1, std::memory_order_relaxed);
}

template <typename Value, typename GroupImpl>
size_t CMap<Value, GroupImpl>::MoveSomeTo(CMap& dest, size_t* cursor,
                                          size_t max_keys) {
  const size_t slots = slot_count();
  size_t moved = 0;
  for (size_t budget = std::min(max_keys, slots) * kGroupWidth;
       moved < max_keys && budget > 0 &&
       live_.load(std::memory_order_relaxed) > 0;
       --budget) {
    if (*cursor >= slots) *cursor = 0;
    if (cmap_internal::IsOccupied(LoadCtrl(*cursor))) {
      const Error err = MoveSlotTo(*cursor, dest);
      if (err == Error::kOk) {
        ++moved;
      } else if (err != Error::kKeyNotFound) {
        break;  // held, or refused: try this slot again next time
      }
    }
    ++*cursor;
  }
  return moved;
}

template <typename Value, typename GroupImpl>
Error CMap<Value, GroupImpl>::MoveSlotTo(size_t i, CMap& dest) {
  const cmap_internal::SlotRef s = slots_[i];
  uint64_t stable;
  if (!cmap_internal::TryLock(s.seq, &stable)) return Error::kAbandonedSet;
  if (!cmap_internal::IsOccupied(LoadCtrl(i))) {
    cmap_internal::Unlock(s.seq, stable);
    return Error::kKeyNotFound;
  }
  const uint64_t h2 = s.fingerprint.load(std::memory_order_relaxed);
  const HashPair h{h2, h2};
  Words words;
  cmap_internal::LoadWords<Value>(s, stable, words);
  const CMapSetResult r = dest.Set(h, cmap_internal::FromWords<Value>(words));
  if (r.err != Error::kOk) {
    cmap_internal::Unlock(s.seq, stable);
    return r.err;
  }
  // dest's insert (its Unlock is a release store, but of dest's seq, which a
  // reader of this table never loads) before any store of the erase below.
  cmap_internal::ReleaseFence();
  // Groups the key's path passed before slot i's: linear probing from home.
  const size_t home = groups_.Home(h.h1);
  const size_t group = i / kGroupWidth;
  EraseLockedSlot(i, stable, h.h1,
                  group >= home ? group - home
                                : group + groups_.size() - home);
  return Error::kOk;
}

template <typename Value, typename GroupImpl>
void CMap<Value, GroupImpl>::AddOverflow(uint64_t h1, size_t groups_passed) {
  cmap_internal::ProbeSeq seq(h1, groups_);
  for (; seq.index() < groups_passed; seq.Next()) {
    overflow_[seq.group()].fetch_add(1, std::memory_order_relaxed);
  }
}

template <typename Value, typename GroupImpl>
void CMap<Value, GroupImpl>::RemoveOverflow(uint64_t h1,
                                            size_t groups_passed) {
  cmap_internal::ProbeSeq seq(h1, groups_);
  for (; seq.index() < groups_passed; seq.Next()) {
    overflow_[seq.group()].fetch_sub(1, std::memory_order_relaxed);
  }
}

}  // namespace furrballs

#endif  // FURRBALLS_ENGINE_CMAP_CMAP_H_
