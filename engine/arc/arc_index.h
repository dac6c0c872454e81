// engine/arc/arc_index.h: the key -> arena-slot index of the flat ARC lists.
//
// Thread safety: thread-compatible (REQUIRES external synchronization; in
// ConcurrentARC it is only touched under the write SpinLock).
//
// ArcIndex maps a HashPair to the uint32_t arena slot that holds it. It is an
// open-addressing table with linear probing and backward-shift deletion, sized
// once at construction for the largest number of keys ARC can track (2c), so
// it never allocates, never rehashes and never accumulates tombstones:
//
//   - Buckets are 8 bytes, {tag, ~slot}: eight per cache line. `tag` is the
//     high 32 bits of H2 (already uniform: it is part of a keyed XXH3-128), and
//     the home bucket is `(tag * buckets) >> 32` (Lemire's multiply-shift
//     range reduction, so the bucket count need not be a power of two), so a
//     bucket's home can be recomputed from the bucket alone. The slot is
//     stored inverted, so an all-zero bucket is empty (~kArcNil == 0): from
//     a zeroing allocator the table is ready without being written, and a
//     bucket's cache line enters the RSS when a key first lands on it.
//   - Lookup walks from the home bucket until it meets an empty bucket. A tag
//     match is confirmed by comparing the full key stored in the arena (the
//     caller passes `key_of(slot)`), so two keys that share a tag coexist.
//   - Erase empties the bucket and then shifts later entries of the same
//     cluster back into the hole when their home allows it (Knuth's
//     Algorithm R). No bucket is ever "deleted but occupied", so probe
//     lengths depend only on the current load, not on the history of churn.
//     This is what the report's failed flat table lacked (§5.22: tombstones
//     under ARC's insert/erase churn made it 9x slower than unordered_map).
//   - The table has at least 4/3 as many buckets as keys (load <= 3/4), where
//     linear probing averages ~2.5 probes for a hit and ~8.5 for a miss: one
//     or two cache lines, on ARC's write path only (under its SpinLock). At
//     load 1/2 and a power-of-two size it cost 32-64 bytes per cached key
//     (2c keys tracked for c cached); now ~21.
//
// docs/arc.md records the measurement against std::unordered_map that chose
// this table (arc_bench.cc keeps the unordered_map variant for re-measuring).
#ifndef FURRBALLS_ENGINE_ARC_ARC_INDEX_H_
#define FURRBALLS_ENGINE_ARC_ARC_INDEX_H_

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <new>
#include <utility>

#include <absl/status/status.h>
#include <absl/status/statusor.h>
#include <absl/strings/str_cat.h>

#include "engine/common/hash_pair.h"
#include "engine/common/raw_allocator.h"

namespace furrballs {

// The "no slot" sentinel shared by the index and the flat lists.
inline constexpr uint32_t kArcNil = UINT32_MAX;

class ArcIndex {
 public:
  // An index for at most `max_keys` keys at once. Fails on an allocation
  // failure or if `max_keys` does not fit the uint32_t slot encoding.
  static absl::StatusOr<ArcIndex> Create(uint32_t max_keys,
                                         RawAllocator alloc) {
    if (max_keys == 0 || max_keys >= kArcNil / 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("ArcIndex: max_keys ", max_keys, " outside [1, ",
                       kArcNil / 2, ")"));
    }
    const size_t buckets = BucketsFor(max_keys);
    void* mem = alloc.Allocate(buckets * sizeof(Bucket));
    if (mem == nullptr) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "ArcIndex: cannot allocate ", buckets * sizeof(Bucket), " bytes"));
    }
    Bucket* table = static_cast<Bucket*>(mem);
    if (!alloc.zeroed) {
      for (size_t i = 0; i < buckets; ++i) new (&table[i]) Bucket{};
    }
    return ArcIndex(table, buckets, alloc);
  }

  // The bucket count for at most `max_keys` keys (load <= 3/4).
  static constexpr size_t BucketsFor(uint32_t max_keys) {
    return std::max<size_t>(kMinBuckets, (size_t{max_keys} * 4 + 2) / 3);
  }
  // The bytes Create allocates for `max_keys` keys.
  static constexpr size_t BytesFor(uint32_t max_keys) {
    return BucketsFor(max_keys) * sizeof(Bucket);
  }

  ArcIndex(ArcIndex&& other) noexcept
      : table_(std::exchange(other.table_, nullptr)),
        buckets_(other.buckets_),
        alloc_(other.alloc_) {}
  ArcIndex& operator=(ArcIndex&& other) noexcept {
    if (this != &other) {
      Free();
      table_ = std::exchange(other.table_, nullptr);
      buckets_ = other.buckets_;
      alloc_ = other.alloc_;
    }
    return *this;
  }
  ArcIndex(const ArcIndex&) = delete;
  ArcIndex& operator=(const ArcIndex&) = delete;
  ~ArcIndex() { Free(); }

  // The slot holding `key`, or kArcNil. `key_of(slot)` must return the key
  // stored at `slot` (the arena owns keys; the index only owns positions).
  template <typename KeyOf>
  uint32_t Find(const HashPair& key, const KeyOf& key_of) const {
    const uint32_t tag = TagOf(key);
    for (size_t i = Home(tag);; i = Next(i)) {
      const Bucket& b = table_[i];
      if (b.empty()) return kArcNil;
      if (b.tag == tag && key_of(b.slot()) == key) return b.slot();
    }
  }

  // REQUIRES: `key` is absent and fewer than max_keys keys are present.
  void Insert(const HashPair& key, uint32_t slot) {
    const uint32_t tag = TagOf(key);
    size_t i = Home(tag);
    while (!table_[i].empty()) i = Next(i);
    table_[i] = Bucket::Of(tag, slot);
  }

  // Removes the entry that maps `key` to `slot`.
  // REQUIRES: Find(key) == slot.
  void Erase(const HashPair& key, uint32_t slot) {
    size_t hole = Home(TagOf(key));
    while (table_[hole].empty() || table_[hole].slot() != slot) {
      hole = Next(hole);
    }
    // Backward shift: walk the rest of the cluster; an entry may move into
    // the hole iff the hole lies on its probe path, i.e. the hole is no
    // further from the entry's home than the entry itself is.
    for (size_t j = Next(hole); !table_[j].empty(); j = Next(j)) {
      const size_t home = Home(table_[j].tag);
      if (Distance(home, j) >= Distance(hole, j)) {
        table_[hole] = table_[j];
        hole = j;
      }
    }
    table_[hole] = Bucket{};
  }

  size_t bucket_count() const { return buckets_; }
  size_t memory_bytes() const { return bucket_count() * sizeof(Bucket); }

 private:
  struct Bucket {
    uint32_t tag = 0;
    uint32_t inverted_slot = 0;  // ~slot; 0 (~kArcNil) = empty

    static Bucket Of(uint32_t tag, uint32_t slot) { return {tag, ~slot}; }
    bool empty() const { return inverted_slot == 0; }
    uint32_t slot() const { return ~inverted_slot; }
  };
  static_assert(sizeof(Bucket) == 8,
                "eight buckets per cache line keep most probe sequences on "
                "one or two lines at load <= 3/4");
  static_assert(~kArcNil == 0,
                "an all-zero bucket must read as empty (zeroed tables)");

  static constexpr size_t kMinBuckets = 8;

  static uint32_t TagOf(const HashPair& key) {
    return static_cast<uint32_t>(key.h2 >> 32);
  }

  ArcIndex(Bucket* table, size_t buckets, RawAllocator alloc)
      : table_(table), buckets_(buckets), alloc_(alloc) {}

  size_t Home(uint32_t tag) const {
    return static_cast<size_t>((uint64_t{tag} * buckets_) >> 32);
  }
  size_t Next(size_t i) const { return i + 1 == buckets_ ? 0 : i + 1; }
  // How far `to` lies past `from` along the (wrapping) probe direction.
  size_t Distance(size_t from, size_t to) const {
    return to >= from ? to - from : to + buckets_ - from;
  }

  void Free() {
    if (table_ != nullptr) alloc_.Deallocate(table_, memory_bytes());
    table_ = nullptr;
  }

  Bucket* table_;
  size_t buckets_;
  RawAllocator alloc_;
};

}  // namespace furrballs

#endif  // FURRBALLS_ENGINE_ARC_ARC_INDEX_H_
