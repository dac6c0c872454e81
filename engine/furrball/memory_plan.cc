#include "engine/furrball/memory_plan.h"

#include <algorithm>
#include <bit>
#include <cstdint>

#include <absl/strings/str_cat.h>
#include <absl/strings/str_format.h>

#include "engine/arc/arc_flat_list.h"
#include "engine/arc/concurrent_arc.h"
#include "engine/cmap/resizable_cmap.h"
#include "engine/common/error.h"
#include "engine/furrball/entry.h"
#include "engine/furrball/key_meta.h"
#include "engine/furrball/location_cache.h"
#include "engine/furrball/node_job.h"
#include "engine/furrball/node_stats.h"
#include "engine/furrball/page_pool.h"
#include "engine/numatic/error_status.h"
#include "engine/numatic/numatic.h"

namespace furrballs {
namespace {

using furrball_internal::EntryFootprint;
using furrball_internal::LocationCache;
using furrball_internal::NodeJob;
using furrball_internal::NodeStats;
using furrball_internal::PayloadSize;
using furrball_internal::kMaxPageSize;
using furrball_internal::kMinPageSize;
using furrball_internal::PagePool;

// The key table's arrays (CMap's control bytes and slots, ARC's arena and
// index), each its own mapping rounded up to an OS page.
constexpr uint64_t kKeyTableMappings = 4;
// A node gets pages of the largest power of two up to kDefaultPageSize of
// which its share holds kPagesWanted, never smaller than kMinPageSize. What
// never holds data is counted in whole pages: the open current, relocation
// and staging pages, the free-page reserve's floor (two pages), the value
// pages a key-table growth retires, a whole page evicted at a time. Until
// 2026-11-24 a node kept 2 MiB pages while it got 32 of them, else got 64:
// at 64 MiB an engine-level fill (bench/memory/engine_fill) then held 5%
// more keys of 1 KiB and 12% more of 64 B with 256 pages of 256 KiB
// (docs/memory_bench.md, "Smaller pages at middle budgets"). A node of 256
// to 511 pages scans no more page metadata (64 B a page) per reclaim step
// than a 1 GiB node with 2 MiB pages always did. Values above an eighth of
// a page are chunked (chunked_value.h): at 64 MiB those over 32 KiB, a
// 1 MiB value in 33 chunks, which stay whole only because a writer evicts
// the oldest of the sparsest pages (PagePool::EvictionCandidate).
constexpr uint64_t kDefaultPageSize = uint64_t{2} << 20;
constexpr uint64_t kPagesWanted = 256;
// The fewest key slots a node is given.
constexpr uint64_t kMinKeys = 64;

uint64_t ArcBytes(uint64_t keys) {
  return ArcFlatLists<>::BytesFor(static_cast<uint32_t>(keys));
}
uint64_t TableBytes(uint64_t keys) {
  return ResizableCMap<KeyMeta>::BytesFor(keys);
}
// The largest key count a node can index: ARC's slots, and the 32-bit
// counts the engine keeps (ConcurrentARC's capacity, resident_keys_).
uint64_t MaxKeysLimit() {
  return std::min<uint64_t>(ArcFlatLists<>::kMaxCapacity, UINT32_MAX / 2);
}
// The smallest entry a client can store: a one-byte key, an empty value.
uint64_t SmallestEntryBytes() { return EntryFootprint(PayloadSize(1, 0)); }

// The largest k in [lo, hi] with fits(k), for a monotonic fits that holds
// at lo.
template <typename Fits>
uint64_t LargestFitting(uint64_t lo, uint64_t hi, Fits fits) {
  while (lo < hi) {
    const uint64_t mid = lo + (hi - lo + 1) / 2;
    if (fits(mid)) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

// What Numatic maps for an allocation of `bytes` on a node: a mapping of
// its own, rounded up to the OS page.
uint64_t Mapped(uint64_t bytes) {
  const uint64_t os_page = GetPageSize();
  return (bytes + os_page - 1) / os_page * os_page;
}

// A shard's structures that do not scale with key slots (NodeShard::Create,
// NodeJob), as Numatic maps them: the shard object, statistics, key locks,
// the cold-key window, the job queue, the metadata line and free-list entry
// of each of `pages` pages (retired or not), and the page rounding of the
// key table's arrays. memory_plan_test checks the sum against what an open
// cache maps. (Until 2026-11-24 a rounded-up 128 KiB and 128 B a page: 48
// KiB more than a 4 MiB node maps, most of a page there.)
uint64_t FixedBytes(const FurrBallOptions& o, uint64_t pages,
                    uint32_t key_locks) {
  return Mapped(kShardObjectBytes) + Mapped(NodeStats::kBytes) +
         Mapped(uint64_t{key_locks} * kKeyLockBytes) +
         (o.spill_cold_pages ? Mapped(kColdWindowBytes) : 0) +
         Mapped(NodeJob::QueueBytesFor(o.job_queue_capacity)) +
         Mapped(pages * sizeof(furrball_internal::Page)) +
         Mapped(pages * sizeof(uint32_t)) +
         kKeyTableMappings * GetPageSize();
}

// The node's slice of the location cache for `keys` starting key slots;
// none under hash routing (the owner is known) or when it is off.
uint64_t LocationCacheBytes(const FurrBallOptions& o, int node_count,
                            uint64_t keys) {
  if (o.routing == RoutingPolicy::kHash || !o.location_cache ||
      node_count < 2 || node_count > LocationCache::kMaxNodes) {
    return 0;
  }
  return Mapped(LocationCache::BytesFor(keys));
}

// Two memtables of a sixteenth of the share each, 64 KiB (RocksDB's
// smallest) to 64 MiB; none without a spill tier.
uint64_t SpillBufferBytes(const FurrBallOptions& o, uint64_t share) {
  if (o.spill_dir.empty()) return 0;
  return 2 * std::clamp<uint64_t>(share / 16, uint64_t{64} << 10,
                                  uint64_t{64} << 20);
}

static_assert(kMaxPageSize <= kMaxKeyMetaOffset,
              "every offset of the largest page fits KeyMeta (key_meta.h)");

// Values too large for a page's share are chunked (chunked_value.h), so
// only the budget decides. A share too large for kMaxPagesPerNode default
// pages (128 GiB) gets the smallest larger pages that keep within it.
uint32_t AutoPageSize(uint64_t share) {
  uint64_t page = kDefaultPageSize;
  if (share / page >= kPagesWanted) {
    while (page < kMaxPageSize && share / page > kMaxPagesPerNode) page *= 2;
    return static_cast<uint32_t>(page);
  }
  while (page > kMinPageSize && share / page < kPagesWanted) page /= 2;
  return static_cast<uint32_t>(page);
}

}  // namespace

std::string MemoryPlan::Summary() const {
  const double mib = 1024.0 * 1024.0;
  return absl::StrFormat(
      "%.1f MiB per node: values %.1f MiB (%u pages of %u KiB), key table "
      "%.1f MiB + ARC %.1f MiB for %u keys (%.0f B per key%s), fixed %.1f "
      "MiB%s, spill buffers %.1f MiB",
      node_budget_bytes / mib, value_bytes() / mib, page_count,
      page_size >> 10, key_table_bytes / mib, arc_bytes / mib, max_keys,
      metadata_bytes_per_key(),
      key_ceiling > max_keys
          ? absl::StrFormat("; grows to up to %u keys, paid with pages",
                            key_ceiling)
          : "",
      fixed_bytes / mib,
      location_cache_bytes != 0
          ? absl::StrFormat(" (location cache %.1f MiB)",
                            location_cache_bytes / mib)
          : "",
      spill_buffer_bytes / mib);
}

uint64_t KeyTableBytes(uint64_t keys) {
  return ConcurrentARC<KeyMeta>::BytesFor(static_cast<uint32_t>(keys));
}

uint64_t KeyTableGrowthPeakBytes(uint64_t from, uint64_t to) {
  // The new table whole: new keys land all over it, so it can be all in
  // memory before the old one is all given back. A quarter of the old one:
  // what the migration has not given back yet while the new one fills,
  // with the release batches (64 KiB per array) in flight; measured at
  // most 0.15 of it (memory_plan.h).
  return KeyTableBytes(to) + KeyTableBytes(from) / 4;
}

uint32_t KeyLocksFor(uint64_t keys) {
  return static_cast<uint32_t>(std::clamp<uint64_t>(
      std::bit_ceil(std::max<uint64_t>(keys, 1)) / 16, kMinKeyLocks,
      kMaxKeyLocks));
}

uint64_t RetiredKeyTableBytes(uint32_t retired_tables) {
  return uint64_t{retired_tables} * 2 * GetPageSize();
}

uint32_t RetiredPagesFor(const MemoryPlan& plan, uint64_t key_table_bytes) {
  const uint64_t need = plan.fixed_bytes + plan.spill_buffer_bytes +
                        key_table_bytes + plan.value_bytes();
  if (need <= plan.node_budget_bytes) return 0;
  const uint64_t pages =
      (need - plan.node_budget_bytes + plan.page_size - 1) / plan.page_size;
  return static_cast<uint32_t>(
      std::min<uint64_t>(pages, uint64_t{plan.page_count} + 1));
}

uint32_t KeyTableGrowthTo(const MemoryPlan& plan, const KeyTableLoad& load,
                          uint32_t keep_free) {
  const uint64_t c = load.capacity;
  const bool full = load.evicted_for_keys && load.resident_keys * 16 >= c * 15;
  if (c >= plan.key_ceiling || !full) return load.capacity;
  const uint32_t in_service = plan.page_count - load.retired_pages;
  const uint32_t used =
      in_service - std::min(in_service, load.free_pages);
  return GrowthTarget(plan, load.capacity,
                      EntryPages{used, load.resident_keys}, keep_free,
                      load.retired_tables);
}

uint32_t KeyTableShrinkTo(const MemoryPlan& plan, const KeyTableLoad& load,
                          uint32_t keep_free) {
  const uint64_t c = load.capacity;
  const bool far_from_full = load.resident_keys * 2 < c;
  if (!far_from_full || load.evicted_for_keys || !load.evicted_for_pages ||
      c <= plan.max_keys || load.resident_keys == 0) {
    return load.capacity;
  }
  const uint32_t in_service = plan.page_count - load.retired_pages;
  const uint64_t used = in_service - std::min(in_service, load.free_pages);
  // The split: the largest capacity below c whose table leaves the pages
  // its keys take (the pages per key seen, rounded up as GrowthTarget
  // does) beside keep_free; the retired tables' partial pages stay.
  const uint64_t least = std::max<uint64_t>(
      plan.max_keys, load.resident_keys + load.resident_keys / 8);
  if (least * 4 > c * 3) return load.capacity;
  const auto fits = [&](uint64_t to) {
    const uint32_t retired = RetiredPagesFor(
        plan,
        KeyTableBytes(to) + RetiredKeyTableBytes(load.retired_tables + 1));
    const uint64_t entry_pages =
        (used * to + load.resident_keys - 1) / load.resident_keys;
    return retired <= plan.page_count &&
           plan.page_count - retired >= entry_pages + keep_free;
  };
  const uint64_t split =
      fits(least) ? LargestFitting(least, c - 1, fits) : least;
  return split * 4 <= c * 3 ? static_cast<uint32_t>(split) : load.capacity;
}

uint32_t GrowthTarget(const MemoryPlan& plan, uint32_t keys,
                      const EntryPages& entries, uint32_t keep_free,
                      uint32_t retired_tables) {
  const uint64_t most =
      std::min<uint64_t>(uint64_t{keys} * 2, plan.key_ceiling);
  const uint64_t least = uint64_t{keys} + std::max<uint32_t>(keys / 16, 1);
  if (most < least) return keys;
  const uint64_t can_retire =
      plan.page_count - std::min<uint64_t>(plan.page_count,
                                           PagePool::kMinPages);
  // Pages `to` entries take at the pages per key seen now (rounded up: the
  // open and staging pages count as if they grew with the keys, which errs
  // towards the smaller table).
  auto entry_pages = [&](uint64_t to) -> uint64_t {
    if (entries.keys == 0) return 0;
    return (uint64_t{entries.pages} * to + entries.keys - 1) / entries.keys;
  };
  auto fits = [&](uint64_t to) {
    const uint32_t after = RetiredPagesFor(
        plan, KeyTableBytes(to) + RetiredKeyTableBytes(retired_tables + 1));
    return RetiredPagesFor(plan, KeyTableGrowthPeakBytes(keys, to) +
                                     RetiredKeyTableBytes(retired_tables)) <=
               can_retire &&
           after <= plan.page_count &&
           plan.page_count - after >= entry_pages(to) + keep_free;
  };
  if (!fits(least)) return keys;
  return static_cast<uint32_t>(LargestFitting(least, most, fits));
}

uint32_t FreePageReserve(uint32_t pages_in_service, bool cold_pages) {
  return std::max<uint32_t>(
      furrball_internal::kRelocationReserve + (cold_pages ? 2 : 1),
      pages_in_service / 128);
}

uint64_t MemoryBudgetForPages(const FurrBallOptions& o, int node_count,
                              uint32_t pages_per_node) {
  const uint64_t keys = o.max_keys_per_node;
  const uint64_t rest = FixedBytes(o, pages_per_node, KeyLocksFor(keys)) +
                        KeyTableBytes(keys) +
                        LocationCacheBytes(o, node_count, keys) +
                        uint64_t{pages_per_node} * o.page_size_bytes;
  // The spill buffers depend on the share they are part of: grow the share
  // until it holds them too (at most a few rounds).
  uint64_t share = rest;
  while (rest + SpillBufferBytes(o, share) > share) {
    share = rest + SpillBufferBytes(o, share);
  }
  return share * node_count;
}

uint64_t SpillWriteBufferBytes(const MemoryPlan& plan) {
  return plan.spill_buffer_bytes / 2;
}

absl::StatusOr<MemoryPlan> PlanMemory(const FurrBallOptions& o,
                                      int node_count) {
  auto bad = [](auto&&... parts) {
    return ErrorStatus(Error::kInvalidArgument, absl::StrCat(parts...));
  };
  if (node_count <= 0) return bad("node count must be > 0");
  MemoryPlan plan;
  plan.node_budget_bytes = o.memory_budget_bytes / node_count;
  const uint64_t share = plan.node_budget_bytes;
  plan.page_size = o.page_size_bytes != 0
                       ? static_cast<uint32_t>(o.page_size_bytes)
                       : AutoPageSize(share);
  plan.spill_buffer_bytes = SpillBufferBytes(o, share);
  // The key table and the location cache's slice, both sized by the key
  // slots a node starts with.
  auto key_bytes_for = [&](uint64_t k) {
    return KeyTableBytes(k) + LocationCacheBytes(o, node_count, k);
  };
  // Everything but the spill buffers that a node of `pages` pages and `k`
  // starting key slots maps.
  auto node_bytes = [&](uint64_t pages, uint64_t k) {
    return FixedBytes(o, pages, KeyLocksFor(k)) + key_bytes_for(k) +
           pages * plan.page_size;
  };
  const uint64_t least = plan.spill_buffer_bytes +
                         node_bytes(PagePool::kMinPages, kMinKeys);
  if (share < least) {
    return bad("memory budget of ", o.memory_budget_bytes, " bytes gives each of ",
               node_count, " nodes ", share, " bytes; a node needs at least ",
               least, " (", PagePool::kMinPages, " pages of ", plan.page_size,
               " bytes, ", kMinKeys, " key slots, ",
               FixedBytes(o, PagePool::kMinPages, KeyLocksFor(kMinKeys)) >> 10,
               " KiB of fixed structures",
               plan.spill_buffer_bytes != 0
                   ? absl::StrCat(", ", plan.spill_buffer_bytes >> 10,
                                  " KiB of spill write buffers")
                   : "",
               "): raise the budget, use fewer nodes",
               o.page_size_bytes > kMinPageSize
                   ? absl::StrCat(" or a smaller page size (at least ",
                                  kMinPageSize, ")")
                   : "");
  }
  // What the fixed structures, keys and pages share.
  const uint64_t room = share - plan.spill_buffer_bytes;
  const uint64_t max_keys_limit = MaxKeysLimit();
  uint64_t keys;
  if (o.max_keys_per_node != 0) {
    keys = o.max_keys_per_node;
    if (keys > max_keys_limit) {
      return bad("max_keys_per_node = ", keys, " exceeds ", max_keys_limit);
    }
    if (node_bytes(PagePool::kMinPages, keys) > room) {
      return bad("max_keys_per_node = ", keys, " needs ", key_bytes_for(keys),
                 " bytes of key table, ARC and location cache per node, more "
                 "than a node's ",
                 share, "-byte share leaves beside ", PagePool::kMinPages,
                 " pages");
    }
  } else {
    // The most keys whose metadata and expected entries fit, and that leave
    // the minimum number of pages. Both grow monotonically with k.
    const uint64_t entry =
        EntryFootprint(PayloadSize(0, std::max<uint64_t>(
                                         o.expected_entry_bytes, 1)));
    auto fits = [&](uint64_t k) {
      const uint64_t fixed = FixedBytes(o, PagePool::kMinPages, KeyLocksFor(k));
      return node_bytes(PagePool::kMinPages, k) <= room &&
             fixed + key_bytes_for(k) + k * entry <= room;
    };
    keys = LargestFitting(
        kMinKeys, std::min<uint64_t>(max_keys_limit, room / entry + 1), fits);
  }
  plan.max_keys = static_cast<uint32_t>(keys);
  plan.key_ceiling = plan.max_keys;
  plan.key_locks = KeyLocksFor(keys);
  plan.location_cache_bytes = LocationCacheBytes(o, node_count, keys);
  // The most pages the rest of the share holds, each with its metadata.
  const uint64_t pages = LargestFitting(
      PagePool::kMinPages, room / plan.page_size,
      [&](uint64_t p) { return node_bytes(p, keys) <= room; });
  if (pages > kMaxPagesPerNode) {
    // A KeyMeta names its page in kPageBits bits (key_meta.h).
    const uint64_t at_least =
        std::bit_ceil((pages * plan.page_size + kMaxPagesPerNode - 1) /
                      kMaxPagesPerNode);
    return bad("a node's share of ", share, " bytes makes ", pages,
               " pages of ", plan.page_size, " bytes, more than the ",
               kMaxPagesPerNode, " a node can address: ",
               at_least <= kMaxPageSize
                   ? absl::StrCat("raise page_size_bytes (to ",
                                  at_least >> 10,
                                  " KiB or more), or leave it automatic")
                   : "use more nodes or a smaller budget");
  }
  plan.page_count = static_cast<uint32_t>(pages);
  plan.fixed_bytes =
      FixedBytes(o, pages, plan.key_locks) + plan.location_cache_bytes;
  plan.key_table_bytes = TableBytes(keys);
  plan.arc_bytes = ArcBytes(keys);
  if (o.max_keys_per_node == 0) {
    // The most keys the share could hold at all: every entry the smallest
    // there is, and a growth to that count (its peak, KeyTableGrowthPeakBytes)
    // leaving the fewest pages a pool works with. The fixed structures
    // (every page's metadata line, the key locks, the location cache) stay
    // as they are whatever the table grows to.
    const uint64_t room_left = room - plan.fixed_bytes;
    const uint64_t smallest = SmallestEntryBytes();
    const uint64_t min_pages_bytes = PagePool::kMinPages * plan.page_size;
    auto holds = [&](uint64_t k) {
      return KeyTableBytes(k) + k * smallest <= room_left &&
             KeyTableGrowthPeakBytes(k / 2, k) + min_pages_bytes <= room_left;
    };
    plan.key_ceiling = static_cast<uint32_t>(LargestFitting(
        keys, std::min<uint64_t>(max_keys_limit, room_left / smallest + 1),
        holds));
  }
  return plan;
}

}  // namespace furrballs
