// engine/furrball/node_shard.cc: NodeShard's construction on its node, the
// statistics snapshot, the page-accounting check for tests, and the engine's
// test hooks. The protocols are at the top of node_shard.h; the rest of
// NodeShard lives by job in node_shard_requests.cc (Get/Set/Delete/Touch),
// node_shard_victims.cc (evictions and the accounting of removed entries),
// node_shard_reclaim.cc (space: everything under the reclaim mutex),
// node_shard_cold.cc (the cold-page compactor) and node_shard_spill.cc (the
// spill tier).
#include "engine/furrball/node_shard.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cassert>
#include <memory>
#include <new>
#include <string>
#include <utility>

#include <absl/strings/str_cat.h>

#include "engine/furrball/entry.h"
#include "engine/furrball/furrball_testing.h"
#include "engine/furrball/node_shard_internal.h"
#include "engine/numatic/error_status.h"
#include "engine/spill/spill_store.h"

namespace furrballs {
namespace furrball_internal {
namespace {

std::atomic<const EngineTestHooks*> g_test_hooks{nullptr};

}  // namespace

const EngineTestHooks* TestHooks() {
  return g_test_hooks.load(std::memory_order_acquire);
}

// ---- Construction ----------------------------------------------------------

absl::StatusOr<std::unique_ptr<NodeShard, void (*)(NodeShard*)>>
NodeShard::Create(const ShardConfig& config, const Numatic* numatic) {
  using Ptr = std::unique_ptr<NodeShard, void (*)(NodeShard*)>;
  absl::StatusOr<NumaNodeMemoryResource*> resource =
      numatic->NodeResource(config.node);
  if (!resource.ok()) return resource.status();
  // The key table and ARC's arrays are read at random too, and used
  // densely: the table and ARC's index are hash tables sized for the keys
  // held (the table grows with them), and ARC's arena is handed out from
  // its start, so a huge page one key brings in is soon shared by others.
  // An array below one huge page stays base pages.
  absl::StatusOr<RawAllocator> allocator =
      numatic->NodeAllocator(config.node, PageKind::kTransparentHuge);
  if (!allocator.ok()) return allocator.status();

  // The memory plan keeps both within what a KeyMeta can name (key_meta.h)
  // and an entry header can describe (kMaxPageSize, page_pool.h); a shard
  // built from another config must not truncate an index or a header.
  if (config.page_count > kMaxPagesPerNode ||
      config.page_size > kMaxPageSize) {
    return ErrorStatus(Error::kInvalidArgument,
                       absl::StrCat("node ", config.node, ": ",
                                    config.page_count, " pages of ",
                                    config.page_size,
                                    " bytes; a node has at most ",
                                    kMaxPagesPerNode, " pages of at most ",
                                    kMaxPageSize, " bytes"));
  }
  const size_t block_bytes = size_t{config.page_count} * config.page_size;
  // Value pages are read at random, so huge pages save TLB misses
  // (numatic.h, "Transparent huge pages"); but only when a value page is a
  // whole number of huge pages, so that retiring one (PagePool::RetirePages)
  // gives back whole huge pages and the first write into a page brings in
  // no more than the page.
  const bool huge_pages = config.page_size % GetHugePageSize() == 0;
  absl::StatusOr<NumaBlock> block =
      huge_pages ? numatic->AllocateOnNodeTransparentHuge(block_bytes,
                                                          config.node)
                 : numatic->AllocateOnNode(block_bytes, config.node);
  if (!block.ok()) {
    return ErrorStatus(ErrorOf(block.status()),
                       absl::StrCat("node ", config.node, ": value pages (",
                                    block_bytes, " bytes): ",
                                    block.status().message()));
  }

  void* memory = (*resource)->AllocateOrNull(sizeof(NodeShard),
                                             alignof(NodeShard));
  if (memory == nullptr) {
    numatic->Free(*block);
    return ErrorStatus(Error::kAllocationFailed,
                       absl::StrCat("node ", config.node,
                                    ": shard metadata (", sizeof(NodeShard),
                                    " bytes)"));
  }
  // The constructor's PMR containers throw std::bad_alloc when the node
  // refuses memory; turn that into the same all-or-nothing error.
  NodeShard* shard = nullptr;
  try {
    shard = new (memory) NodeShard(config, numatic, *resource, *block);
  } catch (const std::bad_alloc&) {
    (*resource)->DeallocateBytes(memory, sizeof(NodeShard));
    numatic->Free(*block);
    return ErrorStatus(Error::kAllocationFailed,
                       absl::StrCat("node ", config.node,
                                    ": page metadata or key locks"));
  }
  Ptr owned(shard, &NodeShard::Destroy);

  ConcurrentArcOptions<KeyMeta> arc_options;
  arc_options.capacity = config.max_keys;
  arc_options.allocator = *allocator;
  arc_options.on_evict = [shard](const HashPair& h, const KeyMeta& m) {
    shard->OnEvict(h, m);
  };
  absl::StatusOr<std::unique_ptr<Arc>> arc = Arc::Create(arc_options);
  if (!arc.ok()) {
    return ErrorStatus(ErrorOf(arc.status()),
                       absl::StrCat("node ", config.node, ": key table for ",
                                    config.max_keys, " keys: ",
                                    arc.status().message()));
  }
  shard->arc_ = *std::move(arc);
  return owned;
}

NodeShard::NodeShard(const ShardConfig& config, const Numatic* numatic,
                     NumaNodeMemoryResource* resource, NumaBlock block)
    : config_(config),
      numatic_(numatic),
      resource_(resource),
      block_(block),
      pool_(static_cast<uint8_t*>(block.data), config.page_count,
            config.page_size, resource, config.spill_cold_pages),
      stats_(resource),
      key_locks_(config.memory_plan.key_locks, resource),
      key_lock_mask_(config.memory_plan.key_locks - 1),
      cold_keys_(resource) {
  assert(std::has_single_bit(config.memory_plan.key_locks));
  // The plan counts these in the budget (memory_plan.h).
  static_assert(sizeof(NodeShard) <= kShardObjectBytes,
                "the memory plan counts the shard object as kShardObjectBytes");
  static_assert(sizeof(KeyLock) == kKeyLockBytes,
                "the memory plan counts each key lock as kKeyLockBytes");
  static_assert(kColdWindow * sizeof(ColdKey) <= kColdWindowBytes,
                "the memory plan counts the cold-key window as "
                "kColdWindowBytes");
  if (config.spill_cold_pages) {
    // Sized once: marking allocates nothing afterwards.
    MutexLock l(&reclaim_mu_);
    cold_keys_.reserve(kColdWindow);
    coldest_scratch_.reserve(kColdWindow);
  }
  next_version_.value.store(1, std::memory_order_relaxed);
  if (config.spill_store != nullptr) {
    spill_index_ = std::make_unique<SpillIndex>();
    spill_writer_ = std::thread([this] { RunSpillWriter(); });
  }
}

NodeShard::~NodeShard() {
  if (spill_writer_.joinable()) {
    {
      MutexLock l(&batch_mu_);
      writer_stop_ = true;
    }
    batch_cv_.SignalAll();
    spill_writer_.join();
  }
  arc_.reset();
  numatic_->Free(block_);
}

void NodeShard::Destroy(NodeShard* shard) {
  NumaNodeMemoryResource* resource = shard->resource_;
  shard->~NodeShard();
  resource->DeallocateBytes(shard, sizeof(NodeShard));
}

// ---- Introspection -----------------------------------------------------------

std::string NodeShard::CheckPageAccountingForTesting() const {
  std::string bad;
  uint64_t pointed = 0;
  for (uint32_t page = 0; page < config_.page_count; ++page) {
    const Page& p = pool_.page(page);
    const uint64_t state = p.state.load(std::memory_order_acquire);
    if (PageState::Pending(state) != 0) {
      absl::StrAppend(&bad, "page ", page, " has writes in flight; ");
      continue;
    }
    const uint32_t generation = p.generation.load(std::memory_order_relaxed);
    uint64_t bytes = 0, entries = 0;
    std::string key;
    pool_.ForEachEntry(page, state, [&](uint32_t offset,
                                        const EntryHeader& header) {
      if (header.capacity == 0) {
        absl::StrAppend(&bad, "page ", page, " offset ", offset,
                        ": zero-capacity entry; ");
        return false;
      }
      const std::optional<HashPair> h = StoredHash(page, offset, header, &key);
      if (!h.has_value()) return true;  // an abandoned reservation
      const std::optional<KeyMeta> m = arc_->Peek(*h);
      if (m.has_value() && PointsAt(*m, page, offset, generation)) {
        bytes += header.capacity;
        ++entries;
      }
      return true;
    });
    const uint64_t live = p.live.load(std::memory_order_acquire);
    if ((live & 0xffffffffull) != bytes || (live >> 32) != entries) {
      absl::StrAppend(&bad, "page ", page, " (tier ",
                      static_cast<int>(PageState::Tier(state)),
                      "): live word says ", live & 0xffffffffull, " bytes in ",
                      live >> 32, " entries, its entries ", bytes, " in ",
                      entries, "; ");
    }
    pointed += entries;
  }
  if (pointed != arc_->size()) {
    absl::StrAppend(&bad, arc_->size(), " keys resident but ", pointed,
                    " entries pointed at; ");
  }
  return bad;
}

// ---- Introspection -----------------------------------------------------------

NodeStatsSnapshot NodeShard::Snapshot() const {
  NodeStatsSnapshot s;
  s.node = config_.node;
  s.hits_local = stats_.Sum(Counter::kHitsLocal);
  s.hits_remote = stats_.Sum(Counter::kHitsRemote);
  s.misses = stats_.Sum(Counter::kMisses);
  s.sets = stats_.Sum(Counter::kSets);
  s.in_place_sets = stats_.Sum(Counter::kInPlaceSets);
  s.staging_sets = stats_.Sum(Counter::kStagingSets);
  s.deletes = stats_.Sum(Counter::kDeletes);
  s.touches = stats_.Sum(Counter::kTouches);
  s.ttl_expirations = stats_.Sum(Counter::kTtlExpirations);
  s.evictions_capacity = stats_.Sum(Counter::kEvictionsCapacity);
  s.evictions_keys = stats_.Sum(Counter::kEvictionsKeys);
  s.page_evictions = stats_.Sum(Counter::kPageEvictions);
  // Deltas summed over shards; a snapshot taken mid-update can be a few
  // counts off in either direction, never negative in the output.
  s.live_keys = static_cast<uint64_t>(
      std::max<int64_t>(0, static_cast<int64_t>(stats_.Sum(Counter::kLiveKeys))));
  s.live_bytes = static_cast<uint64_t>(std::max<int64_t>(
      0, static_cast<int64_t>(stats_.Sum(Counter::kLiveBytes))));
  const PoolCensus census = pool_.Census();
  s.dead_bytes = census.used_bytes > census.live_bytes
                     ? census.used_bytes - census.live_bytes
                     : 0;
  s.memory_limit_bytes = page_bytes_in_service();
  s.pages_retired = census.pages_retired;
  s.key_table_capacity = arc_->capacity();
  s.key_table_growths = stats_.Sum(Counter::kKeyTableGrowths);
  s.key_table_shrinks = stats_.Sum(Counter::kKeyTableShrinks);
  s.pages_hot = census.pages_hot;
  s.pages_cold = census.pages_cold;
  s.pages_empty = census.pages_empty;
  s.pages_freeze = census.pages_freeze;
  s.pages_staging = census.pages_staging;
  s.staging_used_bytes = census.staging_used_bytes;
  s.padding_bytes = stats_.Sum(Counter::kPaddingBytes);
  s.relocations = stats_.Sum(Counter::kRelocations);
  s.pages_drained = stats_.Sum(Counter::kPagesDrained);
  s.pages_recycled = stats_.Sum(Counter::kPagesRecycled);
  s.promote_drops = arc_->stats().promotions_dropped;
  s.reclaim_waits = stats_.Sum(Counter::kReclaimWaits);
  s.spill_pages_written = stats_.Sum(Counter::kSpillPages);
  s.spill_bytes_written = stats_.Sum(Counter::kSpillBytes);
  s.spill_keys_written = stats_.Sum(Counter::kSpilledKeys);
  s.spill_reloads = stats_.Sum(Counter::kSpillReloads);
  s.spill_reloaded_keys = stats_.Sum(Counter::kSpillReloadedKeys);
  s.spill_ghost_hits = stats_.Sum(Counter::kGhostHits);
  s.spill_errors = stats_.Sum(Counter::kSpillErrors);
  s.cold_keys_marked = stats_.Sum(Counter::kColdKeysMarked);
  s.cold_migrations = stats_.Sum(Counter::kColdMigrations);
  s.cold_migrations_cooperative =
      stats_.Sum(Counter::kColdMigrationsCooperative);
  s.cold_pages_spilled = stats_.Sum(Counter::kColdPagesSpilled);
  s.cold_fallbacks = stats_.Sum(Counter::kColdFallbacks);
  s.migrations_in = stats_.Sum(Counter::kMigrationsIn);
  s.migrations_out = stats_.Sum(Counter::kMigrationsOut);
  s.location_hits = stats_.Sum(Counter::kLocationHits);
  s.location_misses = stats_.Sum(Counter::kLocationMisses);
  s.location_stale = stats_.Sum(Counter::kLocationStale);
  s.races = stats_.Sum(Counter::kRaces);
  s.race_wins = stats_.Sum(Counter::kRaceWins);
  s.race_fallbacks = stats_.Sum(Counter::kRaceFallbacks);
  if (spill_index_ != nullptr) {
    s.spill_keys_indexed = spill_index_->size();
    s.spill_disk_bytes =
        config_.spill_store->stats().node_bytes[config_.node_index];
  }
  return s;
}

}  // namespace furrball_internal

void SetEngineTestHooksForTesting(const EngineTestHooks* hooks) {
  furrball_internal::g_test_hooks.store(hooks, std::memory_order_release);
}

}  // namespace furrballs
