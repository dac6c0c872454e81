// engine/furrball/memory_plan.h: MemoryPlan, how one memory budget is
// divided on each node between value pages, the key table, ARC's state, the
// spill tier's write buffers and the shard's fixed structures.
//
// Thread safety: pure functions of their arguments.
//
// The budget (FurrBallOptions::memory_budget_bytes) is everything the cache
// maps: a node's share is split so that
//
//   fixed + key table + ARC + spill buffers + pages * page_size <= share
//
// ("fixed" is the shard's structures that do not grow with the table, each
// counted as Numatic maps it, rounded up to the OS page: the shard object,
// statistics, key locks, job queue, page metadata, the rounding of the key
// table's arrays, and the node's slice of the location cache, sized from
// the key slots the node starts with.)
//
// where the key table (CMap of KeyMeta) and ARC (arena and index, 2c keys
// tracked for c cached) are sized by their own BytesFor functions, so the
// plan and the allocation cannot drift apart. The number of key slots c a
// node starts with is the largest one for which c keys of
// expected_entry_bytes each, with their metadata, fit the share: a
// starting point, not a limit on what a key or value may be. Memory is
// mapped, not touched, at start-up (numatic.h), so the RSS is at most the
// budget and follows data.
//
// The key table grows (docs/engine.md, "Memory bound"): a node whose
// entries are smaller than planned fills its key table while pages are
// free, and then doubles c, up to key_ceiling, paying with value pages it
// takes out of service (RETIRED, page_pool.h: their memory is given back).
// The page block is mapped once, for the pages of the starting table, and
// at every moment, the peak of a growth included,
//
//   fixed + key table(s) + spill buffers
//         + (page_count - retired pages) * page_size <= share
//
// where a growing key table counts what it holds in memory, not what it
// maps: the new table is mapped whole when the growth starts and enters
// the RSS as keys land in it, while the old one gives its pages back
// behind the migration cursors (resizable_cmap.h, "Released behind the
// cursor"; arc_flat_list.h, GrowStep). KeyTableGrowthPeakBytes plans for
// the new table whole plus a quarter of the old one, which
// concurrent_arc_test's AGrowthHoldsTheNewTableAndAQuarterOfTheOld checks
// on the RSS (a 100,000 -> 200,000 growth with 0 to 20,000 Sets of new keys
// between the worker's steps rose at most 1.33 MiB above both its start
// and its end, of the 2.27 a quarter of the old table allows). Both old
// and new are mapped, so for a growth's while the cache maps up to three
// quarters of the old table more than the share; it holds no more.
//
// RetiredPagesFor says how many pages must be out of service for a key
// table of a given size, and GrowthTarget how far a node should grow: as
// far as the grown table leaves pages for its keys, which is the split of
// the share that holds the most keys of the entry size seen; NodeShard
// retires the pages before it grows (evicting entries if the free ones
// do not pay for the peak) and gives back those the finished table no
// longer needs. KeyTableShrinkTo runs the same the other way when the
// entries became larger: a half-empty table whose node evicts for page
// room shrinks to the split for the entry size seen now, and the pages
// the old table held out of service come back (during the shrink both
// tables are counted whole).
//
// The page size, when not set, follows the budget alone: the largest power
// of two up to 2 MiB of which a node's share holds 256 pages, never smaller
// than kMinPageSize (64 KiB up to a 16 MiB share, 256 KiB at 64 MiB, 1 MiB
// at 256 MiB, 2 MiB from 512 MiB, larger only past 2^16 pages). What never
// holds data (the open and staging pages, the free-page reserve's floor,
// retired pages, a whole page evicted at once) comes in whole pages, so
// smaller pages leave more of a middle budget to live entries
// (docs/memory_bench.md, "Smaller pages at middle budgets"). Values too
// large for an eighth of a page are stored in chunks (chunked_value.h), so
// max_value_bytes plays no part.
#ifndef FURRBALLS_ENGINE_FURRBALL_MEMORY_PLAN_H_
#define FURRBALLS_ENGINE_FURRBALL_MEMORY_PLAN_H_

#include <cstdint>
#include <string>

#include <absl/status/statusor.h>

#include "engine/furrball/options.h"

namespace furrballs {

// The key write locks of a node (NodeShard::KeyLockFor): a power of two
// between these, one per 16 key slots the node starts with. A lock only
// serializes writers of keys that share it, so its count follows the
// writers there can be at once, not the keys; 1024 locks (64 KiB) were 1.6%
// of a 4 MiB budget (docs/memory_bench.md, "Small budgets at 80%").
inline constexpr uint32_t kMinKeyLocks = 64;
inline constexpr uint32_t kMaxKeyLocks = 1024;
// One key lock: a ParkingLock alone on its cache line.
inline constexpr uint64_t kKeyLockBytes = 64;
// Upper bounds of two of a shard's fixed structures the plan cannot size
// itself (node_shard.cc holds them to these with static_asserts): the
// NodeShard object, and its cold-key window (spill_cold_pages only).
inline constexpr uint64_t kShardObjectBytes = uint64_t{6} << 10;
inline constexpr uint64_t kColdWindowBytes = uint64_t{20} << 10;

// One node's share of the budget. Every node gets the same plan.
struct MemoryPlan {
  uint64_t node_budget_bytes = 0;
  uint32_t page_size = 0;
  uint32_t page_count = 0;          // mapped; in service at the start
  uint32_t max_keys = 0;            // key slots at the start (ARC's c)
  // The most key slots the node may grow to: what CMap, ARC and KeyMeta
  // can index, and no more than the share holds at the smallest entry with
  // the fewest pages. max_keys when the key count was given
  // (FurrBallOptions::max_keys_per_node): no growth.
  uint32_t key_ceiling = 0;
  uint64_t key_table_bytes = 0;     // CMap, at max_keys
  uint64_t arc_bytes = 0;           // ARC arena + index, at max_keys
  uint64_t fixed_bytes = 0;         // key locks, page metadata, queue, ...
                                    // and the location cache's slice
  uint32_t key_locks = kMaxKeyLocks;  // KeyLocksFor(max_keys)
  // This node's slice of the location cache (location_cache.h; part of
  // fixed_bytes): round-robin and thread-local routing with
  // FurrBallOptions::location_cache, else 0.
  uint64_t location_cache_bytes = 0;
  uint64_t spill_buffer_bytes = 0;  // RocksDB memtables (spill tier only)

  uint64_t value_bytes() const { return uint64_t{page_count} * page_size; }
  uint64_t metadata_bytes() const {
    return key_table_bytes + arc_bytes + fixed_bytes;
  }
  uint64_t total_bytes() const {
    return value_bytes() + metadata_bytes() + spill_buffer_bytes;
  }
  // Metadata per key slot (key table and ARC), the figure compared with
  // other caches' per-key overhead.
  double metadata_bytes_per_key() const {
    return max_keys == 0 ? 0.0
                         : static_cast<double>(key_table_bytes + arc_bytes) /
                               max_keys;
  }
  // One line for a start-up log.
  std::string Summary() const;
};

// The plan for `options` on `node_count` nodes, or InvalidArgument naming
// what does not fit (a budget too small for the minimum number of pages).
absl::StatusOr<MemoryPlan> PlanMemory(const FurrBallOptions& options,
                                      int node_count);

// The key locks of a node that starts with `keys` key slots (kMinKeyLocks
// above).
uint32_t KeyLocksFor(uint64_t keys);

// Bytes the key table (CMap and ARC's state) maps for `keys` slots, and
// what it holds in memory at the worst moment of a growth from `from` to
// `to` slots: the new table whole and a quarter of the old one (below).
uint64_t KeyTableBytes(uint64_t keys);
uint64_t KeyTableGrowthPeakBytes(uint64_t from, uint64_t to);

// What the key tables a node's growths left behind still hold: a grown
// table's old one stays mapped for readers that may still probe it
// (resizable_cmap.h, "Released tables"), its whole pages given back, but
// the partial last page of each of its two arrays stays (RawAllocator::
// ReleaseMappedPages keeps a page it cannot prove is the range's alone):
// two OS pages for each of `retired_tables`. (Found when the plan stopped
// over-counting the fixed structures: at 64 MiB with 64-byte values a
// growth chose a table that left 48 bytes of the share, which the three
// retired tables' partial pages did not fit in, and the page that should
// have come back after the growth never did: 18 pages in service instead
// of 19.)
uint64_t RetiredKeyTableBytes(uint32_t retired_tables);

// The fewest pages a node on `plan` must have out of service while its key
// table maps `key_table_bytes` (KeyTableBytes, or the growth peak), so that
// the share holds; more than page_count if it cannot.
uint32_t RetiredPagesFor(const MemoryPlan& plan, uint64_t key_table_bytes);

// What a node's entries take: `pages` pages in service that are not free
// hold its `keys` resident keys.
struct EntryPages {
  uint32_t pages = 0;
  uint64_t keys = 0;
};

// The capacity a node whose key table holds `keys` slots grows to: the
// largest in [keys + keys / 16, min(2 * keys, key_ceiling)] whose finished
// table leaves, beside `keep_free` free pages, the pages that as many keys
// take at the pages per key `entries` shows; and whose growth peak leaves
// at least PagePool::kMinPages in service. `keys` itself when there is
// none (a sixteenth more keys is the least worth a migration). The
// peak's pages come from the free ones first, then from entries evicted
// to free them (NodeShard::RetirePages): keys the full table was evicting
// anyway, for a table that holds more of them for good once the growth
// gives the pages it no longer needs back. With entries.keys = 0 the
// entries take no pages: the most the share allows.
// `retired_tables`: the tables earlier growths left (RetiredKeyTableBytes);
// the growth adds one.
uint32_t GrowthTarget(const MemoryPlan& plan, uint32_t keys,
                      const EntryPages& entries, uint32_t keep_free,
                      uint32_t retired_tables = 0);

// What a node's worker sees of its key table and pages when it decides.
struct KeyTableLoad {
  uint32_t capacity = 0;          // ARC's c now
  uint64_t resident_keys = 0;     // keys ARC holds
  bool evicted_for_keys = false;  // ARC evicted by key count since the last look
  // Entries were evicted for page room since the last look.
  bool evicted_for_pages = false;
  uint32_t free_pages = 0;
  uint32_t retired_pages = 0;
  uint32_t retired_tables = 0;    // growths so far (RetiredKeyTableBytes)
};

// The growth rule, looked at once a maintenance pass: a key table that is
// full (ARC holds its c keys, give or take a sixteenth, and evicted by key
// count since the last look) grows to GrowthTarget, the pages in service
// that are not free telling what a key's entry takes, `keep_free` being
// the free pages the worker keeps for writers. It grows while a larger
// table would leave pages for its keys, i.e. towards the split of the
// share between key table and pages that holds the most keys of the
// entry size seen: a full table with pages to spare means keys are being
// evicted that the pages had room for. (Until 2026-11-24 the rule was
// "more than an eighth of the pages free, and the growth's peak paid with
// free pages only": at 64 MiB with 64-byte values the table stopped at
// 230,400 keys with 5 of its 20 pages free, 2 more than the worker keeps,
// while the smallest next growth's peak needed 5.) Returns the capacity
// to grow to, or load.capacity for none.
uint32_t KeyTableGrowthTo(const MemoryPlan& plan, const KeyTableLoad& load,
                          uint32_t keep_free);

// The shrink rule (issue 13 goal 1: the key table gives its memory back
// when the values grow), looked at as the growth rule is: a table that is
// far from full (fewer than c / 2 keys resident) while pages, not keys,
// run out (entries evicted for page room since the last look, none by key
// count) shrinks to the split GrowthTarget aims at for the entry size seen
// now: the largest capacity whose table leaves, beside `keep_free` free
// pages, the pages that as many keys take at the pages per key the
// resident keys show. Never below the resident keys plus an eighth, nor
// below plan.max_keys (the table a node starts with); and only if that is
// at most three quarters of c (a smaller saving is not worth a
// migration). Returns the capacity to shrink to, or load.capacity for
// none.
//
// Why it cannot oscillate with the growth rule: both aim at one split for
// one entry size. A growth needs a full table (resident >= 15/16 c,
// evicting by key count) and a split at least c + c/16 away; a shrink
// needs a half-empty table evicting for pages, and a split at most 3/4 c
// away. With the entry size unchanged, a growth's target t fits its pages
// (GrowthTarget), so the shrink's split is at least t (no shrink follows);
// a shrink ends at most 8/9 full (the margin), below the growth's 15/16,
// and at the split, where a growth's least step (c + c/16) no longer fits
// the pages those keys need. Only a change of entry size between the two
// moves the split, and then moving with it is the point.
uint32_t KeyTableShrinkTo(const MemoryPlan& plan, const KeyTableLoad& load,
                          uint32_t keep_free);

// The free pages a node's worker keeps ahead of its writers
// (NodeShard::RefillTarget), for `pages_in_service` pages: the relocation
// reserve plus one (plus two with cold pages, so that the refill starts
// while a COLD page can still be opened beyond the reserve), and 1/128 of
// the pages in service on a node of more than 256 pages. A free page holds
// no data and, once written, stays in the RSS: at 64 MiB (232 pages of
// 256 KiB) the 1/32 kept until 2026-11-25 was 7 pages, 2.7% of the budget,
// and the server's fill ended with all 7 free (its worker keeps up with a
// fill over gRPC): 2 held 2.0-2.6% more keys of 1 KiB (docs/memory_bench.md,
// "Every byte of the budget at 1 KiB"). A writer that finds no free page
// frees one itself (the oldest of the sparsest pages), so the reserve is
// about where evictions come from, not whether a write succeeds; 4 and
// 8 MiB nodes kept 2 before as well.
uint32_t FreePageReserve(uint32_t pages_in_service, bool cold_pages);

// The smallest memory_budget_bytes for which PlanMemory gives each of
// `node_count` nodes `pages_per_node` pages, for tests that need an exact
// page count. REQUIRES: options.page_size_bytes and max_keys_per_node set.
uint64_t MemoryBudgetForPages(const FurrBallOptions& options, int node_count,
                              uint32_t pages_per_node);

// The spill store's memtable size for one node's plan (two per node).
uint64_t SpillWriteBufferBytes(const MemoryPlan& plan);

}  // namespace furrballs

#endif  // FURRBALLS_ENGINE_FURRBALL_MEMORY_PLAN_H_
