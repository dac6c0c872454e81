// engine/arc/arc_flat_list.h: ARC's four lists (T1, T2, B1, B2) as flat,
// index-linked lists in one pre-allocated arena (report §5.22, ARC-FLATLL2).
//
// Thread safety: thread-compatible (REQUIRES external synchronization; in
// ConcurrentARC it is only touched under the write SpinLock).
//
// Layout
//
//   - One arena of 2c Slots, shared by all four lists. A Slot (24 bytes)
//     holds a key, the indices of its neighbours (kArcNil ends a list) and a
//     tag naming the list it is on, packed into the top bits of `prev`.
//     Slots are handed out in arena order up to a high-water mark, then from
//     a free list of removed slots chained through `next`; so the arena is
//     never written at Create() and, from a zeroing allocator, enters the
//     RSS only as far as ARC has ever tracked keys. After Create() nothing
//     is allocated: pushing takes a slot, removing frees it, and moving a
//     key between lists (T1 -> T2, T1 -> B1, ...) relinks the same slot.
//   - Why one shared arena of 2c, not one arena of 2c per list as in the
//     report: ARC bounds the sum, |T1| + |T2| + |B1| + |B2| <= 2c, not each
//     list (any single list can reach 2c), so 2c slots in total are always
//     enough, and per-list arenas would hold 8c slots of which at most 2c are
//     ever used: 4x the memory (c = 1M: 64 MB instead of 256 MB) for no
//     speed. The report's crash with per-list arenas of c is impossible here.
//     The price is the per-slot list tag, which the membership test needs
//     anyway (T1 ∪ T2 IS the cache; there is no separate cached-set).
//   - An Index (ArcIndex by default, see arc_index.h) maps each tracked key
//     to its slot; it is sized for 2c keys and never allocates either.
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
  // Lists for an ARC of capacity `capacity` (c): 2c slots in total. c must
  // leave 2c below kArcNil.
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
    void* mem = alloc.Allocate(size_t{slots} * sizeof(Slot));
    if (mem == nullptr) {
      return absl::ResourceExhaustedError(
          absl::StrCat("ArcFlatLists: cannot allocate ",
                       size_t{slots} * sizeof(Slot), " bytes"));
    }
    return ArcFlatLists(static_cast<Slot*>(mem), slots, *std::move(index),
                        alloc);
  }

  // The largest c whose 2c slot indices fit the packed `prev` field below
  // its nil value.
  static constexpr uint32_t kMaxCapacity = (kPackedNil - 1) / 2;

  // The bytes Create allocates for capacity c (arena and index).
  static constexpr size_t BytesFor(uint32_t capacity) {
    return size_t{2} * capacity * sizeof(Slot) +
           Index::BytesFor(2 * capacity);
  }

  ArcFlatLists(ArcFlatLists&& other) noexcept
      : arena_(std::exchange(other.arena_, nullptr)),
        slot_count_(other.slot_count_),
        free_head_(other.free_head_),
        high_water_(other.high_water_),
        lists_(other.lists_),
        index_(std::move(other.index_)),
        alloc_(other.alloc_) {}
  ArcFlatLists& operator=(ArcFlatLists&&) = delete;
  ArcFlatLists(const ArcFlatLists&) = delete;
  ArcFlatLists& operator=(const ArcFlatLists&) = delete;
  ~ArcFlatLists() {
    if (arena_ != nullptr) {
      alloc_.Deallocate(arena_, size_t{slot_count_} * sizeof(Slot));
    }
  }

  // The slot tracking `key`, or kArcNil.
  uint32_t Find(const HashPair& key) const {
    return index_.Find(key, [this](uint32_t s) -> const HashPair& {
      return arena_[s].key;
    });
  }
  // The list `key` is on (kNone if untracked).
  ArcList Where(const HashPair& key) const {
    const uint32_t s = Find(key);
    return s == kArcNil ? ArcList::kNone : arena_[s].list();
  }

  const HashPair& key(uint32_t slot) const { return arena_[slot].key; }
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
  uint32_t slot_count() const { return slot_count_; }
  size_t memory_bytes() const {
    return size_t{slot_count_} * sizeof(Slot) + index_.memory_bytes();
  }

  // Tracks `key` at the MRU end of `l`. Returns its slot, or kArcNil if the
  // arena is exhausted (ARC's 2c bound makes that a caller bug).
  // REQUIRES: `key` is untracked; l != kNone.
  uint32_t PushFront(ArcList l, const HashPair& key) {
    uint32_t s = free_head_;
    if (s != kArcNil) {
      free_head_ = arena_[s].next;
    } else if (high_water_ < slot_count_) {
      s = high_water_++;
    } else {
      return kArcNil;
    }
    arena_[s].key = key;
    Link(s, l);
    index_.Insert(key, s);
    return s;
  }

  // Moves a tracked slot to the MRU end of `l` (the same list or another).
  void MoveToFront(uint32_t slot, ArcList l) {
    Unlink(slot);
    Link(slot, l);
  }

  // Forgets a tracked slot: unlinks it, unindexes its key, frees it.
  void Remove(uint32_t slot) {
    Unlink(slot);
    index_.Erase(arena_[slot].key, slot);
    arena_[slot].Set(ArcList::kNone, kArcNil);
    arena_[slot].next = free_head_;
    free_head_ = slot;
  }

 private:
  struct Slot {
    HashPair key;
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
  static_assert(sizeof(Slot) == 24 && alignof(Slot) == 8,
                "a slot is the 16-byte HashPair (FindAndEraseByHash needs "
                "both halves) and two 32-bit links, one of them carrying the "
                "list tag: 48 bytes per cached key for the 2c slots");
  static_assert(std::is_trivially_copyable_v<Slot> &&
                    std::is_trivially_destructible_v<Slot>,
                "the arena is raw memory that is never constructed or "
                "destroyed; PushFront writes every field before it is read");

  struct ListHead {
    uint32_t first = kArcNil;  // MRU
    uint32_t last = kArcNil;   // LRU
    uint32_t size = 0;
  };

  ArcFlatLists(Slot* arena, uint32_t slot_count, Index index,
               RawAllocator alloc)
      : arena_(arena),
        slot_count_(slot_count),
        free_head_(kArcNil),
        index_(std::move(index)),
        alloc_(alloc) {}

  ListHead& head(ArcList l) { return lists_[static_cast<size_t>(l)]; }
  const ListHead& head(ArcList l) const {
    return lists_[static_cast<size_t>(l)];
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
  uint32_t slot_count_;
  uint32_t free_head_;   // removed slots, chained through `next`
  uint32_t high_water_ = 0;  // slots [high_water_, slot_count_) never used
  std::array<ListHead, 4> lists_{};
  Index index_;
  RawAllocator alloc_;
};

}  // namespace furrballs

#endif  // FURRBALLS_ENGINE_ARC_ARC_FLAT_LIST_H_
