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
// keys. After Create() nothing is allocated: pushing takes a slot, removing
// frees it, and moving a key between lists (T1 -> T2, T1 -> B1, ...) relinks
// the same slot.
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

#include <array>
#include <cstddef>
#include <cstdint>
#include <new>
#include <type_traits>
#include <utility>

#include <absl/status/status.h>
#include <absl/status/statusor.h>
#include <absl/strings/str_cat.h>

#include "engine/arc/arc_index.h"
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

 public:
  // Lists for an ARC of capacity `capacity` (c): 2c slots in total, at most
  // c of them resident. c must leave 2c below kArcNil.
  static absl::StatusOr<ArcFlatLists> Create(uint32_t capacity,
                                             RawAllocator alloc) {
    if (capacity == 0 || capacity > kMaxCapacity) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ArcFlatLists: capacity ", capacity, " outside [1, ", kMaxCapacity,
          "]"));
    }
    const uint32_t slots = 2 * capacity;
    absl::StatusOr<Index> index = Index::Create(slots, alloc);
    if (!index.ok()) return index.status();
    void* arena = alloc.Allocate(ArenaBytes(capacity));
    if (arena == nullptr) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "ArcFlatLists: cannot allocate ", ArenaBytes(capacity), " bytes"));
    }
    void* keys = alloc.Allocate(RecordBytes(capacity));
    if (keys == nullptr) {
      alloc.Deallocate(arena, ArenaBytes(capacity));
      return absl::ResourceExhaustedError(absl::StrCat(
          "ArcFlatLists: cannot allocate ", RecordBytes(capacity), " bytes"));
    }
    return ArcFlatLists(static_cast<Slot*>(arena), static_cast<HashPair*>(keys),
                        capacity, *std::move(index), alloc);
  }

  // The largest c whose 2c slot indices fit the packed `prev` field below
  // its nil value.
  static constexpr uint32_t kMaxCapacity = (kPackedNil - 1) / 2;
  static_assert(2 * kMaxCapacity <= ArcIndex::kMaxKeys,
                "the index must hold every slot of the largest arena");

  // The bytes Create allocates for capacity c (arena, key records, index).
  static constexpr size_t BytesFor(uint32_t capacity) {
    return ArenaBytes(capacity) + RecordBytes(capacity) +
           Index::BytesFor(2 * capacity);
  }

  ArcFlatLists(ArcFlatLists&& other) noexcept
      : arena_(std::exchange(other.arena_, nullptr)),
        keys_(std::exchange(other.keys_, nullptr)),
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
    if (arena_ != nullptr) alloc_.Deallocate(arena_, ArenaBytes(capacity_));
    if (keys_ != nullptr) alloc_.Deallocate(keys_, RecordBytes(capacity_));
  }

  // The slot tracking `key`, or kArcNil: the resident slot holding exactly
  // `key`, else a ghost slot with its fingerprint (see "A false ghost hit";
  // a resident wins, so a key is never taken for a ghost while resident).
  uint32_t Find(const HashPair& key) const {
    return index_.Find(FingerprintOf(key), [this, &key](uint32_t s) {
      const Slot& slot = arena_[s];
      if (IsResident(slot.list())) {
        return keys_[slot.word] == key ? ArcMatch::kKey : ArcMatch::kNo;
      }
      return slot.word == Index::HighOf(key.h2) ? ArcMatch::kFingerprint
                                                : ArcMatch::kNo;
    });
  }
  // The list `key` is on (kNone if untracked).
  ArcList Where(const HashPair& key) const {
    const uint32_t s = Find(key);
    return s == kArcNil ? ArcList::kNone : arena_[s].list();
  }

  // The key of a resident slot. REQUIRES: IsResident(list_of(slot)); a
  // ghost keeps only its fingerprint.
  const HashPair& key(uint32_t slot) const {
    return keys_[arena_[slot].word];
  }
  ArcList list_of(uint32_t slot) const { return arena_[slot].list(); }
  // Toward the LRU end; kArcNil after the tail.
  uint32_t next(uint32_t slot) const { return arena_[slot].next; }
  // Toward the MRU end; kArcNil before the head.
  uint32_t prev(uint32_t slot) const { return arena_[slot].prev(); }

  uint32_t size(ArcList l) const { return head(l).size; }
  uint32_t mru(ArcList l) const { return head(l).first; }
  uint32_t lru(ArcList l) const { return head(l).last; }
  uint32_t tracked() const {
    return size(ArcList::kT1) + size(ArcList::kT2) + size(ArcList::kB1) +
           size(ArcList::kB2);
  }
  uint32_t resident() const { return size(ArcList::kT1) + size(ArcList::kT2); }
  uint32_t slot_count() const { return 2 * capacity_; }
  size_t memory_bytes() const {
    return ArenaBytes(capacity_) + RecordBytes(capacity_) +
           index_.memory_bytes();
  }

  // Tracks `key` at the MRU end of `l` (a ghost list keeps only its
  // fingerprint). Returns its slot, or kArcNil if the arena is exhausted or
  // `l` is resident and c keys already are (ARC's bounds make either a
  // caller bug). REQUIRES: `key` is untracked; l != kNone.
  uint32_t PushFront(ArcList l, const HashPair& key) {
    if (IsResident(l) && resident() == capacity_) return kArcNil;
    uint32_t s = free_head_;
    if (s != kArcNil) {
      free_head_ = arena_[s].next;
    } else if (high_water_ < slot_count()) {
      s = high_water_++;
    } else {
      return kArcNil;
    }
    arena_[s].word =
        IsResident(l) ? TakeRecord(key) : Index::HighOf(key.h2);
    Link(s, l);
    index_.Insert(FingerprintOf(key), s);
    return s;
  }

  // Moves a tracked slot to the MRU end of `l` (the same list or another).
  // A resident that becomes a ghost gives its record back.
  // REQUIRES: not a ghost becoming resident (that is Revive).
  void MoveToFront(uint32_t slot, ArcList l) {
    Slot& s = arena_[slot];
    if (IsResident(s.list()) && IsGhost(l)) {
      const uint32_t record = s.word;
      s.word = Index::HighOf(keys_[record].h2);
      GiveBackRecord(record);
    }
    Unlink(slot);
    Link(slot, l);
  }

  // Moves a ghost slot to the MRU end of resident list `l`, as `key`: the
  // key whose fingerprint found the ghost (Find(key) == slot).
  // REQUIRES: IsGhost(list_of(slot)), IsResident(l), fewer than c resident.
  void Revive(uint32_t slot, ArcList l, const HashPair& key) {
    arena_[slot].word = TakeRecord(key);
    Unlink(slot);
    Link(slot, l);
  }

  // Forgets a tracked slot: unlinks it, unindexes its key, frees it.
  void Remove(uint32_t slot) {
    Unlink(slot);
    index_.Erase(HighOfSlot(slot), slot,
                 [this](uint32_t s) { return HighOfSlot(s); });
    if (IsResident(arena_[slot].list())) GiveBackRecord(arena_[slot].word);
    arena_[slot].Set(ArcList::kNone, kArcNil);
    arena_[slot].next = free_head_;
    free_head_ = slot;
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
                "is read");

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

  ArcFlatLists(Slot* arena, HashPair* keys, uint32_t capacity, Index index,
               RawAllocator alloc)
      : arena_(arena),
        keys_(keys),
        capacity_(capacity),
        free_head_(kArcNil),
        index_(std::move(index)),
        alloc_(alloc) {}

  ListHead& head(ArcList l) { return lists_[static_cast<size_t>(l)]; }
  const ListHead& head(ArcList l) const {
    return lists_[static_cast<size_t>(l)];
  }

  // The high half of a tracked slot's fingerprint (the index's home).
  uint32_t HighOfSlot(uint32_t s) const {
    const Slot& slot = arena_[s];
    return IsResident(slot.list()) ? Index::HighOf(keys_[slot.word].h2)
                                   : slot.word;
  }

  // A free record holding `key`. REQUIRES: fewer than c keys resident (so a
  // record is free).
  uint32_t TakeRecord(const HashPair& key) {
    uint32_t r = free_record_;
    if (r != kArcNil) {
      free_record_ = static_cast<uint32_t>(keys_[r].h1);
    } else {
      r = record_high_water_++;
    }
    keys_[r] = key;
    return r;
  }
  void GiveBackRecord(uint32_t r) {
    keys_[r].h1 = free_record_;
    free_record_ = r;
  }

  void Link(uint32_t s, ArcList l) {
    ListHead& h = head(l);
    Slot& slot = arena_[s];
    slot.Set(l, kArcNil);
    slot.next = h.first;
    if (h.first != kArcNil) {
      arena_[h.first].SetPrev(s);
    } else {
      h.last = s;
    }
    h.first = s;
    ++h.size;
  }

  void Unlink(uint32_t s) {
    Slot& slot = arena_[s];
    ListHead& h = head(slot.list());
    const uint32_t prev = slot.prev();
    if (prev != kArcNil) {
      arena_[prev].next = slot.next;
    } else {
      h.first = slot.next;
    }
    if (slot.next != kArcNil) {
      arena_[slot.next].SetPrev(prev);
    } else {
      h.last = prev;
    }
    --h.size;
  }

  Slot* arena_;
  HashPair* keys_;  // c records: the keys of resident slots
  uint32_t capacity_;
  uint32_t free_head_;   // removed slots, chained through `next`
  uint32_t high_water_ = 0;  // slots [high_water_, 2c) never used
  uint32_t free_record_ = kArcNil;  // given-back records, chained through h1
  uint32_t record_high_water_ = 0;  // records [this, c) never used
  std::array<ListHead, 4> lists_{};
  Index index_;
  RawAllocator alloc_;
};

}  // namespace furrballs

#endif  // FURRBALLS_ENGINE_ARC_ARC_FLAT_LIST_H_
