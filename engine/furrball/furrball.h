// engine/furrball/furrball.h: the FurrBall cache, the engine's public API.
//
// Thread safety: a FurrBall is safe for concurrent use from any number of
// threads without external synchronization. Each node's shard is additionally
// served by one pinned NodeJob worker that runs maintenance and any jobs
// submitted to it (SubmitToNode), so a caller can confine all work on a node
// to that node's worker (the service's default) or call the shard directly.
//
// A FurrBall keeps keys as 128-bit keyed hashes (never as strings) and values
// as bytes in pages allocated once, per NUMA node, at start-up. Callers that
// route by node hash a key once with Hash() and use the HashPair overloads.
// A miss is not an error: Get returns found = false with Error::kOk.
#ifndef FURRBALLS_ENGINE_FURRBALL_FURRBALL_H_
#define FURRBALLS_ENGINE_FURRBALL_FURRBALL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <absl/status/statusor.h>

#include "engine/common/error.h"
#include "engine/common/hash_pair.h"
#include "engine/furrball/memory_plan.h"
#include "engine/furrball/node_router.h"
#include "engine/furrball/operations.h"
#include "engine/furrball/options.h"
#include "engine/furrball/stats.h"

namespace furrballs {

// A key and its keyed hash (FurrBall::Hash), computed once: the engine
// routes and indexes by the hash and stores the key beside the value, so
// that a Get compares it (entry.h). `key` must outlive the call. `hash`
// must be Hash(key) for a Set: the engine's page walks (compaction,
// eviction, spill) find an entry's slot by hashing its stored key, so an
// entry written under another hash (only a test forcing a collision does
// that) stays in memory until its slot lets go of it, never misread.
struct KeyRef {
  HashPair hash;
  std::string_view key;
};

class FurrBall {
 public:
  // Allocates every node's pages and tables (all-or-nothing, in parallel on
  // the nodes' own workers) and starts the workers. Fails with a message that
  // names the node and what could not be allocated.
  static absl::StatusOr<std::unique_ptr<FurrBall>> Open(
      const FurrBallOptions& options);

  virtual ~FurrBall() = default;

  // The keyed hash that identifies `key` in this cache.
  virtual HashPair Hash(std::string_view key) const = 0;
  // The id of the node that owns the key under hash routing; -1 when the
  // key's node is not a function of its hash (other routings).
  virtual int OwnerOf(const HashPair& h) const = 0;
  // The nodes served: their ids, their indexes, and keys' home nodes
  // (node_router.h). A per-node array of the caller's is indexed by index;
  // SubmitToNode and the statistics speak ids.
  virtual const NodeRouter& router() const = 0;
  int node_count() const { return router().count(); }
  virtual const FurrBallOptions& options() const = 0;
  // How the budget was divided on each node (memory_plan.h).
  virtual const MemoryPlan& memory_plan() const = 0;
  // One line for a start-up log: the nodes served and where they came from
  // (Topology::Summary).
  virtual std::string TopologySummary() const = 0;

  // `key` with its hash, for the KeyRef overloads (the key is not
  // validated; the string overloads below do that).
  KeyRef Ref(std::string_view key) const { return KeyRef{Hash(key), key}; }

  // Copies the value into *value (resized to fit). A hit is always the key
  // asked for: the key is stored with its value and compared.
  virtual GetResult Get(const KeyRef& key, std::string* value) = 0;
  // Get without disk reads, for a thread that must not block (a NodeJob
  // worker): a key whose only copy is in the spill tier is not found and
  // comes back with on_disk set, and is counted neither as a hit nor as a
  // miss; the caller finishes it with Get on a thread that may block.
  virtual GetResult GetFromMemory(const KeyRef& key, std::string* value) = 0;
  virtual SetResult Set(const KeyRef& key, std::string_view value,
                        const WriteOptions& options = {}) = 0;
  // Delete and Touch act on the entry with the key's hash (an entry of a
  // colliding key would be the one removed or touched, as any eviction
  // could remove it; no value is ever returned for the wrong key).
  virtual DeleteResult Delete(const HashPair& h) = 0;
  // Resets the TTL of a live entry; kKeyNotFound if there is none.
  virtual Error Touch(const HashPair& h, uint64_t ttl_ms) = 0;

  // A hint before Gets of many keys, with no effect a caller can observe:
  // call it with step 0 for each key of the batch, then step 1 for each,
  // and so on to kPrefetchSteps - 1, then run the Gets. A Get is a chain of
  // dependent cache misses (the key table's control bytes, its slot, the
  // entry in its page); step by step over a batch, the batch's misses
  // overlap (docs/service_bench.md, "The Batch stream's floor"). Under hash
  // routing only; elsewhere it does nothing.
  static constexpr int kPrefetchSteps = 3;
  virtual void PrefetchGet(const HashPair& h, int step) const = 0;

  // Key-validating conveniences: kEmptyKey / kKeyTooLarge before hashing.
  GetResult Get(std::string_view key, std::string* value);
  SetResult Set(std::string_view key, std::string_view value,
                const WriteOptions& options = {});
  DeleteResult Delete(std::string_view key);
  Error Touch(std::string_view key, uint64_t ttl_ms);

  // Checks a key and value against the configured limits.
  Error ValidateKey(std::string_view key) const;
  Error ValidateValue(std::string_view value) const;

  // Runs `job` on node `node`'s pinned worker. Returns kQueueFull when the
  // node's queue is full, kShuttingDown after Close() began and kNoSuchNode
  // for a node the cache does not run on; the job has then not been queued.
  using Job = void (*)(void* context);
  virtual Error SubmitToNode(int node, Job job, void* context) = 0;

  // Pins the calling thread to node `node`'s CPUs (a simulated node's CPUs
  // on a simulated topology) and makes it that node's thread for this
  // cache: where thread-local routing places its new keys, which shard its
  // searches probe first, and whether its accesses pay the simulated remote
  // delay. For callers that run threads of their own per node (the topology
  // benchmark); a thread never pinned counts as the node of the CPU it first
  // ran on. Fails (kNoSuchNode in the status) for a node the cache does not
  // serve.
  virtual absl::Status PinCurrentThreadToNode(int node) const = 0;

  // Stops the node workers: jobs already queued still run, later
  // SubmitToNode calls get kShuttingDown, maintenance stops. The cache stays
  // readable and writable until it is destroyed (a service drains its
  // in-flight requests in between). Idempotent; the destructor calls it.
  virtual void Close() = 0;

  // A consistent-enough copy of every node's statistics (each counter is
  // exact; counters are not read at one instant).
  virtual std::vector<NodeStatsSnapshot> Stats() const = 0;

  // Bytes allocated outside the value pages (hash tables, ARC, page
  // metadata), for the documented memory bound.
  virtual size_t MetadataBytes() const = 0;

 protected:
  FurrBall() = default;
};

}  // namespace furrballs

#endif  // FURRBALLS_ENGINE_FURRBALL_FURRBALL_H_
