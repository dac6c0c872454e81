// engine/furrball/options.h: how a FurrBall cache is configured.
//
// Thread safety: plain value (the clock it may point to must be thread-safe).
#ifndef FURRBALLS_ENGINE_FURRBALL_OPTIONS_H_
#define FURRBALLS_ENGINE_FURRBALL_OPTIONS_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <absl/status/status.h>

#include "engine/common/hash_pair.h"
#include "engine/furrball/clock.h"

namespace rocksdb {
class Env;
}  // namespace rocksdb

namespace furrballs {

// Where a new key is placed (report §2.3, §3.3).
enum class RoutingPolicy : uint8_t {
  // The owner is a function of the key's hash: every operation knows its node
  // without searching, and a per-node worker owns its shard outright. Default.
  kHash = 0,
  // Keys are spread over nodes in turn; Get searches the shards.
  kRoundRobin = 1,
  // A key lands on the writing thread's node (maximal read-after-write
  // locality); Get searches the shards, local node first.
  kThreadLocal = 2,
};

// How a Get finds a key whose node the routing does not say (round-robin,
// thread-local; report §8 Phase 4 §4.1). Hash routing ignores it.
enum class LocatePolicy : uint8_t {
  // Probe the shards one after another, the requester's node first.
  kScan = 0,
  // The broadcast race: every node's worker probes its own shard at once,
  // the first hit wins, the caller sleeps until all answered
  // (broadcast_get.h). A caller that is itself a node worker scans.
  kRace = 1,
  // Per call, the race only while its measured latency saving exceeds what
  // its losing probes cost (the report's waste model, key_locator.h); else
  // the scan.
  kAuto = 2,
};

struct FurrBallOptions {
  // Everything the cache maps over all nodes, split evenly between nodes:
  // value pages, key table, ARC state, the shards' fixed structures and the
  // spill tier's write buffers (memory_plan.h). Pages are mapped at start-up
  // but enter the RSS only when used.
  size_t memory_budget_bytes = size_t{256} << 20;

  // Size of one page, the unit of placement, compaction and spilling: 0 =
  // chosen from the budget (256 pages a node, of up to 2 MiB and at least
  // 64 KiB: memory_plan.h); else a power of two between 64 KiB and 32 MiB
  // (the largest page an entry's header word can describe: page_pool.h).
  // Any max_value_bytes works with any page size: values larger than an
  // eighth of a page are stored in chunks (chunked_value.h).
  size_t page_size_bytes = 0;

  // Number of nodes to run on. 0 = every node the process may use (real
  // topology). N > 0 with simulate_topology = true splits the allowed CPUs
  // into N virtual nodes, so multi-node paths run on a one-node machine.
  int node_count = 0;
  bool simulate_topology = false;
  // With simulate_topology: the virtual nodes' ids, ascending, node_count of
  // them (empty: 0..node_count-1). {1} runs the cache as a process pinned to
  // node 1 of a two-node machine would: one node, whose id is not its index.
  std::vector<int> simulated_node_ids;
  // Busy-wait injected on every simulated remote access (report §5.1).
  uint32_t simulated_remote_delay_ns = 0;

  // Where new keys go and how Get finds them (see RoutingPolicy).
  RoutingPolicy routing = RoutingPolicy::kHash;
  // Keys follow their readers (report §2.9.4, SimpleMigratePolicy): a key
  // read mostly from another node than its own moves there
  // (engine/furrball/key_mover.h). Only with kRoundRobin or kThreadLocal,
  // and not with the spill tier. Off by default: docs/engine.md ("Keys
  // follow their readers") has the measurement it has to beat.
  bool migrate_to_readers = false;

  // With round-robin or thread-local routing: how a Get looks for a key
  // the location cache does not name (or names wrongly).
  LocatePolicy locate = LocatePolicy::kAuto;
  // With round-robin or thread-local routing: a hint of which node holds
  // each key (location_cache.h), filled by writes and by discoveries, two
  // to four bytes per key slot the node starts with, inside the memory
  // budget. A wrong hint costs one probe; an answer never depends on it.
  bool location_cache = true;

  // Limits on what a client may store. Anything over a limit is rejected with
  // kKeyTooLarge / kValueTooLarge, never truncated. Keys: at most 16,383
  // bytes (entry.h).
  size_t max_key_bytes = 250;
  size_t max_value_bytes = size_t{1} << 20;

  // Key slots per node (the hash table's and ARC's capacity). 0 = derived
  // from the budget: a node starts with as many as fit with their metadata
  // when every entry is expected_entry_bytes, and grows them, paid with
  // value pages, when its entries turn out smaller (memory_plan.h). A count
  // given here is fixed.
  size_t max_keys_per_node = 0;

  // The key + value size the starting key table is planned for: where it
  // starts, not a limit. 1 KiB because a table shrinks no further than
  // where it starts: larger entries fill the pages first and leave at most
  // the table's ~8% of the budget partly unused (90 B of metadata per
  // 1,122 B), and
  // smaller ones grow it (64-byte values: 3 growths). Measured at 64 MiB
  // against the 256 B this was: keys per MiB 0.52 -> 0.56x memcached's at
  // 64 B values, 0.60 -> 0.78x at 1 KiB; at 4 and 8 MiB 63-65% -> 78-81%
  // of the budget live (docs/memory_bench.md).
  size_t expected_entry_bytes = 1024;

  // When false, a write that needs space the cache does not have fails with
  // kNoMemory instead of evicting.
  bool eviction_enabled = true;

  // The keyed hash's secret; when absent, one derived from hash_seed (0 =
  // the fixed secret tests and benchmarks use). Identities differ between
  // secrets, so a restarted server must reuse its secret to find its spilled
  // pages again.
  std::optional<HashSecret> hash_secret;
  uint64_t hash_seed = 0;

  // Period of each node's maintenance pass (staging relocation, page drain,
  // free-page reserve refill, TTL reclamation, PromoteBuf drain) while the
  // node serves requests; an idle node's passes back off to 128 ms
  // (node_job.h).
  std::chrono::milliseconds maintenance_interval{2};

  // Pin each node's worker (maintenance and SubmitToNode jobs) to the node's
  // CPUs.
  bool pin_workers = true;

  // Capacity of each node's NodeJob queue (rounded up to a power of two);
  // SubmitToNode returns kQueueFull beyond it.
  size_t job_queue_capacity = 4096;

  // ---- Spill tier and restarts (docs/spill.md) ----------------------------

  // Directory of the spill store (RocksDB). Empty = no spill tier: a page
  // that must leave memory is dropped. Requires routing = kHash.
  std::string spill_dir;
  // Bytes of spilled pages kept on disk; beyond it the oldest pages are
  // removed (their keys then miss). 0 = no limit.
  uint64_t spill_disk_budget_bytes = uint64_t{1} << 30;
  // With spill_dir: destroying the cache after Close() writes every resident
  // page and the spill index, so that the next Open with the same directory
  // serves the same keys, values and versions (loaded back on first access).
  // False: Open discards what the directory holds and shutdown writes
  // nothing. After a crash the next Open is cold either way.
  bool warm_restart = true;
  // A ghost hit re-inserts only the key asked for (the others stay on disk)
  // or, when true, every key of the spilled page it read (the report's
  // speculative whole-page reload, §2.9.6). Key-only is the default: over 3
  // runs at 1x/3x/10x memory with Zipfian keys it served 3-5x fewer hits
  // from disk, at a tenth of the reload latency (docs/spill.md); whole pages
  // pay off only where keys spilled together are read together.
  bool spill_reload_whole_page = false;
  // The report's compactor (§2.9.1-§2.9.3) instead of the victim batch: when
  // memory runs short, ARC's coldest keys are moved (not evicted) to COLD
  // pages in memory, where Gets still hit them, by the worker and by every
  // 16th Set of a thread while cold keys are pending; a full COLD page is
  // then spilled whole (or, without spill_dir, evicted whole). False: ARC's
  // victims are copied into the in-memory spill batch and leave the key
  // table at once. docs/spill.md compares the two.
  bool spill_cold_pages = false;
  // Tests: the Env of the spill store's RocksDB (fault injection). nullptr =
  // the default.
  rocksdb::Env* spill_env = nullptr;

  // The monotonic clock TTLs are measured against; nullptr = SteadyClock.
  // Tests inject a ManualClock. Must outlive the cache.
  const Clock* clock = nullptr;
};

// Checks the options that do not depend on the topology (ranges, powers of
// two, limits that fit a page). Open() calls it and also checks that each
// node gets enough pages. InvalidArgument with a message naming the field.
absl::Status ValidateOptions(const FurrBallOptions& options);

}  // namespace furrballs

#endif  // FURRBALLS_ENGINE_FURRBALL_OPTIONS_H_
