// engine/furrball/key_locator.h: KeyLocator, how a FurrBall finds the node
// of a key that round-robin or thread-local routing placed (report §2.3,
// §8 Phase 4 §4.1-§4.3): the location cache's hint first, then a discovery
// by sequential scan or by broadcast race.
//
// Thread safety: thread-safe. Get needs no lock; Locate, Placed and Removed
// are called by writers holding the key's lock.
//
// ---------------------------------------------------------------------------
// A Get
//
//   hint     LocationCache::Hint (location_cache.h). A hint names node k:
//            probe shard k. A hit is the answer (location_hits). A miss
//            means the hint was stale (location_stale): Forget it and
//            discover.
//   discover the scan (the shards one after another, requester's node
//            first, the stale hint's node skipped) or the race
//            (broadcast_get.h), as LocatePolicy and the cost model say.
//            A hit is Remembered. The caller counts a miss (once, after
//            its move re-check: key_mover.h).
//
// The answer is always a shard's: a hint only orders the probes, so every
// key found without a hint is found with one, and a miss is a miss of the
// same probes the scan makes, each made during the Get. A key that moves
// between nodes meanwhile (key_mover.h) can be missed, as by the scan; the
// caller's move-sequence re-check wraps Get as a whole. Writes name the
// node they placed a key on (Placed) and deletes clear it (Removed);
// evictions and moves do not, and cost the next Get one stale probe.
//
// ---------------------------------------------------------------------------
// When to race (LocatePolicy::kAuto): the report's waste model, measured
//
//   net_gain = latency_saved - (N - 1) x loser_probe_cost
//
// with latency_saved = scan_ns - race_ns, from exponentially weighted means
// of measured discoveries: scan_ns a whole scan's latency, race_ns a whole
// race's (submit, probes, wake-up), loser_probe_cost one probe of a scan
// (a loser's probe is the same shard lookup). A discovery races when
// net_gain > 0. Measured online rather than calibrated at Open because
// both sides move with load: a race's cost is mostly waking N - 1 workers,
// which a busy machine makes slower, and a scan's grows with remote
// latency. Each thread re-measures the choice it is not making once every
// `period` discoveries, period chosen so that the exploration costs at
// most 1/kExploreShare of what the discoveries cost (a race measured 100x
// a scan is re-tried once in 100 x kExploreShare). Scans are timed one in
// kScanSampleEvery (a clock read costs about a probe). The means are
// relaxed atomics that several threads update without a lock; an update
// lost to another thread's is one sample dropped.
//
// A node worker never races (broadcast_get.h), nor does a cache of more
// than kMaxRaceNodes nodes.
#ifndef FURRBALLS_ENGINE_FURRBALL_KEY_LOCATOR_H_
#define FURRBALLS_ENGINE_FURRBALL_KEY_LOCATOR_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/common/hash_pair.h"
#include "engine/common/parking_lock.h"
#include "engine/common/raw_allocator.h"
#include "engine/furrball/entry.h"
#include "engine/furrball/location_cache.h"
#include "engine/furrball/node_job.h"
#include "engine/furrball/node_router.h"
#include "engine/furrball/node_shard.h"
#include "engine/furrball/operations.h"
#include "engine/furrball/options.h"
#include "engine/numatic/numatic.h"

namespace furrballs {
namespace furrball_internal {

class KeyLocator {
 public:
  // What one Get looks for: NodeShard::Get's arguments.
  struct Lookup {
    HashPair h;
    std::string_view key;
    ParkingLock* key_lock;  // the key's write lock (taken only by a reader
                            // that keeps losing to writers)
    EntryKind wanted = EntryKind::kValue;
    bool read_disk = true;
  };

  // The shards and workers by node index; they outlive the locator.
  // `cache` may be null (FurrBallOptions::location_cache off).
  KeyLocator(const Numatic* numatic, const NodeRouter* router,
             std::vector<NodeShard*> shards, std::vector<NodeJob*> jobs,
             LocatePolicy policy, std::unique_ptr<LocationCache> cache);

  // Finds the key and copies its value (*kind gets the hit's kind when
  // not null, *holder the index of the shard that held it). found = false
  // when no shard held it; not counted as a miss here.
  GetResult Get(const Lookup& q, std::string* value, EntryKind* kind,
                int* holder);

  // The index of the shard holding `h`, or -1. REQUIRES: the key's lock,
  // so that the answer stays true until the caller's operation.
  int Locate(const HashPair& h);
  // A write stored `h` on node `index` / a delete removed it from there.
  // REQUIRES: the key's lock.
  void Placed(const HashPair& h, int index);
  void Removed(const HashPair& h, int index);

  bool has_cache() const { return cache_ != nullptr; }

  // The cost model's means in ns (0: not measured yet), for tests and
  // benchmarks.
  struct Costs {
    uint32_t scan_ns = 0;
    uint32_t probe_ns = 0;
    uint32_t race_ns = 0;
  };
  Costs costs() const;

  // The cost model (see the top), as pure functions: whether a discovery
  // on `nodes` nodes should race (net_gain > 0), and once in how many
  // discoveries a thread tries the other choice. REQUIRES: c.scan_ns > 0
  // and c.race_ns > 0.
  static bool RaceGains(const Costs& c, int nodes);
  static uint64_t ExplorePeriod(const Costs& c, bool race_gains);

  // Re-measure the choice not taken at least this rarely (see the top).
  static constexpr uint32_t kExploreShare = 64;
  static constexpr uint32_t kScanSampleEvery = 16;

 private:
  // hit_node: NodeShard::Get's (a race's probe on another node's worker).
  GetResult ProbeAt(int index, const Lookup& q, int requester,
                    std::string* value, EntryKind* kind, int hit_node = -1);
  GetResult Scan(const Lookup& q, int requester, int self, int skip,
                 std::string* value, EntryKind* kind, int* where);
  GetResult Race(const Lookup& q, int requester, int self,
                 std::string* value, EntryKind* kind, int* where);
  bool ChooseRace();

  const Numatic* const numatic_;
  const NodeRouter* const router_;
  const std::vector<NodeShard*> shards_;
  const std::vector<NodeJob*> jobs_;
  const LocatePolicy policy_;
  const bool can_race_;
  const std::unique_ptr<LocationCache> cache_;
  // The cost model's means (ns), on a line of their own: every sampled
  // discovery writes them.
  struct alignas(kCacheLineSize) Means {
    std::atomic<uint32_t> scan_ns{0};
    std::atomic<uint32_t> probe_ns{0};
    std::atomic<uint32_t> race_ns{0};
  };
  Means means_;
};

}  // namespace furrball_internal
}  // namespace furrballs

#endif  // FURRBALLS_ENGINE_FURRBALL_KEY_LOCATOR_H_
