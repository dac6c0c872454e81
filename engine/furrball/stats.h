// engine/furrball/stats.h: per-node statistics snapshots (report §3.7).
//
// Thread safety: NodeStatsSnapshot is a plain value.
//
// Counters live in node-allocated blocks, one cache line per writer shard,
// written without contended atomics on the request path; a snapshot sums the
// shards at read time. Metrics code reads only snapshots.
#ifndef FURRBALLS_ENGINE_FURRBALL_STATS_H_
#define FURRBALLS_ENGINE_FURRBALL_STATS_H_

#include <cstdint>

namespace furrballs {

struct NodeStatsSnapshot {
  int node = 0;

  // Requests.
  uint64_t hits_local = 0;    // served by a thread on the key's node
  uint64_t hits_remote = 0;   // served to a thread on another node
  uint64_t misses = 0;
  uint64_t sets = 0;
  uint64_t in_place_sets = 0;  // overwrites that reused the entry (§2.8.5)
  uint64_t staging_sets = 0;   // writes that overflowed to staging (§2.10.2)
  uint64_t deletes = 0;
  uint64_t touches = 0;
  uint64_t ttl_expirations = 0;

  // Evictions by reason.
  uint64_t evictions_capacity = 0;  // ARC chose a victim for room
  uint64_t evictions_keys = 0;      // the key table was full
  // Whole pages whose keys a writer evicted because it found no room at all
  // (their keys are counted in evictions_capacity too).
  uint64_t page_evictions = 0;

  // Memory.
  uint64_t live_keys = 0;
  uint64_t live_bytes = 0;      // payload bytes of live entries (key and
                                // value: entry.h)
  uint64_t dead_bytes = 0;      // bytes of overwritten/evicted entries not yet reclaimed
  uint64_t memory_limit_bytes = 0;  // bytes of the value pages in service
  uint64_t pages_hot = 0;
  uint64_t pages_cold = 0;
  uint64_t pages_empty = 0;
  uint64_t pages_freeze = 0;
  uint64_t pages_staging = 0;
  uint64_t staging_used_bytes = 0;
  // Value pages out of service, their memory given back: they pay for a key
  // table larger than the one the node started with (docs/engine.md,
  // "Memory bound").
  uint64_t pages_retired = 0;
  // Keys the node's key table (ARC's c) holds at most now, and how many
  // times it grew, and shrank (when its entries became larger).
  uint64_t key_table_capacity = 0;
  uint64_t key_table_growths = 0;
  uint64_t key_table_shrinks = 0;
  // Cumulative bytes lost to 8-byte entry alignment and to page tails left
  // unused when a page was sealed (the report's DataWastedByPadding).
  uint64_t padding_bytes = 0;

  // Background work.
  uint64_t relocations = 0;       // entries moved by staging relocation/drain
  uint64_t pages_drained = 0;
  uint64_t pages_recycled = 0;  // by drain, eviction or because all died
  uint64_t promote_drops = 0;     // PromoteBuf overflow
  // Rounds in which a writer with no room waited for another thread's
  // operation in flight to release a page (NodeShard::Reserve).
  uint64_t reclaim_waits = 0;

  // Spill tier (all 0 when it is off; docs/spill.md).
  uint64_t spill_pages_written = 0;
  uint64_t spill_bytes_written = 0;
  uint64_t spill_keys_written = 0;   // keys that left memory for disk
  uint64_t spill_reloads = 0;        // pages read back on ghost hits
  uint64_t spill_reloaded_keys = 0;
  uint64_t spill_ghost_hits = 0;     // Gets answered after a reload
  uint64_t spill_errors = 0;         // failed writes, failed/corrupt reads
  uint64_t spill_keys_indexed = 0;   // keys whose only copy is on disk now
  uint64_t spill_disk_bytes = 0;     // this node's blob bytes on disk now

  // Cold pages (FurrBallOptions::spill_cold_pages; all 0 when off).
  uint64_t cold_keys_marked = 0;      // ARC's coldest keys queued to move
  uint64_t cold_migrations = 0;       // moved to COLD pages, by anyone
  uint64_t cold_migrations_cooperative = 0;  // ... of which by Sets
  uint64_t cold_pages_spilled = 0;    // COLD pages spilled/evicted whole
  uint64_t cold_fallbacks = 0;        // refills that used ForceEvictOne

  // Keys following their readers (FurrBallOptions::migrate_to_readers; all
  // 0 when off): keys moved to this node because its threads read them, and
  // keys moved away from it to the node that reads them.
  uint64_t migrations_in = 0;
  uint64_t migrations_out = 0;
  // Finding a key whose node the routing does not say (round-robin and
  // thread-local routing; all 0 under hash routing; key_locator.h). Per
  // Get (chunk reads included), on the requesting thread's node.
  uint64_t location_hits = 0;    // the location cache named the key's node
  uint64_t location_misses = 0;  // it named no node
  uint64_t location_stale = 0;   // the node it named did not hold the key
  uint64_t races = 0;            // broadcast-race searches run
  uint64_t race_wins = 0;        // races this node's probe won (a hit here)
  uint64_t race_fallbacks = 0;   // races in which a worker refused the
                                 // probe (queue full or closing) and the
                                 // caller probed that node itself
};

}  // namespace furrballs

#endif  // FURRBALLS_ENGINE_FURRBALL_STATS_H_
