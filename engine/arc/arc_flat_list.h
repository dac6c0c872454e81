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
// Growth: c may grow (never shrink) while keys are tracked, without copying
// the arena or the records and without allocating under the caller's lock.
// Both are arrays of blocks of kBlockSize entries (12 KiB of slots, 16 KiB
// of records), reached through a directory: slot s is block s >> 10, entry
// s & 1023, one more load (of a directory that stays in L1) than a flat
// array. Each allocation is a whole number of blocks, so a growth maps only
// the blocks that c' needs beyond c, and the blocks already in use never
// move. Three steps:
//
//   AllocateGrowth(c')  no lock: the new blocks, a directory for c' (the old
//                       one's block pointers copied, which are never
//                       rewritten) and an index for 2c' keys.
//   BeginGrow(growth)   under the lock, O(1): c = c', the new directory, the
//                       index starts its incremental rehash (arc_index.h).
//   GrowStep(n)         under the lock: moves up to n index entries; true
//                       once the old index table is empty. TakeRetired then
//                       hands the old index table and directory over, to be
//                       freed after the lock.
//
// Between BeginGrow and the end, every operation works as usual (the index
// probes both tables); the lists themselves never notice a growth. The
// price of whole blocks: BytesFor(c) rounds the arena to 1024 slots and the
// records to 1024 records, under 28 KiB per ARC.
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
#include <optional>
#include <type_traits>
#include <utility>

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
  struct Mapping {
    void* p = nullptr;
    size_t bytes = 0;
  };

 public:
  // Slots (and records) per block of the arena (and of the records).
  static constexpr int kBlockShift = 10;
  static constexpr uint32_t kBlockSize = uint32_t{1} << kBlockShift;
  // Growths per lifetime that map new blocks: each keeps two mappings until
  // destruction. Doubling from c = 1 reaches kMaxCapacity in 28.
  static constexpr uint32_t kMaxGrowths = 32;

  // What AllocateGrowth allocated, for BeginGrow. Frees it unless installed.
  class Growth {
   public:
    Growth(Growth&& other) noexcept
        : capacity_(other.capacity_),
          arena_(std::exchange(other.arena_, Mapping{})),
          records_(std::exchange(other.records_, Mapping{})),
          directory_(std::exchange(other.directory_, Mapping{})),
          index_(std::move(other.index_)),
          alloc_(other.alloc_) {}
    Growth& operator=(Growth&&) = delete;
    Growth(const Growth&) = delete;
    Growth& operator=(const Growth&) = delete;
    ~Growth() {
      for (Mapping* m : {&arena_, &records_, &directory_}) {
        if (m->p != nullptr) alloc_.Deallocate(m->p, m->bytes);
      }
    }

    uint32_t capacity() const { return capacity_; }

   private:
    friend class ArcFlatLists;
    Growth(uint32_t capacity, RawAllocator alloc)
        : capacity_(capacity), alloc_(alloc) {}

    uint32_t capacity_;
    Mapping arena_;      // blocks [ArenaBlocks(old c), ArenaBlocks(c))
    Mapping records_;    // blocks [RecordBlocks(old c), RecordBlocks(c))
    Mapping directory_;  // arena block pointers, then record block pointers
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
    absl::StatusOr<Growth> g =
        Allocate(/*from=*/0, capacity, nullptr, nullptr, alloc);
    if (!g.ok()) return g.status();
    return ArcFlatLists(*std::move(g), alloc);
  }

  // The largest c whose 2c slot indices fit the packed `prev` field below
  // its nil value.
  static constexpr uint32_t kMaxCapacity = (kPackedNil - 1) / 2;
  static_assert(2 * kMaxCapacity <= ArcIndex::kMaxKeys,
                "the index must hold every slot of the largest arena");

  // The bytes Create allocates for capacity c (arena and record blocks,
  // their directory, the index), and what a growth to c leaves mapped.
  static constexpr size_t BytesFor(uint32_t capacity) {
    return ArenaBlocks(capacity) * kArenaBlockBytes +
           RecordBlocks(capacity) * kRecordBlockBytes +
           DirectoryBytes(capacity) + Index::BytesFor(2 * capacity);
  }
  // The most mapped at once while growing from `from` to `to`: BytesFor(to)
  // and the old index table and directory, until TakeRetired.
  static constexpr size_t GrowthPeakBytes(uint32_t from, uint32_t to) {
    return BytesFor(to) + DirectoryBytes(from) + Index::BytesFor(2 * from);
  }

  ArcFlatLists(ArcFlatLists&& other) noexcept
      : arena_dir_(std::exchange(other.arena_dir_, nullptr)),
        record_dir_(std::exchange(other.record_dir_, nullptr)),
        capacity_(other.capacity_),
        free_head_(other.free_head_),
        high_water_(other.high_water_),
        free_record_(other.free_record_),
        record_high_water_(other.record_high_water_),
        lists_(other.lists_),
        index_(std::move(other.index_)),
        directory_(std::exchange(other.directory_, Mapping{})),
        old_directory_(std::exchange(other.old_directory_, Mapping{})),
        blocks_(other.blocks_),
        block_mappings_(std::exchange(other.block_mappings_, 0)),
        alloc_(other.alloc_) {}
  ArcFlatLists& operator=(ArcFlatLists&&) = delete;
  ArcFlatLists(const ArcFlatLists&) = delete;
  ArcFlatLists& operator=(const ArcFlatLists&) = delete;
  ~ArcFlatLists() {
    for (uint32_t i = 0; i < block_mappings_; ++i) {
      alloc_.Deallocate(blocks_[i].p, blocks_[i].bytes);
    }
    for (Mapping* m : {&directory_, &old_directory_}) {
      if (m->p != nullptr) alloc_.Deallocate(m->p, m->bytes);
    }
  }

  // The slot tracking `key`, or kArcNil: the resident slot holding exactly
  // `key`, else a ghost slot with its fingerprint (see "A false ghost hit";
  // a resident wins, so a key is never taken for a ghost while resident).
  uint32_t Find(const HashPair& key) const {
    return index_.Find(FingerprintOf(key), [this, &key](uint32_t s) {
      const Slot& slot = At(s);
      if (IsResident(slot.list())) {
        return Record(slot.word) == key ? ArcMatch::kKey : ArcMatch::kNo;
      }
      return slot.word == Index::HighOf(key.h2) ? ArcMatch::kFingerprint
                                                : ArcMatch::kNo;
    });
  }
  // The list `key` is on (kNone if untracked).
  ArcList Where(const HashPair& key) const {
    const uint32_t s = Find(key);
    return s == kArcNil ? ArcList::kNone : At(s).list();
  }

  // The key of a resident slot. REQUIRES: IsResident(list_of(slot)); a
  // ghost keeps only its fingerprint.
  const HashPair& key(uint32_t slot) const { return Record(At(slot).word); }
  ArcList list_of(uint32_t slot) const { return At(slot).list(); }
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
  // Everything mapped now (while growing: the old index table and
  // directory too).
  size_t memory_bytes() const {
    size_t total = directory_.bytes + old_directory_.bytes;
    for (uint32_t i = 0; i < block_mappings_; ++i) total += blocks_[i].bytes;
    return total + index_.memory_bytes();
  }

  // Tracks `key` at the MRU end of `l` (a ghost list keeps only its
  // fingerprint). Returns its slot, or kArcNil if the arena is exhausted or
  // `l` is resident and c keys already are (ARC's bounds make either a
  // caller bug). REQUIRES: `key` is untracked; l != kNone.
  uint32_t PushFront(ArcList l, const HashPair& key) {
    if (IsResident(l) && resident() == capacity_) return kArcNil;
    uint32_t s = free_head_;
    if (s != kArcNil) {
      free_head_ = At(s).next;
    } else if (high_water_ < slot_count()) {
      s = high_water_++;
    } else {
      return kArcNil;
    }
    At(s).word = IsResident(l) ? TakeRecord(key) : Index::HighOf(key.h2);
    Link(s, l);
    index_.Insert(FingerprintOf(key), s);
    return s;
  }

  // Moves a tracked slot to the MRU end of `l` (the same list or another).
  // A resident that becomes a ghost gives its record back.
  // REQUIRES: not a ghost becoming resident (that is Revive).
  void MoveToFront(uint32_t slot, ArcList l) {
    Slot& s = At(slot);
    if (IsResident(s.list()) && IsGhost(l)) {
      const uint32_t record = s.word;
      s.word = Index::HighOf(Record(record).h2);
      GiveBackRecord(record);
    }
    Unlink(slot);
    Link(slot, l);
  }

  // Moves a ghost slot to the MRU end of resident list `l`, as `key`: the
  // key whose fingerprint found the ghost (Find(key) == slot).
  // REQUIRES: IsGhost(list_of(slot)), IsResident(l), fewer than c resident.
  void Revive(uint32_t slot, ArcList l, const HashPair& key) {
    At(slot).word = TakeRecord(key);
    Unlink(slot);
    Link(slot, l);
  }

  // Forgets a tracked slot: unlinks it, unindexes its key, frees it.
  void Remove(uint32_t slot) {
    Unlink(slot);
    index_.Erase(HighOfSlot(slot), slot,
                 [this](uint32_t s) { return HighOfSlot(s); });
    Slot& s = At(slot);
    if (IsResident(s.list())) GiveBackRecord(s.word);
    s.Set(ArcList::kNone, kArcNil);
    s.next = free_head_;
    free_head_ = slot;
  }

  // ---- Growth (see the file comment) ----

  // Allocates what capacity `new_capacity` needs beyond today's. Takes no
  // lock and reads only the directory and c, which change in BeginGrow
  // alone. REQUIRES: !growing(), and no BeginGrow runs concurrently (the
  // owner serializes growths). InvalidArgument unless c < new_capacity <=
  // kMaxCapacity; ResourceExhausted if an allocation fails or kMaxGrowths
  // growths have mapped blocks.
  absl::StatusOr<Growth> AllocateGrowth(uint32_t new_capacity) const {
    if (new_capacity <= capacity_ || new_capacity > kMaxCapacity) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ArcFlatLists: cannot grow from capacity ", capacity_, " to ",
          new_capacity, " (must be larger, at most ", kMaxCapacity, ")"));
    }
    if (block_mappings_ + 2 > blocks_.size()) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "ArcFlatLists: ", kMaxGrowths, " growths have mapped blocks already"));
    }
    return Allocate(capacity_, new_capacity, arena_dir_, record_dir_, alloc_);
  }

  // Installs `growth` (from this object's AllocateGrowth, with nothing
  // installed since): O(1), allocates and frees nothing.
  void BeginGrow(Growth&& growth) {
    capacity_ = growth.capacity_;
    old_directory_ = std::exchange(directory_, growth.directory_);
    growth.directory_ = Mapping{};
    SetDirectory();
    for (Mapping* m : {&growth.arena_, &growth.records_}) {
      if (m->p != nullptr) blocks_[block_mappings_++] = std::exchange(*m, {});
    }
    index_.BeginGrow(*std::move(growth.index_));
  }

  // Moves up to `max_moves` index entries into the bigger table. Returns
  // true once growth is done (then TakeRetired frees the old memory).
  bool GrowStep(size_t max_moves) {
    return index_.MigrateSome(max_moves,
                              [this](uint32_t s) { return HighOfSlot(s); });
  }

  // From BeginGrow until TakeRetired has taken the old memory.
  bool growing() const { return index_.growing(); }

  // Once GrowStep returned true: hands the old index table and directory to
  // *out (free them after the lock) and ends the growth. No-op otherwise.
  void TakeRetired(RetiredMemory* out) {
    const std::pair<void*, size_t> old_index = index_.TakeRetired();
    if (old_index.first == nullptr) return;
    out->Add(old_index.first, old_index.second, alloc_);
    out->Add(old_directory_.p, old_directory_.bytes, alloc_);
    old_directory_ = Mapping{};
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

  static constexpr size_t kArenaBlockBytes = size_t{kBlockSize} * sizeof(Slot);
  static constexpr size_t kRecordBlockBytes =
      size_t{kBlockSize} * sizeof(HashPair);
  static_assert(kArenaBlockBytes % 4096 == 0 && kRecordBlockBytes % 4096 == 0,
                "blocks are whole 4 KiB pages, so a growth's mapping (a "
                "whole number of blocks) wastes nothing to page rounding");

  struct ListHead {
    uint32_t first = kArcNil;  // MRU
    uint32_t last = kArcNil;   // LRU
    uint32_t size = 0;
  };

  static constexpr size_t ArenaBlocks(uint32_t capacity) {
    return (size_t{2} * capacity + kBlockSize - 1) >> kBlockShift;
  }
  static constexpr size_t RecordBlocks(uint32_t capacity) {
    return (size_t{capacity} + kBlockSize - 1) >> kBlockShift;
  }
  static constexpr size_t DirectoryBytes(uint32_t capacity) {
    return (ArenaBlocks(capacity) + RecordBlocks(capacity)) * sizeof(void*);
  }
  // The index's key: H2, already uniform (part of a keyed XXH3-128).
  static uint64_t FingerprintOf(const HashPair& key) { return key.h2; }

  // Maps the blocks that capacity `to` needs beyond `from`, a directory for
  // `to` (the first blocks' pointers copied from the old directories) and
  // an index for 2 * `to` keys.
  static absl::StatusOr<Growth> Allocate(uint32_t from, uint32_t to,
                                         Slot* const* old_arena_dir,
                                         HashPair* const* old_record_dir,
                                         RawAllocator alloc) {
    Growth g(to, alloc);
    absl::StatusOr<Index> index = Index::Create(2 * to, alloc);
    if (!index.ok()) return index.status();
    g.index_.emplace(*std::move(index));
    const size_t arena_from = ArenaBlocks(from), arena_to = ArenaBlocks(to);
    const size_t record_from = RecordBlocks(from),
                 record_to = RecordBlocks(to);
    for (auto [m, bytes] :
         {std::pair{&g.arena_, (arena_to - arena_from) * kArenaBlockBytes},
          std::pair{&g.records_, (record_to - record_from) * kRecordBlockBytes},
          std::pair{&g.directory_, DirectoryBytes(to)}}) {
      if (bytes == 0) continue;
      m->p = alloc.Allocate(bytes);
      if (m->p == nullptr) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "ArcFlatLists: cannot allocate ", bytes, " bytes"));
      }
      m->bytes = bytes;
    }
    Slot** arena_dir = static_cast<Slot**>(g.directory_.p);
    HashPair** record_dir = reinterpret_cast<HashPair**>(arena_dir + arena_to);
    for (size_t b = 0; b < arena_from; ++b) arena_dir[b] = old_arena_dir[b];
    for (size_t b = arena_from; b < arena_to; ++b) {
      arena_dir[b] = static_cast<Slot*>(g.arena_.p) +
                     (b - arena_from) * size_t{kBlockSize};
    }
    for (size_t b = 0; b < record_from; ++b) record_dir[b] = old_record_dir[b];
    for (size_t b = record_from; b < record_to; ++b) {
      record_dir[b] = static_cast<HashPair*>(g.records_.p) +
                      (b - record_from) * size_t{kBlockSize};
    }
    return g;
  }

  // Creation: installs the first Growth.
  ArcFlatLists(Growth&& g, RawAllocator alloc)
      : capacity_(g.capacity_),
        free_head_(kArcNil),
        index_(*std::move(g.index_)),
        directory_(std::exchange(g.directory_, Mapping{})),
        alloc_(alloc) {
    SetDirectory();
    blocks_[block_mappings_++] = std::exchange(g.arena_, {});
    blocks_[block_mappings_++] = std::exchange(g.records_, {});
  }

  void SetDirectory() {
    arena_dir_ = static_cast<Slot**>(directory_.p);
    record_dir_ =
        reinterpret_cast<HashPair**>(arena_dir_ + ArenaBlocks(capacity_));
  }

  Slot& At(uint32_t s) const {
    return arena_dir_[s >> kBlockShift][s & (kBlockSize - 1)];
  }
  HashPair& Record(uint32_t r) const {
    return record_dir_[r >> kBlockShift][r & (kBlockSize - 1)];
  }

  ListHead& head(ArcList l) { return lists_[static_cast<size_t>(l)]; }
  const ListHead& head(ArcList l) const {
    return lists_[static_cast<size_t>(l)];
  }

  // The high half of a tracked slot's fingerprint (the index's home).
  uint32_t HighOfSlot(uint32_t s) const {
    const Slot& slot = At(s);
    return IsResident(slot.list()) ? Index::HighOf(Record(slot.word).h2)
                                   : slot.word;
  }

  // A free record holding `key`. REQUIRES: fewer than c keys resident (so a
  // record is free).
  uint32_t TakeRecord(const HashPair& key) {
    uint32_t r = free_record_;
    if (r != kArcNil) {
      free_record_ = static_cast<uint32_t>(Record(r).h1);
    } else {
      r = record_high_water_++;
    }
    Record(r) = key;
    return r;
  }
  void GiveBackRecord(uint32_t r) {
    Record(r).h1 = free_record_;
    free_record_ = r;
  }

  void Link(uint32_t s, ArcList l) {
    ListHead& h = head(l);
    Slot& slot = At(s);
    slot.Set(l, kArcNil);
    slot.next = h.first;
    if (h.first != kArcNil) {
      At(h.first).SetPrev(s);
    } else {
      h.last = s;
    }
    h.first = s;
    ++h.size;
  }

  void Unlink(uint32_t s) {
    Slot& slot = At(s);
    ListHead& h = head(slot.list());
    const uint32_t prev = slot.prev();
    if (prev != kArcNil) {
      At(prev).next = slot.next;
    } else {
      h.first = slot.next;
    }
    if (slot.next != kArcNil) {
      At(slot.next).SetPrev(prev);
    } else {
      h.last = prev;
    }
    --h.size;
  }

  Slot** arena_dir_ = nullptr;      // block b of the 2c slots
  HashPair** record_dir_ = nullptr;  // block b of the c key records
  uint32_t capacity_;
  uint32_t free_head_;   // removed slots, chained through `next`
  uint32_t high_water_ = 0;  // slots [high_water_, 2c) never used
  uint32_t free_record_ = kArcNil;  // given-back records, chained through h1
  uint32_t record_high_water_ = 0;  // records [this, c) never used
  std::array<ListHead, 4> lists_{};
  Index index_;
  Mapping directory_;      // arena_dir_ and record_dir_ point into it
  Mapping old_directory_;  // while growing: the directory before BeginGrow
  // Every block mapping (Create's two, then up to two per growth), freed at
  // destruction.
  std::array<Mapping, 2 * (kMaxGrowths + 1)> blocks_{};
  uint32_t block_mappings_ = 0;
  RawAllocator alloc_;
};

}  // namespace furrballs

#endif  // FURRBALLS_ENGINE_ARC_ARC_FLAT_LIST_H_
