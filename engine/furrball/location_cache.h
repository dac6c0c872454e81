// engine/furrball/location_cache.h: LocationCache, a hint of which node
// holds a key when the routing does not say (round-robin, thread-local):
// the report's location cache (§8 Phase 4 §4.2), so that a Get goes to the
// key's node instead of searching every shard.
//
// Thread safety: thread-safe and lock-free; every access is one relaxed
// atomic load, store or CAS of a 16-bit entry.
//
// ---------------------------------------------------------------------------
// Layout
//
// One direct-mapped array of 16-bit entries per node ("slice"), on that
// node's memory and paid from its share of the budget (MemoryPlan::
// location_cache_bytes): bit_ceil(max_keys) entries, 2-4 bytes per key slot
// the node starts with. A key's entry is in the slice of its home node
// (NodeRouter::HomeIndex, where its key lock lives too), at
// (h2 >> kIndexShift) & mask; the entry holds a tag from h2's top bits and
// the holder's node index + 1:
//
//   entry = tag << kNodeBits | (index + 1)      0 = empty
//
// One shared table, not one per node: a write names its key's node in one
// entry instead of N, a discovery made by a reader on one node serves
// readers on every node, and the memory is 2 bytes per slot rather than
// 2N. Hints are read far more often than written, so their cache lines
// stay shared in every reader's cache; the slices spread the table over
// the nodes' memory so that no node pays for all of it.
//
// ---------------------------------------------------------------------------
// Why relaxed atomics are enough: a hint is only a hint
//
// A reader probes the hinted node's shard, whose Get compares the full key
// stored with the value (entry.h); only that decides a hit. A hint that is
// wrong (the key moved, was deleted or evicted, or another key with the
// same index and tag overwrote the entry) makes that probe miss, and the
// caller then searches as if there were no hint and clears or refreshes
// the entry: one wasted probe, never a wrong answer and never a missed key.
// Hence no ordering with the shard's data is needed in either direction.
//
//   Remember(h, i)  load; store the new entry only if it differs (a hit on
//                   a hot key writes nothing, so its line stays shared)
//   Forget(h, i)    CAS(entry(h, i) -> 0): clears only a hint that still
//                   says what the caller found wrong, never a newer one
//   Hint(h)         load; a tag mismatch or 0 is "no hint"
//
// Lost updates between concurrent Remembers of colliding keys are benign:
// the loser's key is discovered again on its next Get.
#ifndef FURRBALLS_ENGINE_FURRBALL_LOCATION_CACHE_H_
#define FURRBALLS_ENGINE_FURRBALL_LOCATION_CACHE_H_

#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <new>
#include <utility>
#include <vector>

#include "engine/common/hash_pair.h"
#include "engine/common/raw_allocator.h"
#include "engine/furrball/node_router.h"

namespace furrballs {
namespace furrball_internal {

class LocationCache {
 public:
  using Entry = std::atomic<uint16_t>;
  static_assert(sizeof(Entry) == 2 && Entry::is_always_lock_free,
                "an entry is two bytes, read and written lock-free");

  // Node index + 1 in the low bits (0 = empty): up to 127 nodes.
  static constexpr int kNodeBits = 7;
  static constexpr int kMaxNodes = (1 << kNodeBits) - 1;
  static constexpr int kTagBits = 16 - kNodeBits;
  // The entry's index comes from h2 above the key-lock bits (h2's low 10,
  // node_shard.h) and the tag from its top kTagBits, so index and tag are
  // independent for slices of up to 2^(64 - kTagBits - kIndexShift) entries.
  static constexpr int kIndexShift = 10;
  static constexpr uint32_t kMinEntries = 64;

  // Entries of one node's slice for a node that starts with `keys` key
  // slots, and their bytes.
  static uint64_t EntriesFor(uint64_t keys) {
    return std::bit_ceil(std::max<uint64_t>(keys, kMinEntries));
  }
  static uint64_t BytesFor(uint64_t keys) {
    return EntriesFor(keys) * sizeof(Entry);
  }

  // One slice of `entries` (a power of two) per node of `router`, node
  // i's from allocators[i]. A zeroed allocator's memory is used as it is
  // (all entries empty), so untouched slices stay out of the RSS. Check
  // ok() afterwards.
  LocationCache(const NodeRouter* router, std::vector<RawAllocator> allocators,
                uint64_t entries)
      : router_(router), mask_(entries - 1) {
    slices_.reserve(allocators.size());
    for (const RawAllocator& a : allocators) {
      void* p = a.Allocate(entries * sizeof(Entry));
      if (p == nullptr) {
        ok_ = false;
        break;
      }
      if (!a.zeroed) {
        for (uint64_t i = 0; i < entries; ++i) {
          new (static_cast<Entry*>(p) + i) Entry(0);
        }
      }
      slices_.push_back(Slice{static_cast<Entry*>(p), a});
    }
  }
  ~LocationCache() {
    for (Slice& s : slices_) s.allocator.Deallocate(s.entries, bytes_per_slice());
  }
  LocationCache(const LocationCache&) = delete;
  LocationCache& operator=(const LocationCache&) = delete;

  bool ok() const { return ok_; }
  uint64_t bytes_per_slice() const { return (mask_ + 1) * sizeof(Entry); }

  // The node index the cache names for `h`, or -1.
  int Hint(const HashPair& h) const {
    const uint16_t e = EntryOf(h).load(std::memory_order_relaxed);
    if (e == 0 || (e >> kNodeBits) != TagOf(h)) return -1;
    return (e & kMaxNodes) - 1;
  }

  // Names node `index` for `h`. REQUIRES: 0 <= index < kMaxNodes.
  void Remember(const HashPair& h, int index) {
    Entry& entry = EntryOf(h);
    const uint16_t e = Encode(h, index);
    if (entry.load(std::memory_order_relaxed) != e) {
      entry.store(e, std::memory_order_relaxed);
    }
  }

  // Clears the hint if it still names node `index` for `h`.
  void Forget(const HashPair& h, int index) {
    uint16_t expected = Encode(h, index);
    EntryOf(h).compare_exchange_strong(expected, 0, std::memory_order_relaxed);
  }

 private:
  struct Slice {
    Entry* entries;
    RawAllocator allocator;
  };

  static uint16_t TagOf(const HashPair& h) {
    return static_cast<uint16_t>(h.h2 >> (64 - kTagBits));
  }
  static uint16_t Encode(const HashPair& h, int index) {
    return static_cast<uint16_t>(TagOf(h) << kNodeBits |
                                 static_cast<uint16_t>(index + 1));
  }
  Entry& EntryOf(const HashPair& h) const {
    return slices_[router_->HomeIndex(h)]
        .entries[(h.h2 >> kIndexShift) & mask_];
  }

  const NodeRouter* const router_;
  const uint64_t mask_;
  std::vector<Slice> slices_;
  bool ok_ = true;
};

}  // namespace furrball_internal
}  // namespace furrballs

#endif  // FURRBALLS_ENGINE_FURRBALL_LOCATION_CACHE_H_
