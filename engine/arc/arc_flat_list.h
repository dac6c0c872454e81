// engine/arc/arc_flat_list.h: ARC's four lists (T1, T2, B1, B2) as flat,
// index-linked lists in one pre-allocated arena (report §5.22, ARC-FLATLL2).
//
// Thread safety: thread-compatible (REQUIRES external synchronization; in
// ConcurrentARC it is only touched under the write SpinLock).
//
// Keys are fingerprints
//
//   ARC identifies a key by its fingerprint, the 64-bit H2 of its HashPair,
//   resident or ghost alike: the node's key table is keyed by H2 alone too
//   (ResizableCMap's TableKey(h) = {h2, h2}), so H2 is all it takes to name
//   a victim to the table. ARC may hold up to 2c keys (Forget and
//   ForceEvict leave the paper's "ghosts <= c" behind; ForceEvict turns
//   residents into ghosts and keeps the directory total). So:
//
//   - One arena of 2c Slots of 12 bytes, shared by all four lists:
//     {word, prev + list tag, next}. The word is the high half of the
//     key's fingerprint; the index (arc_index.h) holds the low half as its
//     tag, and the high half picks the index's home bucket, so a key is
//     found, unindexed and named (fingerprint(): a walk from the home to
//     the bucket that names the slot) from its slot alone.
//
//   Bytes per key slot (c = ARC capacity): arena 2c x 12 = 24, index
//   2c x 8 x 4/3 = 21.3, total (BytesFor) 45.3. Until 2026-11-25 a
//   resident's word named a 16-byte key record (its HashPair; 61.3 B in
//   all); the table never used its H1, and the spill tier, which needs a
//   victim's real H1, rehashes the key stored in the victim's entry. The
//   price: naming a victim walks its index cluster from the home bucket
//   (the lines its Remove reads next). docs/arc.md, "Keys are
//   fingerprints", has the table of layouts and the ones weighed.
//
// Two keys with one fingerprint are one key to ARC, as they are to the
// table. A new key whose H2 equals a ghost's is taken for that ghost: ARC
// adapts p as for a ghost hit (Case II or III) and admits it to T2 where a
// textbook ARC would have admitted it to T1. A key whose H2 equals a
// resident's is taken for that resident: a hit (Case I), as the table
// takes its Set for an overwrite of the resident's entry. That changes
// one adaptation step or one list position, never which value a key
// returns (the engine compares the full key stored with the value on
// every hit). With a keyed 64-bit hash and at most 2c keys tracked, a
// miss meets a false match with probability about 2c / 2^64: 1.1e-13 at
// c = 1M.
//
// Slots are handed out in arena order up to a high-water mark, then from a
// free list of removed slots chained through `next`; so nothing is written
// at Create() and, from a zeroing allocator, the arena enters the RSS only
// as far as ARC has ever tracked keys. Outside growth nothing is allocated:
// pushing takes a slot, removing frees it, and moving a key between lists
// (T1 -> T2, T1 -> B1, B1 -> T2, ...) relinks the same slot.
//
// Growth: c may grow (and shrink: "Shrinking" below) while keys are
// tracked, without allocating or freeing under the caller's lock and
// without a long hold:
//
//   AllocateGrowth(c')  no lock: a new arena of 2c' slots and an index for
//                       2c' keys.
//   BeginGrow(growth)   under the lock, O(1): c = c'; the index starts its
//                       incremental rehash (arc_index.h); the used part of
//                       the old arena (below its high-water mark) is still
//                       to be copied.
//   GrowStep(n)         under the lock: moves up to n index entries and
//                       copies up to 16n slots (a few hundred bytes); true
//                       once both are done. TakeRetired then hands the old
//                       index table and arena over, to be freed after the
//                       lock.
//
// While a growth runs, slot s lives in the old arena iff it is in the range
// not yet copied, [copied, copied + pending), which one unsigned compare
// tells. Outside growth that test is not even made: every operation that
// touches slots takes a mode, ArcMayGrow (the test on every access; the
// default) or ArcNotGrowing (no test; REQUIRES !growing()), and the entry
// points above (ArcPolicy::Access, ConcurrentARC's Set and drain) choose it
// once per ARC operation with WithGrowthMode. The ~10 tests an operation
// would make cost BM_ArcFlat 8-18% (docs/arc.md). The algorithms are
// written once; the mode only picks At's access path. The copy, not blocks
// behind a directory, because the directory's dependent load cost
// BM_ArcFlat 14-19% on every operation forever after (docs/arc.md); its
// price is the old arena mapped until the growth ends (GrowthPeakBytes).
//
// Shrinking (issue 13): a smaller c' first compacts the arena so that
// every tracked slot lies below 2c' (BeginCompact, CompactStep), then
// installs a growth to c' whose copy keeps slot numbers; how, and why a
// moved slot keeps its name, in arc_flat_list_compact.h.
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
          index_(std::move(other.index_)),
          alloc_(other.alloc_) {}
    Growth& operator=(Growth&&) = delete;
    Growth(const Growth&) = delete;
    Growth& operator=(const Growth&) = delete;
    ~Growth() { FreeArena(alloc_, arena_, capacity_); }

    uint32_t capacity() const { return capacity_; }

   private:
    friend class ArcFlatLists;
    Growth(uint32_t capacity, RawAllocator alloc)
        : capacity_(capacity), alloc_(alloc) {}

    uint32_t capacity_;
    Slot* arena_ = nullptr;  // 2c slots
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

  // The bytes Create allocates for capacity c (arena and index), and what
  // stays mapped after a growth to c.
  static constexpr size_t BytesFor(uint32_t capacity) {
    return ArenaBytes(capacity) + Index::BytesFor(2 * capacity);
  }
  // The most mapped at once while growing from `from` to `to`: both
  // generations, until TakeRetired.
  static constexpr size_t GrowthPeakBytes(uint32_t from, uint32_t to) {
    return BytesFor(from) + BytesFor(to);
  }

  ArcFlatLists(ArcFlatLists&& other) noexcept
      : arena_(std::exchange(other.arena_, nullptr)),
        old_arena_(std::exchange(other.old_arena_, nullptr)),
        arena_copied_(other.arena_copied_),
        arena_pending_(other.arena_pending_),
        arena_handed_out_(other.arena_handed_out_),
        compact_(other.compact_),
        old_capacity_(other.old_capacity_),
        capacity_(other.capacity_),
        free_head_(other.free_head_),
        high_water_(other.high_water_),
        lists_(other.lists_),
        index_(std::move(other.index_)),
        alloc_(other.alloc_) {}
  ArcFlatLists& operator=(ArcFlatLists&&) = delete;
  ArcFlatLists(const ArcFlatLists&) = delete;
  ArcFlatLists& operator=(const ArcFlatLists&) = delete;
  ~ArcFlatLists() {
    FreeArena(alloc_, arena_, capacity_);
    FreeArena(alloc_, old_arena_, old_capacity_);
  }

  // The slot tracking `key`'s fingerprint (its H2; see "Keys are
  // fingerprints"), or kArcNil: a resident slot if there is one, else a
  // ghost slot (a resident wins, so a key is never taken for a ghost while
  // resident).
  //
  // This and every operation below that takes a `Mode` (ArcMayGrow by
  // default) run with ArcNotGrowing only when !growing().
  template <typename Mode = ArcMayGrow>
  uint32_t Find(const HashPair& key, Mode mode = {}) const {
    return index_.Find(
        FingerprintOf(key),
        [this, high = Index::HighOf(key.h2), mode](uint32_t s) {
          const Slot& slot = At(s, mode);
          if (slot.word != high) return ArcMatch::kNo;
          return IsResident(slot.list()) ? ArcMatch::kKey
                                         : ArcMatch::kFingerprint;
        },
        mode);
  }
  // Find, then MoveToFront of what it found, in three steps that a caller
  // with many keys to move runs ahead, each step for every key before the
  // next step for any, so that the keys' cache misses overlap instead of
  // queueing one after another: step 0 brings in the index's home bucket,
  // step 1 the arena slot it names, step 2 that slot's neighbours in its
  // list, which the move relinks. Each
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

  // The fingerprint (H2) of a tracked slot's key: the high half from the
  // slot, the low half from its index bucket, found by a walk from the
  // bucket's home (ArcIndex::TagOfSlot). REQUIRES: list_of(slot) != kNone.
  template <typename Mode = ArcMayGrow>
  uint64_t fingerprint(uint32_t slot, Mode mode = {}) const {
    const uint32_t high = At(slot, mode).word;
    return uint64_t{high} << 32 | index_.TagOfSlot(high, slot, mode);
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
    size_t total = ArenaBytes(capacity_);
    if (old_arena_ != nullptr) total += ArenaBytes(old_capacity_);
    return total + index_.memory_bytes();
  }

  // Tracks `key`'s fingerprint at the MRU end of `l`. Returns its slot, or
  // kArcNil if the arena is exhausted or `l` is resident and c keys already
  // are (ARC's bounds make either a caller bug). REQUIRES: `key` is
  // untracked; l != kNone.
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
    At(s, mode).word = Index::HighOf(key.h2);
    Link(s, l, mode);
    index_.Insert(FingerprintOf(key), s);
    return s;
  }

  // Moves a tracked slot to the MRU end of `l` (the same list or another:
  // a resident becoming a ghost, or a ghost brought back by the key whose
  // fingerprint found it). REQUIRES: if `l` is resident and the slot is
  // not, fewer than c keys are resident.
  template <typename Mode = ArcMayGrow>
  void MoveToFront(uint32_t slot, ArcList l, Mode mode = {}) {
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
    s.Set(ArcList::kNone, kArcNil);
    if (Mode::value && ABSL_PREDICT_FALSE(compact_.on) &&
        slot >= compact_.slot_limit) {
      return;  // above the shrink's arena: dropped, never reused
    }
    s.next = free_head_;
    free_head_ = slot;
  }

  // ---- Growth (see the file comment) ----

  // Allocates the arena and index of capacity `new_capacity`.
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
    // Only what was ever used needs copying; the rest of the new arena is
    // as fresh as the old one's was.
    arena_copied_ = 0;
    arena_pending_ = high_water_;
    arena_handed_out_ = 0;
    index_.BeginGrow(*std::move(growth.index_));
  }

  // Moves up to `max_moves` index entries into the bigger table and copies
  // up to 16 * max_moves slots into the new arena. Returns true once both
  // are done (then TakeRetired frees the old generation). With `released`,
  // also hands it the whole pages of the old index and arena that the
  // cursors left behind, in batches of at least kReleaseBatchBytes each, to
  // give back after the lock: no operation reads the old arena below its
  // copy cursor (At goes to the new one there), nor the old index below its
  // scan (ArcIndex::TakeReleasable).
  bool GrowStep(size_t max_moves, RetiredMemory* released = nullptr) {
    const bool index_done = index_.MigrateSome(
        max_moves, [this](uint32_t s) { return HighOfSlot(s); });
    CopySome(old_arena_, arena_, 16 * max_moves, &arena_copied_,
             &arena_pending_);
    if (released != nullptr) {
      released->AddRelease(index_.TakeReleasable(kReleaseBatchBytes), alloc_);
      released->AddRelease(
          TakeCopied(old_arena_, arena_copied_, &arena_handed_out_), alloc_);
    }
    return index_done && arena_pending_ == 0;
  }

  // The least a GrowStep hands out for release from one array: fewer,
  // larger madvise calls.
  static constexpr size_t kReleaseBatchBytes = 64 << 10;

  // From BeginGrow until TakeRetired has taken the old generation, and
  // while compacting for a shrink (so that WithGrowthMode picks ArcMayGrow).
  bool growing() const { return old_arena_ != nullptr || compact_.on; }

  // ---- Shrinking (arc_flat_list_compact.h) ----

  // Allocates the arena and index of capacity `new_capacity` for
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
    compact_.old_free_slot = std::exchange(free_head_, kArcNil);
  }
  // Bounded work toward the compaction (about 16 * max_moves slots
  // visited). True when every tracked slot lies below 2c'; compacting() is
  // then false.
  bool CompactStep(size_t max_moves);
  bool compacting() const { return compact_.on; }

  // Once GrowStep returned true: hands the old index table and arena to
  // *out (free them after the lock) and ends the growth. No-op otherwise.
  void TakeRetired(RetiredMemory* out) {
    if (!growing() || arena_pending_ != 0) return;
    const std::pair<void*, size_t> old_index = index_.TakeRetired();
    if (old_index.first == nullptr) return;  // the index is still moving
    out->Add(old_index.first, old_index.second, alloc_);
    out->Add(std::exchange(old_arena_, nullptr), ArenaBytes(old_capacity_),
             alloc_);
  }

 private:
  struct Slot {
    uint32_t word;  // the key's fingerprint >> 32
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
                "a slot is three 32-bit words (the fingerprint's high half "
                "and two links, one carrying the list tag): 24 bytes per "
                "cached key for the 2c slots");
  static_assert(std::is_trivially_copyable_v<Slot> &&
                    std::is_trivially_destructible_v<Slot>,
                "the arena is raw memory that is never constructed or "
                "destroyed; every field is written before it is read, and a "
                "growth copies it with memcpy");

  struct ListHead {
    uint32_t first = kArcNil;  // MRU
    uint32_t last = kArcNil;   // LRU
    uint32_t size = 0;
  };

  static constexpr size_t ArenaBytes(uint32_t capacity) {
    return size_t{2} * capacity * sizeof(Slot);
  }
  // The index's key: H2, already uniform (part of a keyed XXH3-128).
  static uint64_t FingerprintOf(const HashPair& key) { return key.h2; }

  // The arena and index of capacity c.
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
    return g;
  }

  explicit ArcFlatLists(Growth&& g)
      : arena_(std::exchange(g.arena_, nullptr)),
        capacity_(g.capacity_),
        free_head_(kArcNil),
        index_(*std::move(g.index_)),
        alloc_(g.alloc_) {}

  // The whole pages of the old arena below its first `copied` slots that
  // were not handed out yet (*handed_out bytes were), once a batch is ready.
  static RawAllocator::PageSpan TakeCopied(Slot* old, uint32_t copied,
                                           size_t* handed_out) {
    const size_t end = size_t{copied} * sizeof(Slot);
    if (old == nullptr || end < *handed_out + kReleaseBatchBytes) return {};
    const RawAllocator::PageSpan span =
        RawAllocator::WholePagesBetween(old, *handed_out, end);
    *handed_out = end;
    return span;
  }

  // Copies up to `max` slots of the range still in the old arena.
  static void CopySome(const Slot* from, Slot* to, size_t max,
                       uint32_t* copied, uint32_t* pending) {
    const uint32_t n = static_cast<uint32_t>(std::min<size_t>(max, *pending));
    if (n == 0) return;
    std::memcpy(to + *copied, from + *copied, size_t{n} * sizeof(Slot));
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

  // Frees an arena of capacity c (may be null).
  static void FreeArena(RawAllocator alloc, Slot* arena, uint32_t capacity) {
    if (arena != nullptr) alloc.Deallocate(arena, ArenaBytes(capacity));
  }

  ListHead& head(ArcList l) { return lists_[static_cast<size_t>(l)]; }
  const ListHead& head(ArcList l) const {
    return lists_[static_cast<size_t>(l)];
  }

  // The high half of a tracked slot's fingerprint (the index's home).
  template <typename Mode = ArcMayGrow>
  uint32_t HighOfSlot(uint32_t s, Mode mode = {}) const {
    return At(s, mode).word;
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

  // A compaction before a shrink (BeginCompact): the chain set aside, the
  // limit, and where step (2)'s walk is.
  struct Compaction {
    bool on = false;
    bool chains_done = false;  // step (1) over: no slot above the limit is
                               // handed out any more
    uint32_t slot_limit = 0;   // 2c'
    uint32_t old_free_slot = kArcNil;
    uint32_t top = 0;  // step (2): slots [limit, top) may still be tracked
  };

  // A free slot during compaction: the new chain, the set-aside one, then
  // the high-water mark (below the limit once the chains are done).
  uint32_t CompactTakeSlot();
  // Moves tracked slot `from` to free slot `to`: its neighbours, its list's
  // ends and its index entry follow.
  void Relocate(uint32_t from, uint32_t to);

  Slot* arena_;  // 2c slots
  // While growing: the previous arena (c = old_capacity_), of which the
  // slots [copied, copied + pending) are not copied yet.
  Slot* old_arena_ = nullptr;
  uint32_t arena_copied_ = 0;
  uint32_t arena_pending_ = 0;
  // Bytes of the old arena handed out for release (TakeCopied).
  size_t arena_handed_out_ = 0;
  Compaction compact_;  // before a shrink (BeginCompact)
  uint32_t old_capacity_ = 0;
  uint32_t capacity_;
  uint32_t free_head_;   // removed slots, chained through `next`
  uint32_t high_water_ = 0;  // slots [high_water_, 2c) never used
  std::array<ListHead, 4> lists_{};
  Index index_;
  RawAllocator alloc_;
};

}  // namespace furrballs

// The compaction's member definitions (templates: they must be visible
// wherever ArcFlatLists is).
#include "engine/arc/arc_flat_list_compact.h"  // IWYU pragma: export

#endif  // FURRBALLS_ENGINE_ARC_ARC_FLAT_LIST_H_
