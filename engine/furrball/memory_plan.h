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
// where the key table (CMap of KeyMeta) and ARC (arena and index, 2c keys
// tracked for c cached) are sized by their own BytesFor functions, so the
// plan and the allocation cannot drift apart. The number of key slots c is
// the largest one for which c keys of expected_entry_bytes each, with their
// metadata, fit the share: a hint, not a limit on what a key or value may
// be. A workload of smaller entries fills the key table before the pages
// (ARC then evicts by key count), one of larger entries fills the pages
// first; either way the budget holds. Memory is mapped, not touched, at
// start-up (numatic.h), so the RSS is at most the budget and follows data.
//
// The page size, when not set, follows the budget alone: 2 MiB while a
// node gets 32 such pages, else the largest power of two that gives it 64
// (room for the reclaimer to compact), but never smaller than
// kMinPageSize. Values
// too large for an eighth of a page are stored in chunks (chunked_value.h),
// so max_value_bytes plays no part.
#ifndef FURRBALLS_ENGINE_FURRBALL_MEMORY_PLAN_H_
#define FURRBALLS_ENGINE_FURRBALL_MEMORY_PLAN_H_

#include <cstdint>
#include <string>

#include <absl/status/statusor.h>

#include "engine/furrball/options.h"

namespace furrballs {

// One node's share of the budget. Every node gets the same plan.
struct MemoryPlan {
  uint64_t node_budget_bytes = 0;
  uint32_t page_size = 0;
  uint32_t page_count = 0;
  uint32_t max_keys = 0;            // key slots (ARC's c)
  uint64_t key_table_bytes = 0;     // CMap
  uint64_t arc_bytes = 0;           // ARC arena + index
  uint64_t fixed_bytes = 0;         // key locks, page metadata, queue, ...
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

// The smallest memory_budget_bytes for which PlanMemory gives each of
// `node_count` nodes `pages_per_node` pages, for tests that need an exact
// page count. REQUIRES: options.page_size_bytes and max_keys_per_node set.
uint64_t MemoryBudgetForPages(const FurrBallOptions& options, int node_count,
                              uint32_t pages_per_node);

// The spill store's memtable size for one node's plan (two per node).
uint64_t SpillWriteBufferBytes(const MemoryPlan& plan);

}  // namespace furrballs

#endif  // FURRBALLS_ENGINE_FURRBALL_MEMORY_PLAN_H_
