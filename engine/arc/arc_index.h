// engine/arc/arc_index.h: the fingerprint -> arena-slot index of the flat ARC
// lists.
//
// Thread safety: thread-compatible (REQUIRES external synchronization; in
// ConcurrentARC it is only touched under the write SpinLock).
//
// ArcIndex maps a key's 64-bit fingerprint (H2 of its HashPair) to the
// uint32_t arena slot that holds it. It is an open-addressing table with
// linear probing and backward-shift deletion, sized once at construction for
// the largest number of keys ARC can track (2c), so it never allocates, never
// rehashes and never accumulates tombstones:
//
//   - Buckets are 8 bytes, {tag, slot + 1 and distance}: eight per cache
//     line. The fingerprint is split in two halves. The high half picks the
//     home bucket, `(high * buckets) >> 32` (Lemire's multiply-shift range
//     reduction, so the bucket count need not be a power of two), and is
//     kept by the arena (arc_flat_list.h); the low half is the bucket's tag.
//     So a key's whole fingerprint costs the index nothing beyond the tag
//     it needs anyway, and the arena keeps 4 bytes of it, not 8 or 16; the
//     low half of a slot's key is found again by the walk Erase makes
//     (TagOfSlot), which is how ARC names a victim.
//   - Because the tag is not the home's source, a bucket records how far it
//     sits from its home (0-6; 7 = "7 or more, ask the arena"), so that
//     deletion can recompute homes from the buckets alone: at load 3/4 (the
//     most ARC reaches) about 6% of keys sit 7 or more buckets past their
//     home (1.5 on average), and only for those does the backward shift
//     call `high_of(slot)`.
//   - The slot is stored plus one in the top 29 bits, so an all-zero bucket
//     is empty: from a zeroing allocator the table is ready without being
//     written, and a bucket's cache line enters the RSS when a key first
//     lands on it.
//   - Lookup walks from the home bucket until it meets an empty bucket. A tag
//     match is confirmed by the caller's `matches(slot)` (the arena compares
//     the high half), so two keys that share a tag coexist.
//   - Erase empties the bucket and then shifts later entries of the same
//     cluster back into the hole when their home allows it (Knuth's
//     Algorithm R). No bucket is ever "deleted but occupied", so probe
//     lengths depend only on the current load, not on the history of churn.
//     This is what the report's failed flat table lacked (§5.22: tombstones
//     under ARC's insert/erase churn made it 9x slower than unordered_map).
//   - The table has at least 4/3 as many buckets as keys (load <= 3/4), where
//     linear probing averages ~2.5 probes for a hit and ~8.5 for a miss: one
//     or two cache lines, on ARC's write path only (under its SpinLock). That
//     is 2 x 8 x 4/3 = 21.3 bytes per cached key (2c keys tracked for c
//     cached).
//
// docs/arc.md records the measurement against std::unordered_map that chose
// this table (arc_bench.cc keeps the unordered_map variant for re-measuring).
//
// Growth (when ARC's capacity grows, issue 13): an incremental rehash into a
// bigger table (or, for a shrink, into a smaller one that still holds every
// entry: nothing below depends on which is bigger), Redis's dict rehash on
// open addressing. The bigger table is
// allocated by the caller with no lock held (Create); BeginGrow installs it
// in O(1) and keeps the old one; MigrateSome moves a bounded number of
// entries (and visits at most 8 buckets per move) from the old table to the
// new one. Meanwhile:
//
//   - Insert goes to the new table only, so the old one only empties and
//     its load stays below its 3/4; the new one is sized for the new
//     maximum, old and new entries together.
//   - Find probes the new table, then the old (an entry is in exactly one);
//     a whole-key match in either wins over a fingerprint match.
//   - Erase finds the entry's bucket in the old table, else in the new one,
//     and backward-shifts in that table.
//   - Migration scans the old table from bucket 0 and moves each bucket's
//     entry by an Erase with backward shift, which can refill the same
//     bucket from later in its cluster; the scan moves on once the bucket
//     is empty. So every bucket below the scan position is empty, every old
//     entry stays reachable from its home (a backward shift keeps the table
//     a valid linear-probing table), and a shift's walk that wraps past the
//     table's end stops at bucket 0, which is already empty. A move needs
//     the entry's home in the new table, i.e. the fingerprint's high half,
//     which only the arena keeps: MigrateSome asks `high_of(slot)` once per
//     moved entry.
//   - When the scan passes the last bucket the old table is empty; its
//     memory is handed to the caller (TakeRetired) to free after the lock.
#ifndef FURRBALLS_ENGINE_ARC_ARC_INDEX_H_
#define FURRBALLS_ENGINE_ARC_ARC_INDEX_H_

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <type_traits>
#include <utility>

#include <absl/status/status.h>
#include <absl/status/statusor.h>
#include <absl/strings/str_cat.h>

#include "engine/common/raw_allocator.h"

namespace furrballs {

// The "no slot" sentinel shared by the index and the flat lists.
inline constexpr uint32_t kArcNil = UINT32_MAX;

// What a lookup's caller says about a slot whose tag matched: the slot holds
// the very key, only a key with the same fingerprint (a ghost, which keeps
// nothing else), or another key.
enum class ArcMatch : uint8_t { kNo, kFingerprint, kKey };

// Whether an operation may run while a growth is under way (ArcMayGrow:
// the index probes both tables, the flat lists test each slot access for
// the old generation) or not (ArcNotGrowing, REQUIRES
// !growing(): none of those tests). The flat lists' callers choose once per
// ARC operation (ArcFlatLists::WithGrowthMode).
using ArcMayGrow = std::true_type;
using ArcNotGrowing = std::false_type;

class ArcIndex {
 public:
  // The most keys an index can hold: slot + 1 must fit the bucket's 29 bits.
  static constexpr uint32_t kMaxKeys = (uint32_t{1} << 29) - 1;

  // An index for at most `max_keys` keys at once. Fails on an allocation
  // failure or if `max_keys` does not fit the slot encoding.
  static absl::StatusOr<ArcIndex> Create(uint32_t max_keys,
                                         RawAllocator alloc) {
    if (max_keys == 0 || max_keys > kMaxKeys) {
      return absl::InvalidArgumentError(
          absl::StrCat("ArcIndex: max_keys ", max_keys, " outside [1, ",
                       kMaxKeys, "]"));
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
    return ArcIndex(Table{table, buckets}, alloc);
  }

  // The bucket count for at most `max_keys` keys (load <= 3/4).
  static constexpr size_t BucketsFor(uint32_t max_keys) {
    return std::max<size_t>(kMinBuckets, (size_t{max_keys} * 4 + 2) / 3);
  }
  // The bytes Create allocates for `max_keys` keys.
  static constexpr size_t BytesFor(uint32_t max_keys) {
    return BucketsFor(max_keys) * sizeof(Bucket);
  }

  // The halves of a fingerprint: the high one picks the home bucket (the
  // arena keeps it), the low one is the bucket's tag.
  static uint32_t HighOf(uint64_t fingerprint) {
    return static_cast<uint32_t>(fingerprint >> 32);
  }
  static uint32_t TagOf(uint64_t fingerprint) {
    return static_cast<uint32_t>(fingerprint);
  }

  ArcIndex(ArcIndex&& other) noexcept
      : table_(std::exchange(other.table_, Table{})),
        old_(std::exchange(other.old_, Table{})),
        scan_(other.scan_),
        handed_out_(other.handed_out_),
        alloc_(other.alloc_) {}
  ArcIndex& operator=(ArcIndex&& other) noexcept {
    if (this != &other) {
      Free();
      table_ = std::exchange(other.table_, Table{});
      old_ = std::exchange(other.old_, Table{});
      scan_ = other.scan_;
      handed_out_ = other.handed_out_;
      alloc_ = other.alloc_;
    }
    return *this;
  }
  ArcIndex(const ArcIndex&) = delete;
  ArcIndex& operator=(const ArcIndex&) = delete;
  ~ArcIndex() { Free(); }

  // The slot for which `matches(slot)` says kKey, else the first for which
  // it says kFingerprint, else kArcNil. `matches` sees only slots whose tag
  // (the fingerprint's low half) is equal; it compares the rest of the key
  // (the arena owns keys, the index only positions). A fingerprint match
  // keeps the walk going to the end of the cluster, so that a whole-key
  // match further on wins over it. While growing, both tables are probed.
  template <typename Matches, typename Mode = ArcMayGrow>
  uint32_t Find(uint64_t fingerprint, const Matches& matches,
                Mode = {}) const {
    uint32_t found = kArcNil;
    if (FindIn(table_, fingerprint, matches, &found)) return found;
    if (Mode::value && growing()) FindIn(old_, fingerprint, matches, &found);
    return found;
  }

  // For a caller about to look up many keys (ConcurrentARC's promotion
  // drain), the two steps of a lookup that can run ahead of it: bring in
  // the home bucket's cache line, then, once it is in, name the slot of the
  // first bucket of the cluster with the fingerprint's tag (kArcNil if
  // none), so that the caller can bring in that slot too. Only the newest
  // table is looked at: these are hints, and a wrong one costs one line.
  void PrefetchHome(uint64_t fingerprint) const {
    __builtin_prefetch(&table_.at(table_.Home(HighOf(fingerprint))));
  }
  uint32_t FirstTagged(uint64_t fingerprint) const {
    const uint32_t tag = TagOf(fingerprint);
    for (size_t i = table_.Home(HighOf(fingerprint));; i = table_.Next(i)) {
      const Bucket& b = table_.at(i);
      if (b.empty()) return kArcNil;
      if (b.tag == tag) return b.slot();
    }
  }

  // REQUIRES: no entry maps `fingerprint` to `slot`, and fewer than
  // max_keys keys (of the newest table, while growing) are present.
  void Insert(uint64_t fingerprint, uint32_t slot) {
    InsertIn(table_, HighOf(fingerprint), TagOf(fingerprint), slot);
  }

  // Removes the entry of `slot`, whose fingerprint's high half is `high`.
  // `high_of(s)` must return the high half for any other slot s present
  // (asked only for keys 7 or more buckets past their home).
  // REQUIRES: the entry is present.
  template <typename HighOfSlot, typename Mode = ArcMayGrow>
  void Erase(uint32_t high, uint32_t slot, const HighOfSlot& high_of,
             Mode mode = {}) {
    const auto [t, at] = Locate(high, slot, mode);
    EraseAt(*t, at, high_of);
  }

  // The tag (the fingerprint's low half) of `slot`'s entry, whose high half
  // is `high`: with the high half the arena keeps, the whole fingerprint of
  // a slot, found by the same walk as Erase's (home to the slot's bucket).
  // REQUIRES: the entry is present.
  template <typename Mode = ArcMayGrow>
  uint32_t TagOfSlot(uint32_t high, uint32_t slot, Mode mode = {}) const {
    const auto [t, at] = Locate(high, slot, mode);
    return t->at(at).tag;
  }

  // The entry of `from` (whose fingerprint's high half is `high`) now
  // names slot `to`: the flat lists' compaction before a shrink moves a
  // tracked key to another arena slot (arc_flat_list_compact.h).
  // REQUIRES: the entry is present, !growing().
  void Renumber(uint32_t high, uint32_t from, uint32_t to) {
    const size_t at = FindBucket(table_, high, from);
    Bucket& b = table_.at(at);
    b = Bucket::Of(b.tag, to, b.distance());
  }

  // Starts growing into `bigger` (from Create, made with no lock held), in
  // O(1): later inserts go there, and MigrateSome moves the present
  // entries. REQUIRES: !growing(); `bigger` holds no entries, is not
  // growing, and has room for every key that will be present.
  void BeginGrow(ArcIndex&& bigger) {
    old_ = std::exchange(table_, std::exchange(bigger.table_, Table{}));
    scan_ = 0;
    handed_out_ = 0;
  }

  // Moves up to `max_moves` entries from the old table to the new one,
  // visiting at most 8 * max_moves + 1 buckets. Returns true once the old
  // table is empty (growth done; TakeRetired then hands its memory back).
  // `high_of(s)` returns the fingerprint's high half of any slot present.
  template <typename HighOfSlot>
  bool MigrateSome(size_t max_moves, const HighOfSlot& high_of) {
    if (!growing()) return true;
    size_t visits = 8 * max_moves + 1;
    while (scan_ < old_.buckets && visits > 0) {
      --visits;
      const Bucket b = old_.at(scan_);
      if (b.empty()) {
        ++scan_;
        continue;
      }
      if (max_moves == 0) break;
      --max_moves;
      InsertIn(table_, high_of(b.slot()), b.tag, b.slot());
      EraseAt(old_, scan_, high_of);  // may refill scan_ from its cluster
    }
    return scan_ == old_.buckets;
  }

  // True from BeginGrow until TakeRetired after the migration.
  bool growing() const { return old_.data != nullptr; }

  // While growing: the whole pages of the old table below the scan that no
  // earlier call handed out, once at least `min_bytes` are ready (an empty
  // span otherwise), for the caller to give back after its lock
  // (RetiredMemory::AddRelease). Every bucket below the scan is empty and
  // stays empty (inserts go to the new table; an erase's backward shift
  // writes only at or above the bucket it empties, and its walk stops at
  // an empty bucket), and an empty bucket is all zero bytes, which is what
  // a released page reads as: a probe that reads one, from a home below
  // the scan or wrapping past the end, sees the same empty bucket either
  // way.
  RawAllocator::PageSpan TakeReleasable(size_t min_bytes) {
    const size_t end = scan_ * sizeof(Bucket);
    if (!growing() || end < handed_out_ + min_bytes) return {};
    const RawAllocator::PageSpan span =
        RawAllocator::WholePagesBetween(old_.data, handed_out_, end);
    handed_out_ = end;
    return span;
  }

  // After MigrateSome returned true: the old table's memory, for the caller
  // to free with no lock held ({nullptr, 0} if there is none). Ends growth.
  std::pair<void*, size_t> TakeRetired() {
    if (!growing() || scan_ != old_.buckets) return {nullptr, 0};
    const Table old = std::exchange(old_, Table{});
    return {old.data, old.buckets * sizeof(Bucket)};
  }

  size_t bucket_count() const { return table_.buckets; }
  // Both tables while growing.
  size_t memory_bytes() const {
    return (table_.buckets + old_.buckets) * sizeof(Bucket);
  }

 private:
  struct Bucket {
    // 7 in the distance field: the entry is 7 or more buckets past its
    // home, which only the arena can tell exactly.
    static constexpr uint32_t kFarAway = 7;

    uint32_t tag = 0;
    uint32_t link = 0;  // (slot + 1) << 3 | min(distance, kFarAway); 0 = empty

    static Bucket Of(uint32_t tag, uint32_t slot, size_t distance) {
      return {tag, (slot + 1) << 3 |
                       static_cast<uint32_t>(
                           std::min<size_t>(distance, kFarAway))};
    }
    bool empty() const { return link == 0; }
    uint32_t slot() const { return (link >> 3) - 1; }
    uint32_t distance() const { return link & kFarAway; }
  };
  static_assert(sizeof(Bucket) == 8,
                "eight buckets per cache line keep most probe sequences on "
                "one or two lines at load <= 3/4");
  static_assert(((uint64_t{kMaxKeys} + 1) << 3) - 1 <= UINT32_MAX,
                "slot + 1 of every slot below kMaxKeys must fit 29 bits");

  // One bucket array; buckets == 0 means none.
  struct Table {
    Bucket* data = nullptr;
    size_t buckets = 0;

    Bucket& at(size_t i) const { return data[i]; }
    size_t Home(uint32_t high) const {
      return static_cast<size_t>((uint64_t{high} * buckets) >> 32);
    }
    size_t Next(size_t i) const { return i + 1 == buckets ? 0 : i + 1; }
    // How far `to` lies past `from` along the (wrapping) probe direction.
    size_t Distance(size_t from, size_t to) const {
      return to >= from ? to - from : to + buckets - from;
    }
  };

  static constexpr size_t kMinBuckets = 8;
  static constexpr size_t kNoBucket = SIZE_MAX;

  ArcIndex(Table table, RawAllocator alloc) : table_(table), alloc_(alloc) {}

  // Walks `t`'s cluster for `fingerprint`. Returns true with *found = the
  // slot on a whole-key match; else false, with *found set to the first
  // fingerprint match if it was still kArcNil.
  template <typename Matches>
  static bool FindIn(const Table& t, uint64_t fingerprint,
                     const Matches& matches, uint32_t* found) {
    const uint32_t tag = TagOf(fingerprint);
    for (size_t i = t.Home(HighOf(fingerprint));; i = t.Next(i)) {
      const Bucket& b = t.at(i);
      if (b.empty()) return false;
      if (b.tag != tag) continue;
      switch (matches(b.slot())) {
        case ArcMatch::kKey:
          *found = b.slot();
          return true;
        case ArcMatch::kFingerprint:
          if (*found == kArcNil) *found = b.slot();
          break;
        case ArcMatch::kNo:
          break;
      }
    }
  }

  static void InsertIn(const Table& t, uint32_t high, uint32_t tag,
                       uint32_t slot) {
    const size_t home = t.Home(high);
    size_t i = home;
    while (!t.at(i).empty()) i = t.Next(i);
    t.at(i) = Bucket::Of(tag, slot, t.Distance(home, i));
  }

  // The table (the old one first while growing) and bucket holding the
  // entry of `slot`, whose fingerprint's high half is `high`. REQUIRES: the
  // entry is present.
  template <typename Mode>
  std::pair<const Table*, size_t> Locate(uint32_t high, uint32_t slot,
                                         Mode) const {
    if (Mode::value && growing()) {
      const size_t at = FindBucket(old_, high, slot);
      if (at != kNoBucket) return {&old_, at};
    }
    const size_t at = FindBucket(table_, high, slot);
    if (at == kNoBucket) {
      // A slot ARC does not track, or an entry past an empty bucket of its
      // cluster: the lists and the index disagree. Stop here, loudly,
      // rather than walk the table forever under ARC's lock.
      std::fprintf(stderr,
                   "ArcIndex: slot %u (fingerprint high half %08x) has no "
                   "bucket\n",
                   slot, high);
      std::abort();
    }
    return {&table_, at};
  }

  // The bucket of `slot` in `t`, or kNoBucket.
  static size_t FindBucket(const Table& t, uint32_t high, uint32_t slot) {
    for (size_t i = t.Home(high);; i = t.Next(i)) {
      const Bucket& b = t.at(i);
      if (b.empty()) return kNoBucket;
      if (b.slot() == slot) return i;
    }
  }

  // Empties bucket `hole` of `t`, then shifts later entries of the same
  // cluster back into the hole when their home allows it (Knuth's
  // Algorithm R): an entry may move into the hole iff the hole lies on its
  // probe path, i.e. the hole is no further behind it (`back`) than its
  // home is (its distance).
  template <typename HighOfSlot>
  static void EraseAt(const Table& t, size_t hole, const HighOfSlot& high_of) {
    size_t back = 1;
    for (size_t j = t.Next(hole); !t.at(j).empty(); j = t.Next(j), ++back) {
      const Bucket b = t.at(j);
      size_t distance = b.distance();
      if (distance == Bucket::kFarAway) {
        distance = t.Distance(t.Home(high_of(b.slot())), j);
      }
      if (distance >= back) {
        t.at(hole) = Bucket::Of(b.tag, b.slot(), distance - back);
        hole = j;
        back = 0;
      }
    }
    t.at(hole) = Bucket{};
  }

  void Free() {
    for (Table* t : {&table_, &old_}) {
      if (t->data != nullptr) {
        alloc_.Deallocate(t->data, t->buckets * sizeof(Bucket));
      }
      *t = Table{};
    }
  }

  Table table_;
  // While growing: the table being emptied, scanned from bucket scan_ on;
  // its bytes below handed_out_ were given to TakeReleasable's callers.
  Table old_;
  size_t scan_ = 0;
  size_t handed_out_ = 0;
  RawAllocator alloc_;
};

}  // namespace furrballs

#endif  // FURRBALLS_ENGINE_ARC_ARC_INDEX_H_
