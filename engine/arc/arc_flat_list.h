// engine/arc/arc_flat_list.h: ARC's four lists (T1, T2, B1, B2) as flat,
// index-linked lists in one pre-allocated arena (report §5.22, ARC-FLATLL2).
//
// Thread safety: thread-compatible (REQUIRES external synchronization; in
// ConcurrentARC it is only touched under the write SpinLock).
//
// What a slot must name
//
//   A resident key (T1, T2) leaves the cache through CMap::FindAndEraseByHash
//   and the eviction callback, which need its whole 16-byte HashPair; at
//   most c keys are resident. A ghost (B1, B2) is only ever recognised
//   again, never named: a 64-bit fingerprint (the key's H2) is enough, and
//   ARC may hold up to 2c of them (Forget and ForceEvict leave the paper's
//   "ghosts <= c" behind; ForceEvict turns residents into ghosts and keeps
//   the directory total). So:
//
//   - One arena of 2c Slots of 12 bytes, shared by all four lists:
//     {word, prev + list tag, next}. A ghost's word is the high half of its
//     fingerprint; the index (arc_index.h) holds the low half as its tag,
//     and the high half picks the index's home bucket, so a ghost is found
//     and unindexed from its slot alone. A resident's word names its record.
//   - c key records of 16 bytes, one per resident key: its HashPair. A
//     record is taken when a key becomes resident and given back when it
//     becomes a ghost or leaves (free records chain through h1).
//
//   bytes per key slot (c = ARC capacity)   now     before (2c slots of
//                                                   24 B, the HashPair in
//                                                   every slot)
//   arena, 2c x 12                          24      48
//   key records, c x 16                     16      -
//   index, 2c x 8 x 4/3                     21.3    21.3
//   total (BytesFor)                        61.3    69.3
//
//   The two other layouts weighed: separate ghost records ({fingerprint,
//   links}, 16 bytes) beside resident records ({HashPair, links}, 24
//   bytes) need room for 2c ghosts, because ghosts alone can reach 2c:
//   24 + 32 + 21.3 = 77.3; an index whose buckets hold the whole 8-byte
//   fingerprint beside the slot has 12-byte buckets, 32 bytes per key for
//   the index alone, more than it saves in the arena.
//
// A false ghost hit: two keys with one fingerprint. A new key whose H2
// equals a ghost's is taken for that ghost: ARC adapts p as for a ghost hit
// (Case II or III) and admits the new key to T2 under its own HashPair,
// where a textbook ARC would have admitted it to T1. That changes one
// adaptation step and one list placement, never which value a key returns
// (CMap holds values; residents are matched on the whole HashPair). With a
// keyed 64-bit hash and at most 2c ghosts, a miss meets a false ghost hit
// with probability about 2c / 2^64: 1.1e-13 at c = 1M.
//
// Slots are handed out in arena order up to a high-water mark, then from a
// free list of removed slots chained through `next`, and key records
// likewise; so nothing is written at Create() and, from a zeroing
// allocator, the arena enters the RSS only as far as ARC has ever tracked
// keys. Outside growth nothing is allocated: pushing takes a slot, removing
// frees it, and moving a key between lists (T1 -> T2, T1 -> B1, ...) relinks
// the same slot.
//
// Growth: c may grow (and shrink: "Shrinking" below) while keys are
// tracked, without allocating or freeing under the caller's lock and
// without a long hold:
//
//   AllocateGrowth(c')  no lock: a new arena of 2c' slots, c' records and an
//                       index for 2c' keys.
//   BeginGrow(growth)   under the lock, O(1): c = c'; the index starts its
//                       incremental rehash (arc_index.h); the used part of
//                       the old arena and records (below their high-water
//                       marks) is still to be copied.
//   GrowStep(n)         under the lock: moves up to n index entries and
//                       copies up to 16n slots and 8n records (a few hundred
//                       bytes); true once all three are done. TakeRetired
//                       then hands the old index table, arena and records
//                       over, to be freed after the lock.
//
// While a growth runs, slot s lives in the old arena iff it is in the range
// not yet copied, [copied, copied + pending), which one unsigned compare
// tells. Outside growth that test is not even made: every operation that
// touches slots or records takes a mode, ArcMayGrow (the test on every
// access; the default) or ArcNotGrowing (no test; REQUIRES !growing()), and
// the entry points above (ArcPolicy::Access, ConcurrentARC's Set and drain)
// choose it once per ARC operation with WithGrowthMode. The ~10 tests an
// operation would make cost BM_ArcFlat 8-18% (docs/arc.md). The algorithms
// are written once; the mode only picks At/Record's access path. Measured against the other
// design the brief suggested, blocks behind a directory (no copy at all):
// the directory's dependent load cost BM_ArcFlat 14-19% on every operation
// forever after, the copy costs nothing once the growth ends
// (docs/arc.md). Its price is the old arena and records mapped until the
// end of the growth (GrowthPeakBytes).
//
// Shrinking (issue 13: the key table gives its memory back when the values
// grow). A smaller c' reuses the growth's copy, which needs every tracked
// slot below 2c' and every record below c' (the copy keeps slot and record
// numbers). The caller (ArcPolicy) first trims the lists to c''s bounds
// (at most c' resident, 2c' tracked), then:
//
//   BeginCompact(c')  under the lock, O(1): the free slot and record chains
//                     are set aside (`old_free_*`); from now on a freed slot
//                     below 2c' (record below c') goes on a new chain, one
//                     above is dropped (tagged kNone, never reused).
//   CompactStep(n)    under the lock, bounded: (1) moves up to 16n entries of
//                     the set-aside chains to the new ones (those below the
//                     limit) or drops them; (2) once they are empty, takes
//                     new slots only from the new chain or the high-water
//                     mark below 2c' and walks down from the high-water mark
//                     to 2c', moving each tracked slot it meets into a free
//                     one below (relinking its neighbours, renumbering its
//                     index entry); (3) walks the slots below 2c' and gives
//                     each resident whose record lies above c' a record
//                     below. True when all is done: the caller then installs
//                     a growth to c' (AllocateShrink, BeginGrow), whose copy
//                     and release run as for any growth.
//
// A free slot below the limit exists for every push and every move: the
// bounds leave at most 2c' tracked slots, so while one lies above 2c' (the
// move), or fewer than 2c' are tracked (a push), one below is free; once the
// set-aside chain is empty, every free slot below the high-water mark and
// the limit is on the new chain. Records likewise, with c' residents. The
// tests of slot and record allocation against compaction run only in
// ArcMayGrow mode, which growing() selects while compacting.
//
// Why one shared arena of 2c, not one arena of 2c per list as in the report:
// ARC bounds the sum, |T1| + |T2| + |B1| + |B2| <= 2c, not each list (any
// single list can reach 2c), so 2c slots in total are always enough, and
// per-list arenas would hold 8c slots of which at most 2c are ever used. The
// report's crash with per-list arenas of c is impossible here. The price is
// the per-slot list tag, which the membership test needs anyway (T1 ∪ T2 IS
// the cache; there is no separate cached-set).
//
// All operations are O(1). The lists run from MRU (head) to LRU (tail).
#ifndef FURRBALLS_ENGINE_ARC_ARC_FLAT_LIST_H_
#define FURRBALLS_ENGINE_ARC_ARC_FLAT_LIST_H_

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <optional>
#include <type_traits>
#include <utility>

#include <absl/base/attributes.h>
#include <absl/base/optimization.h>
#include <absl/status/status.h>
#include <absl/status/statusor.h>
#include <absl/strings/str_cat.h>

#include "engine/arc/arc_index.h"
#include "engine/arc/retired_memory.h"
#include "engine/common/hash_pair.h"
#include "engine/common/raw_allocator.h"

namespace furrballs {

// Where a key is. kNone: not tracked (or, for an eviction, dropped).
enum class ArcList : uint8_t { kT1 = 0, kT2 = 1, kB1 = 2, kB2 = 3, kNone = 4 };

inline constexpr bool IsResident(ArcList l) {
  return l == ArcList::kT1 || l == ArcList::kT2;
}
inline constexpr bool IsGhost(ArcList l) {
  return l == ArcList::kB1 || l == ArcList::kB2;
}

template <typename Index = ArcIndex>
class ArcFlatLists {
  // A slot's `prev` and list share one word: the list in the top 3 bits,
  // the index below, kPackedNil standing for kArcNil.
  static constexpr int kListShift = 29;
  static constexpr uint32_t kPackedNil = (uint32_t{1} << kListShift) - 1;
  static_assert(static_cast<uint32_t>(ArcList::kNone) < 8,
                "the list tag must fit the 3 bits above kListShift");

  struct Slot;

 public:
  // What AllocateGrowth allocated, for BeginGrow. Frees it unless installed.
  class Growth {
   public:
    Growth(Growth&& other) noexcept
        : capacity_(other.capacity_),
          arena_(std::exchange(other.arena_, nullptr)),
          keys_(std::exchange(other.keys_, nullptr)),
          index_(std::move(other.index_)),
          alloc_(other.alloc_) {}
    Growth& operator=(Growth&&) = delete;
    Growth(const Growth&) = delete;
    Growth& operator=(const Growth&) = delete;
    ~Growth() { FreeGeneration(alloc_, arena_, keys_, capacity_); }

    uint32_t capacity() const { return capacity_; }

   private:
    friend class ArcFlatLists;
    Growth(uint32_t capacity, RawAllocator alloc)
        : capacity_(capacity), alloc_(alloc) {}

    uint32_t capacity_;
    Slot* arena_ = nullptr;     // 2c slots
    HashPair* keys_ = nullptr;  // c records
    std::optional<Index> index_;
    RawAllocator alloc_;
  };

  // Lists for an ARC of capacity `capacity` (c): 2c slots in total, at most
  // c of them resident. c must leave 2c below kArcNil.
  static absl::StatusOr<ArcFlatLists> Create(uint32_t capacity,
                                             RawAllocator alloc) {
    if (capacity == 0 || capacity > kMaxCapacity) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ArcFlatLists: capacity ", capacity, " outside [1, ", kMaxCapacity,
          "]"));
    }
    absl::StatusOr<Growth> g = Allocate(capacity, alloc);
    if (!g.ok()) return g.status();
    return ArcFlatLists(*std::move(g));
  }

  // The largest c whose 2c slot indices fit the packed `prev` field below
  // its nil value.
  static constexpr uint32_t kMaxCapacity = (kPackedNil - 1) / 2;
  static_assert(2 * kMaxCapacity <= ArcIndex::kMaxKeys,
                "the index must hold every slot of the largest arena");

  // The bytes Create allocates for capacity c (arena, key records, index),
  // and what stays mapped after a growth to c.
  static constexpr size_t BytesFor(uint32_t capacity) {
    return ArenaBytes(capacity) + RecordBytes(capacity) +
           Index::BytesFor(2 * capacity);
  }
  // The most mapped at once while growing from `from` to `to`: both
  // generations, until TakeRetired.
  static constexpr size_t GrowthPeakBytes(uint32_t from, uint32_t to) {
    return BytesFor(from) + BytesFor(to);
  }

  ArcFlatLists(ArcFlatLists&& other) noexcept
      : arena_(std::exchange(other.arena_, nullptr)),
        keys_(std::exchange(other.keys_, nullptr)),
        old_arena_(std::exchange(other.old_arena_, nullptr)),
        old_keys_(std::exchange(other.old_keys_, nullptr)),
        arena_copied_(other.arena_copied_),
        arena_pending_(other.arena_pending_),
        keys_copied_(other.keys_copied_),
        keys_pending_(other.keys_pending_),
        arena_handed_out_(other.arena_handed_out_),
        keys_handed_out_(other.keys_handed_out_),
        compact_(other.compact_),
        old_capacity_(other.old_capacity_),
        capacity_(other.capacity_),
        free_head_(other.free_head_),
        high_water_(other.high_water_),
        free_record_(other.free_record_),
        record_high_water_(other.record_high_water_),
        lists_(other.lists_),
        index_(std::move(other.index_)),
        alloc_(other.alloc_) {}
  ArcFlatLists& operator=(ArcFlatLists&&) = delete;
  ArcFlatLists(const ArcFlatLists&) = delete;
  ArcFlatLists& operator=(const ArcFlatLists&) = delete;
  ~ArcFlatLists() {
    FreeGeneration(alloc_, arena_, keys_, capacity_);
    FreeGeneration(alloc_, old_arena_, old_keys_, old_capacity_);
  }

  // The slot tracking `key`, or kArcNil: the resident slot holding exactly
  // `key`, else a ghost slot with its fingerprint (see "A false ghost hit";
  // a resident wins, so a key is never taken for a ghost while resident).
  //
  // This and every operation below that takes a `Mode` (ArcMayGrow by
  // default) run with ArcNotGrowing only when !growing().
  template <typename Mode = ArcMayGrow>
  uint32_t Find(const HashPair& key, Mode mode = {}) const {
    return index_.Find(
        FingerprintOf(key),
        [this, &key, mode](uint32_t s) {
          const Slot& slot = At(s, mode);
          if (IsResident(slot.list())) {
            return Record(slot.word, mode) == key ? ArcMatch::kKey
                                                  : ArcMatch::kNo;
          }
          return slot.word == Index::HighOf(key.h2) ? ArcMatch::kFingerprint
                                                    : ArcMatch::kNo;
        },
        mode);
  }
  // Find, then MoveToFront of what it found, in three steps that a caller
  // with many keys to move runs ahead, each step for every key before the
  // next step for any, so that the keys' cache misses overlap instead of
  // queueing one after another: step 0 brings in the index's home bucket,
  // step 1 the arena slot it names, step 2 that slot's key record (a ghost
  // has none) and its neighbours in its list, which the move relinks. Each
  // step reads only lines the step before brought in. Nothing is changed;
  // a prefetch of the wrong line (a tag shared with another key, a
  // neighbour that moves before its turn) costs only that line.
  template <typename Mode = ArcMayGrow>
  void PrefetchFindAndMove(const HashPair& key, int step,
                           Mode mode = {}) const {
    if (step == 0) {
      index_.PrefetchHome(FingerprintOf(key));
      return;
    }
    const uint32_t s = index_.FirstTagged(FingerprintOf(key));
    if (s == kArcNil) return;
    const Slot& slot = At(s, mode);
    if (step == 1) {
      __builtin_prefetch(&slot);
      return;
    }
    if (IsResident(slot.list())) __builtin_prefetch(&Record(slot.word, mode));
    if (slot.prev() != kArcNil) __builtin_prefetch(&At(slot.prev(), mode));
    if (slot.next != kArcNil) __builtin_prefetch(&At(slot.next, mode));
  }
  // The list `key` is on (kNone if untracked).
  ArcList Where(const HashPair& key) const {
    const uint32_t s = Find(key);
    return s == kArcNil ? ArcList::kNone : At(s).list();
  }

  // Calls fn(ArcNotGrowing{}) outside growth, else fn(ArcMayGrow{}): the
  // one test for a whole operation whose body fn runs in that mode.
  template <typename Fn>
  decltype(auto) WithGrowthMode(Fn&& fn) const {
    if (growing()) return fn(ArcMayGrow{});
    return fn(ArcNotGrowing{});
  }

  // The key of a resident slot. REQUIRES: IsResident(list_of(slot)); a
  // ghost keeps only its fingerprint.
  template <typename Mode = ArcMayGrow>
  const HashPair& key(uint32_t slot, Mode mode = {}) const {
    return Record(At(slot, mode).word, mode);
  }
  template <typename Mode = ArcMayGrow>
  ArcList list_of(uint32_t slot, Mode mode = {}) const {
    return At(slot, mode).list();
  }
  // Toward the LRU end; kArcNil after the tail.
  uint32_t next(uint32_t slot) const { return At(slot).next; }
  // Toward the MRU end; kArcNil before the head.
  uint32_t prev(uint32_t slot) const { return At(slot).prev(); }

  uint32_t size(ArcList l) const { return head(l).size; }
  uint32_t mru(ArcList l) const { return head(l).first; }
  uint32_t lru(ArcList l) const { return head(l).last; }
  uint32_t tracked() const {
    return size(ArcList::kT1) + size(ArcList::kT2) + size(ArcList::kB1) +
           size(ArcList::kB2);
  }
  uint32_t resident() const { return size(ArcList::kT1) + size(ArcList::kT2); }
  uint32_t capacity() const { return capacity_; }
  uint32_t slot_count() const { return 2 * capacity_; }
  // Everything mapped now (while growing: the old generation too).
  size_t memory_bytes() const {
    size_t total = ArenaBytes(capacity_) + RecordBytes(capacity_);
    if (old_arena_ != nullptr) {
      total += ArenaBytes(old_capacity_) + RecordBytes(old_capacity_);
    }
    return total + index_.memory_bytes();
  }

  // Tracks `key` at the MRU end of `l` (a ghost list keeps only its
  // fingerprint). Returns its slot, or kArcNil if the arena is exhausted or
  // `l` is resident and c keys already are (ARC's bounds make either a
  // caller bug). REQUIRES: `key` is untracked; l != kNone.
  template <typename Mode = ArcMayGrow>
  uint32_t PushFront(ArcList l, const HashPair& key, Mode mode = {}) {
    if (IsResident(l) && resident() == capacity_) return kArcNil;
    uint32_t s = free_head_;
    if (Mode::value && ABSL_PREDICT_FALSE(compact_.on)) {
      s = CompactTakeSlot();
      if (s == kArcNil) return kArcNil;
    } else if (s != kArcNil) {
      free_head_ = At(s, mode).next;
    } else if (high_water_ < slot_count()) {
      s = high_water_++;
    } else {
      return kArcNil;
    }
    At(s, mode).word =
        IsResident(l) ? TakeRecord(key, mode) : Index::HighOf(key.h2);
    Link(s, l, mode);
    index_.Insert(FingerprintOf(key), s);
    return s;
  }

  // Moves a tracked slot to the MRU end of `l` (the same list or another).
  // A resident that becomes a ghost gives its record back.
  // REQUIRES: not a ghost becoming resident (that is Revive).
  template <typename Mode = ArcMayGrow>
  void MoveToFront(uint32_t slot, ArcList l, Mode mode = {}) {
    Slot& s = At(slot, mode);
    if (IsResident(s.list()) && IsGhost(l)) {
      const uint32_t record = s.word;
      s.word = Index::HighOf(Record(record, mode).h2);
      GiveBackRecord(record, mode);
    }
    Unlink(slot, mode);
    Link(slot, l, mode);
  }

  // Moves a ghost slot to the MRU end of resident list `l`, as `key`: the
  // key whose fingerprint found the ghost (Find(key) == slot).
  // REQUIRES: IsGhost(list_of(slot)), IsResident(l), fewer than c resident.
  template <typename Mode = ArcMayGrow>
  void Revive(uint32_t slot, ArcList l, const HashPair& key, Mode mode = {}) {
    At(slot, mode).word = TakeRecord(key, mode);
    Unlink(slot, mode);
    Link(slot, l, mode);
  }

  // Forgets a tracked slot: unlinks it, unindexes its key, frees it.
  template <typename Mode = ArcMayGrow>
  void Remove(uint32_t slot, Mode mode = {}) {
    Unlink(slot, mode);
    index_.Erase(
        HighOfSlot(slot, mode), slot,
        [this, mode](uint32_t s) { return HighOfSlot(s, mode); }, mode);
    Slot& s = At(slot, mode);
    if (IsResident(s.list())) GiveBackRecord(s.word, mode);
    s.Set(ArcList::kNone, kArcNil);
    if (Mode::value && ABSL_PREDICT_FALSE(compact_.on) &&
        slot >= compact_.slot_limit) {
      return;  // above the shrink's arena: dropped, never reused
    }
    s.next = free_head_;
    free_head_ = slot;
  }

  // ---- Growth (see the file comment) ----

  // Allocates the arena, records and index of capacity `new_capacity`.
  // Takes no lock: reads only c, which changes in BeginGrow alone.
  // REQUIRES: !growing(), and no BeginGrow runs concurrently (the owner
  // serializes growths). InvalidArgument unless c < new_capacity <=
  // kMaxCapacity; ResourceExhausted if an allocation fails.
  absl::StatusOr<Growth> AllocateGrowth(uint32_t new_capacity) const {
    if (new_capacity <= capacity_ || new_capacity > kMaxCapacity) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ArcFlatLists: cannot grow from capacity ", capacity_, " to ",
          new_capacity, " (must be larger, at most ", kMaxCapacity, ")"));
    }
    return Allocate(new_capacity, alloc_);
  }

  // Installs `growth` (from this object's AllocateGrowth, with nothing
  // installed since): O(1), allocates and frees nothing. REQUIRES:
  // !growing().
  void BeginGrow(Growth&& growth) {
    old_capacity_ = capacity_;
    capacity_ = growth.capacity_;
    old_arena_ = std::exchange(arena_, std::exchange(growth.arena_, nullptr));
    old_keys_ = std::exchange(keys_, std::exchange(growth.keys_, nullptr));
    // Only what was ever used needs copying; the rest of the new arena is
    // as fresh as the old one's was.
    arena_copied_ = 0;
    arena_pending_ = high_water_;
    keys_copied_ = 0;
    keys_pending_ = record_high_water_;
    arena_handed_out_ = 0;
    keys_handed_out_ = 0;
    index_.BeginGrow(*std::move(growth.index_));
  }

  // Moves up to `max_moves` index entries into the bigger table and copies
  // up to 16 * max_moves slots and 8 * max_moves records into the new
  // arena. Returns true once all of it is done (then TakeRetired frees the
  // old generation). With `released`, also hands it the whole pages of the
  // old index, arena and records that the cursors left behind, in batches
  // of at least kReleaseBatchBytes each, to give back after the lock: no
  // operation reads the old arena or records below their copy cursor (At
  // and Record go to the new ones there), nor the old index below its scan
  // (ArcIndex::TakeReleasable).
  bool GrowStep(size_t max_moves, RetiredMemory* released = nullptr) {
    const bool index_done = index_.MigrateSome(
        max_moves, [this](uint32_t s) { return HighOfSlot(s); });
    CopySome(old_arena_, arena_, 16 * max_moves, &arena_copied_,
             &arena_pending_);
    CopySome(old_keys_, keys_, 8 * max_moves, &keys_copied_, &keys_pending_);
    if (released != nullptr) {
      released->AddRelease(index_.TakeReleasable(kReleaseBatchBytes), alloc_);
      released->AddRelease(
          TakeCopied(old_arena_, arena_copied_, &arena_handed_out_), alloc_);
      released->AddRelease(
          TakeCopied(old_keys_, keys_copied_, &keys_handed_out_), alloc_);
    }
    return index_done && arena_pending_ == 0 && keys_pending_ == 0;
  }

  // The least a GrowStep hands out for release from one array: fewer,
  // larger madvise calls.
  static constexpr size_t kReleaseBatchBytes = 64 << 10;

  // From BeginGrow until TakeRetired has taken the old generation, and
  // while compacting for a shrink (so that WithGrowthMode picks ArcMayGrow).
  bool growing() const { return old_arena_ != nullptr || compact_.on; }

  // ---- Shrinking (see the file comment) ----

  // Allocates the arena, records and index of capacity `new_capacity` for
  // a shrink (installed by BeginGrow once CompactStep is done). Takes no
  // lock, as AllocateGrowth. InvalidArgument unless 0 < new_capacity < c.
  absl::StatusOr<Growth> AllocateShrink(uint32_t new_capacity) const {
    if (new_capacity == 0 || new_capacity >= capacity_) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ArcFlatLists: cannot shrink from capacity ", capacity_, " to ",
          new_capacity));
    }
    return Allocate(new_capacity, alloc_);
  }

  // Starts compacting toward capacity `new_capacity`. O(1). REQUIRES:
  // !growing(); at most new_capacity keys resident and 2 * new_capacity
  // tracked, now and after every later operation (ArcPolicy's trim and
  // its bounds for the smaller c).
  void BeginCompact(uint32_t new_capacity) {
    compact_ = Compaction{};
    compact_.on = true;
    compact_.slot_limit = 2 * new_capacity;
    compact_.record_limit = new_capacity;
    compact_.old_free_slot = std::exchange(free_head_, kArcNil);
    compact_.old_free_record = std::exchange(free_record_, kArcNil);
  }
  // Bounded work toward the compaction (about 16 * max_moves slots or
  // records visited). True when every tracked slot lies below 2c' and every
  // record in use below c'; compacting() is then false.
  bool CompactStep(size_t max_moves);
  bool compacting() const { return compact_.on; }

  // Once GrowStep returned true: hands the old index table, arena and
  // records to *out (free them after the lock) and ends the growth. No-op
  // otherwise.
  void TakeRetired(RetiredMemory* out) {
    if (!growing() || arena_pending_ != 0 || keys_pending_ != 0) return;
    const std::pair<void*, size_t> old_index = index_.TakeRetired();
    if (old_index.first == nullptr) return;  // the index is still moving
    out->Add(old_index.first, old_index.second, alloc_);
    out->Add(std::exchange(old_arena_, nullptr), ArenaBytes(old_capacity_),
             alloc_);
    out->Add(std::exchange(old_keys_, nullptr), RecordBytes(old_capacity_),
             alloc_);
  }

 private:
  struct Slot {
    uint32_t word;  // resident: its key record; ghost: fingerprint >> 32
    uint32_t prev_and_list;
    uint32_t next;

    ArcList list() const {
      return static_cast<ArcList>(prev_and_list >> kListShift);
    }
    uint32_t prev() const {
      const uint32_t p = prev_and_list & kPackedNil;
      return p == kPackedNil ? kArcNil : p;
    }
    void Set(ArcList l, uint32_t prev) {
      prev_and_list = (static_cast<uint32_t>(l) << kListShift) |
                      (prev == kArcNil ? kPackedNil : prev);
    }
    void SetPrev(uint32_t prev) { Set(list(), prev); }
  };
  static_assert(sizeof(Slot) == 12 && alignof(Slot) == 4,
                "a slot is three 32-bit words (a ghost's fingerprint half or "
                "a resident's record, and two links, one carrying the list "
                "tag): 24 bytes per cached key for the 2c slots");
  static_assert(std::is_trivially_copyable_v<Slot> &&
                    std::is_trivially_destructible_v<Slot> &&
                    std::is_trivially_copyable_v<HashPair>,
                "the arena and the records are raw memory that is never "
                "constructed or destroyed; every field is written before it "
                "is read, and a growth copies them with memcpy");

  struct ListHead {
    uint32_t first = kArcNil;  // MRU
    uint32_t last = kArcNil;   // LRU
    uint32_t size = 0;
  };

  static constexpr size_t ArenaBytes(uint32_t capacity) {
    return size_t{2} * capacity * sizeof(Slot);
  }
  static constexpr size_t RecordBytes(uint32_t capacity) {
    return size_t{capacity} * sizeof(HashPair);
  }
  // The index's key: H2, already uniform (part of a keyed XXH3-128).
  static uint64_t FingerprintOf(const HashPair& key) { return key.h2; }

  // The arena, records and index of capacity c.
  static absl::StatusOr<Growth> Allocate(uint32_t capacity,
                                         RawAllocator alloc) {
    Growth g(capacity, alloc);
    absl::StatusOr<Index> index = Index::Create(2 * capacity, alloc);
    if (!index.ok()) return index.status();
    g.index_.emplace(*std::move(index));
    g.arena_ = static_cast<Slot*>(alloc.Allocate(ArenaBytes(capacity)));
    if (g.arena_ == nullptr) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "ArcFlatLists: cannot allocate ", ArenaBytes(capacity), " bytes"));
    }
    g.keys_ = static_cast<HashPair*>(alloc.Allocate(RecordBytes(capacity)));
    if (g.keys_ == nullptr) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "ArcFlatLists: cannot allocate ", RecordBytes(capacity), " bytes"));
    }
    return g;
  }

  explicit ArcFlatLists(Growth&& g)
      : arena_(std::exchange(g.arena_, nullptr)),
        keys_(std::exchange(g.keys_, nullptr)),
        capacity_(g.capacity_),
        free_head_(kArcNil),
        index_(*std::move(g.index_)),
        alloc_(g.alloc_) {}

  // The whole pages of an old array below its first `copied` entries that
  // were not handed out yet (*handed_out bytes were), once a batch is ready.
  template <typename T>
  static RawAllocator::PageSpan TakeCopied(T* old, uint32_t copied,
                                           size_t* handed_out) {
    const size_t end = size_t{copied} * sizeof(T);
    if (old == nullptr || end < *handed_out + kReleaseBatchBytes) return {};
    const RawAllocator::PageSpan span =
        RawAllocator::WholePagesBetween(old, *handed_out, end);
    *handed_out = end;
    return span;
  }

  // Copies up to `max` entries of the range still in the old array.
  template <typename T>
  static void CopySome(const T* from, T* to, size_t max, uint32_t* copied,
                       uint32_t* pending) {
    const uint32_t n = static_cast<uint32_t>(std::min<size_t>(max, *pending));
    if (n == 0) return;
    std::memcpy(to + *copied, from + *copied, size_t{n} * sizeof(T));
    *copied += n;
    *pending -= n;
  }

  // Slot s, in the old arena while it is in the range not yet copied
  // ([arena_copied_, arena_copied_ + arena_pending_)); ArcNotGrowing skips
  // the test. The null test comes first for the compiler's sake: a slot is
  // uint32_t words, so a store to one may alias the uint32_t counters,
  // which it must then reload after every store; a store through uint32_t
  // never aliases a pointer, so the test outside growth stays in a register
  // (measured: testing the counters alone cost BM_ArcFlat 6-15%).
  template <typename Mode = ArcMayGrow>
  Slot& At(uint32_t s, Mode = {}) const {
    if (Mode::value && ABSL_PREDICT_FALSE(old_arena_ != nullptr) &&
        s - arena_copied_ < arena_pending_) {
      return old_arena_[s];
    }
    return arena_[s];
  }
  template <typename Mode = ArcMayGrow>
  HashPair& Record(uint32_t r, Mode = {}) const {
    if (Mode::value && ABSL_PREDICT_FALSE(old_keys_ != nullptr) &&
        r - keys_copied_ < keys_pending_) {
      return old_keys_[r];
    }
    return keys_[r];
  }

  // Frees an arena and records of capacity c (either may be null).
  static void FreeGeneration(RawAllocator alloc, Slot* arena, HashPair* keys,
                             uint32_t capacity) {
    if (arena != nullptr) alloc.Deallocate(arena, ArenaBytes(capacity));
    if (keys != nullptr) alloc.Deallocate(keys, RecordBytes(capacity));
  }

  ListHead& head(ArcList l) { return lists_[static_cast<size_t>(l)]; }
  const ListHead& head(ArcList l) const {
    return lists_[static_cast<size_t>(l)];
  }

  // The high half of a tracked slot's fingerprint (the index's home).
  template <typename Mode = ArcMayGrow>
  uint32_t HighOfSlot(uint32_t s, Mode mode = {}) const {
    const Slot& slot = At(s, mode);
    return IsResident(slot.list()) ? Index::HighOf(Record(slot.word, mode).h2)
                                   : slot.word;
  }

  // A free record holding `key`. REQUIRES: fewer than c keys resident (so a
  // record is free).
  template <typename Mode>
  uint32_t TakeRecord(const HashPair& key, Mode mode) {
    uint32_t r = free_record_;
    if (Mode::value && ABSL_PREDICT_FALSE(compact_.on)) {
      r = CompactTakeRecord();
    } else if (r != kArcNil) {
      free_record_ = static_cast<uint32_t>(Record(r, mode).h1);
    } else {
      r = record_high_water_++;
    }
    Record(r, mode) = key;
    return r;
  }
  template <typename Mode>
  void GiveBackRecord(uint32_t r, Mode mode) {
    if (Mode::value && ABSL_PREDICT_FALSE(compact_.on) &&
        r >= compact_.record_limit) {
      return;  // above the shrink's records: dropped, never reused
    }
    Record(r, mode).h1 = free_record_;
    free_record_ = r;
  }

  template <typename Mode>
  ABSL_ATTRIBUTE_ALWAYS_INLINE void Link(uint32_t s, ArcList l, Mode mode) {
    ListHead& h = head(l);
    Slot& slot = At(s, mode);
    slot.Set(l, kArcNil);
    slot.next = h.first;
    if (h.first != kArcNil) {
      At(h.first, mode).SetPrev(s);
    } else {
      h.last = s;
    }
    h.first = s;
    ++h.size;
  }

  template <typename Mode>
  ABSL_ATTRIBUTE_ALWAYS_INLINE void Unlink(uint32_t s, Mode mode) {
    Slot& slot = At(s, mode);
    ListHead& h = head(slot.list());
    const uint32_t prev = slot.prev();
    if (prev != kArcNil) {
      At(prev, mode).next = slot.next;
    } else {
      h.first = slot.next;
    }
    if (slot.next != kArcNil) {
      At(slot.next, mode).SetPrev(prev);
    } else {
      h.last = prev;
    }
    --h.size;
  }

  // A compaction before a shrink (BeginCompact): the chains set aside, the
  // limits, and where the walks of steps (2) and (3) are.
  struct Compaction {
    bool on = false;
    bool chains_done = false;  // step (1) over: no slot above the limits
                               // is handed out any more
    uint32_t slot_limit = 0;    // 2c'
    uint32_t record_limit = 0;  // c'
    uint32_t old_free_slot = kArcNil;
    uint32_t old_free_record = kArcNil;
    uint32_t top = 0;   // step (2): slots [limit, top) may still be tracked
    uint32_t scan = 0;  // step (3): slots below it have their records below
  };

  // A free slot during compaction: the new chain, the set-aside one, then
  // the high-water mark (below the limit once the chains are done).
  uint32_t CompactTakeSlot() {
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
  uint32_t CompactTakeRecord() {
    uint32_t r = free_record_;
    if (r != kArcNil) {
      free_record_ = static_cast<uint32_t>(Record(r).h1);
      return r;
    }
    r = compact_.old_free_record;
    if (r != kArcNil) {
      compact_.old_free_record = static_cast<uint32_t>(Record(r).h1);
      return r;
    }
    return record_high_water_++;  // below the limit once the chains are done
                                  // (a free record exists: fewer than c'
                                  // are resident, or one is being moved)
  }
  // Moves tracked slot `from` to free slot `to`: its neighbours, its list's
  // ends and its index entry follow.
  void Relocate(uint32_t from, uint32_t to) {
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

  Slot* arena_;     // 2c slots
  HashPair* keys_;  // c records: the keys of resident slots
  // While growing: the previous generation (c = old_capacity_), of which
  // the entries [copied, copied + pending) are not copied yet.
  Slot* old_arena_ = nullptr;
  HashPair* old_keys_ = nullptr;
  uint32_t arena_copied_ = 0;
  uint32_t arena_pending_ = 0;
  uint32_t keys_copied_ = 0;
  uint32_t keys_pending_ = 0;
  // Bytes of the old arena and records handed out for release (TakeCopied).
  size_t arena_handed_out_ = 0;
  size_t keys_handed_out_ = 0;
  Compaction compact_;  // before a shrink (BeginCompact)
  uint32_t old_capacity_ = 0;
  uint32_t capacity_;
  uint32_t free_head_;   // removed slots, chained through `next`
  uint32_t high_water_ = 0;  // slots [high_water_, 2c) never used
  uint32_t free_record_ = kArcNil;  // given-back records, chained through h1
  uint32_t record_high_water_ = 0;  // records [this, c) never used
  std::array<ListHead, 4> lists_{};
  Index index_;
  RawAllocator alloc_;
};

template <typename Index>
bool ArcFlatLists<Index>::CompactStep(size_t max_moves) {
  if (!compact_.on) return true;
  Compaction& c = compact_;
  size_t budget = 16 * max_moves;
  // (1) The set-aside chains: keep what lies below the limits.
  while (budget > 0 && c.old_free_slot != kArcNil) {
    --budget;
    const uint32_t s = c.old_free_slot;
    c.old_free_slot = At(s).next;
    if (s < c.slot_limit) {
      At(s).next = free_head_;
      free_head_ = s;
    }
  }
  while (budget > 0 && c.old_free_record != kArcNil) {
    --budget;
    const uint32_t r = c.old_free_record;
    c.old_free_record = static_cast<uint32_t>(Record(r).h1);
    if (r < c.record_limit) {
      Record(r).h1 = free_record_;
      free_record_ = r;
    }
  }
  if (c.old_free_slot != kArcNil || c.old_free_record != kArcNil) {
    return false;
  }
  if (!c.chains_done) {
    // From here on nothing above the limits is handed out: the high-water
    // marks beyond them stop, and what is tracked above them is what step
    // (2) and (3) move.
    c.chains_done = true;
    c.top = high_water_;
    // Every record below both marks is in use or on the new chain; those
    // above the limit that are in use are step (3)'s.
    record_high_water_ = std::min(record_high_water_, c.record_limit);
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
  // (3) Records above the limit move below it.
  while (budget > 0 && c.scan < high_water_) {
    --budget;
    Slot& slot = At(c.scan++);
    if (!IsResident(slot.list()) || slot.word < c.record_limit) continue;
    const uint32_t r = CompactTakeRecord();
    Record(r) = Record(slot.word);
    slot.word = r;
  }
  if (c.scan < high_water_) return false;
  c.on = false;
  return true;
}

}  // namespace furrballs

#endif  // FURRBALLS_ENGINE_ARC_ARC_FLAT_LIST_H_
