// engine/furrball/node_stats.h: one node's request counters, sharded by
// writer (report §3.7).
//
// Thread safety: thread-safe. Add may be called from any thread; Sum reads
// every shard with relaxed loads and may run concurrently with Adds (each
// counter it returns is exact as of some instant, the counters are not read
// at one instant).
//
// The report's lesson (§3.7, revised): alignas(64) on a global counter
// prevents false sharing but makes every increment a cross-socket line
// transfer. So the counters live in the node's own memory, and each node's
// block is split into kShards shards of whole cache lines. A thread writes
// only the shard picked by its per-thread index, so unless more than kShards
// threads hit one node, every line has a single writer and the relaxed
// fetch_add never contends. Signed quantities (live keys and bytes, which
// one thread may raise and another lower) are kept as two's-complement
// deltas; the sum over shards is exact modulo 2^64.
#ifndef FURRBALLS_ENGINE_FURRBALL_NODE_STATS_H_
#define FURRBALLS_ENGINE_FURRBALL_NODE_STATS_H_

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory_resource>
#include <vector>

#include "engine/common/raw_allocator.h"

namespace furrballs {
namespace furrball_internal {

enum class Counter : uint8_t {
  kHitsLocal,
  kHitsRemote,
  kMisses,
  kSets,
  kInPlaceSets,
  kStagingSets,
  kDeletes,
  kTouches,
  kTtlExpirations,
  kEvictionsCapacity,
  kEvictionsKeys,
  kPageEvictions,
  kLiveKeys,   // delta
  kLiveBytes,  // delta: value bytes
  kPaddingBytes,
  kRelocations,
  kPagesDrained,
  kPagesRecycled,
  kReclaimWaits,
  kSpillPages,        // pages written to the spill store
  kSpillBytes,        // their blob bytes
  kSpilledKeys,       // keys that left memory for the spill store
  kSpillReloads,      // pages read back on a ghost hit
  kSpillReloadedKeys, // keys re-inserted by those reloads
  kGhostHits,         // Gets answered after a reload
  kSpillErrors,       // failed spill writes, failed or corrupt reloads
  kColdKeysMarked,    // ARC's coldest keys queued for migration
  kColdMigrations,    // ... moved to a COLD page (worker and cooperative)
  kColdMigrationsCooperative,  // ... of which by a Set
  kColdPagesSpilled,  // sealed COLD pages spilled (or evicted) whole
  kColdFallbacks,     // refills that fell back to ForceEvictOne
  kKeyTableGrowths,   // key table growths completed
  kKeyTableShrinks,   // key table shrinks completed
  kKeyTableFull,      // ARC evictions that made room for an insert, the
                      // victim dropped (kEvictionsKeys) or spilled
  kMigrationsIn,      // keys moved here because this node's threads read
                      // them (key_mover.h)
  kMigrationsOut,     // keys moved away to the node that reads them
  // Finding a key under round-robin / thread-local routing (key_locator.h),
  // counted on the requester's node unless said otherwise.
  kLocationHits,      // the location cache's hint was right
  kLocationMisses,    // it had no hint for the key
  kLocationStale,     // its hint's node did not hold the key
  kRaces,             // broadcast races run
  kRaceWins,          // races won, counted on the winning node
  kRaceFallbacks,     // races in which a worker refused the probe
  kCount,
};

inline constexpr size_t kCounterCount = static_cast<size_t>(Counter::kCount);

// One writer's counters: whole cache lines, never shared with another shard.
struct alignas(kCacheLineSize) StatShard {
  std::array<std::atomic<uint64_t>, kCounterCount> counters{};
};
static_assert(sizeof(StatShard) % kCacheLineSize == 0,
              "a shard must own whole cache lines so that two writers never "
              "share one");

// The calling thread's shard index, assigned once per thread round-robin so
// that up to kShards concurrently active threads get distinct shards.
size_t ThisThreadStatShard();

class NodeStats {
 public:
  static constexpr size_t kShards = 16;
  // What the counters allocate (MemoryPlan counts it in the budget).
  static constexpr size_t kBytes = kShards * sizeof(StatShard);

  explicit NodeStats(std::pmr::memory_resource* resource)
      : shards_(kShards, resource) {}

  void Add(Counter c, uint64_t n = 1) {
    shards_[ThisThreadStatShard() % kShards]
        .counters[static_cast<size_t>(c)]
        .fetch_add(n, std::memory_order_relaxed);
  }
  // Adds a signed delta (wraps; the sum over shards is exact).
  void AddSigned(Counter c, int64_t n) { Add(c, static_cast<uint64_t>(n)); }

  uint64_t Sum(Counter c) const {
    uint64_t total = 0;
    for (const StatShard& s : shards_) {
      total += s.counters[static_cast<size_t>(c)].load(
          std::memory_order_relaxed);
    }
    return total;
  }

  size_t memory_bytes() const { return shards_.capacity() * sizeof(StatShard); }

 private:
  std::pmr::vector<StatShard> shards_;
};

}  // namespace furrball_internal
}  // namespace furrballs

#endif  // FURRBALLS_ENGINE_FURRBALL_NODE_STATS_H_
