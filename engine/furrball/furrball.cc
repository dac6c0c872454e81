#include "engine/furrball/furrball.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <absl/strings/str_cat.h>

#include "engine/common/parking_lock.h"
#include "engine/furrball/chunked_value.h"
#include "engine/furrball/entry.h"
#include "engine/furrball/furrball_testing.h"
#include "engine/furrball/key_locator.h"
#include "engine/furrball/key_meta.h"
#include "engine/furrball/key_mover.h"
#include "engine/furrball/location_cache.h"
#include "engine/furrball/memory_plan.h"
#include "engine/furrball/node_job.h"
#include "engine/furrball/node_shard.h"
#include "engine/furrball/page_pool.h"
#include "engine/furrball/restart_manifest.h"
#include "engine/numatic/error_status.h"
#include "engine/numatic/numatic.h"
#include "engine/spill/spill_store.h"

namespace furrballs {

using furrball_internal::ChunkedValues;
using furrball_internal::ChunkStore;
using furrball_internal::EncodeRestartManifest;
using furrball_internal::EntryFootprint;
using furrball_internal::EntryKind;
using furrball_internal::KeyMover;
using furrball_internal::kMaxPageSize;
using furrball_internal::KeyLocator;
using furrball_internal::kMinPageSize;
using furrball_internal::LocationCache;
using furrball_internal::Maintenance;
using furrball_internal::NodeJob;
using furrball_internal::NodeShard;
using furrball_internal::PagePool;
using furrball_internal::ParseRestartManifest;
using furrball_internal::RestartManifest;
using furrball_internal::ShardConfig;
using furrball_internal::SpilledKey;

namespace {

// See furrball_testing.h. Read once per node at Open.
std::atomic<int> node_init_failure_for_testing{-1};
std::atomic<uint64_t> chunk_write_id_base_for_testing{0};

uint64_t WallMs() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(
          std::chrono::system_clock::now().time_since_epoch())
          .count());
}

}  // namespace

void SetChunkWriteIdBaseForTesting(uint64_t base) {
  chunk_write_id_base_for_testing.store(base, std::memory_order_relaxed);
}

void SetNodeInitFailureForTesting(int node) {
  node_init_failure_for_testing.store(node, std::memory_order_relaxed);
}

Error FurrBall::ValidateKey(std::string_view key) const {
  if (key.empty()) return Error::kEmptyKey;
  if (key.size() > options().max_key_bytes) return Error::kKeyTooLarge;
  return Error::kOk;
}

Error FurrBall::ValidateValue(std::string_view value) const {
  if (value.size() > options().max_value_bytes) return Error::kValueTooLarge;
  return Error::kOk;
}

GetResult FurrBall::Get(std::string_view key, std::string* value) {
  const Error err = ValidateKey(key);
  if (err != Error::kOk) return GetResult{err};
  return Get(Ref(key), value);
}

SetResult FurrBall::Set(std::string_view key, std::string_view value,
                        const WriteOptions& options) {
  const Error err = ValidateKey(key);
  if (err != Error::kOk) return SetResult{err};
  return Set(Ref(key), value, options);
}

DeleteResult FurrBall::Delete(std::string_view key) {
  const Error err = ValidateKey(key);
  if (err != Error::kOk) return DeleteResult{err};
  return Delete(Hash(key));
}

Error FurrBall::Touch(std::string_view key, uint64_t ttl_ms) {
  const Error err = ValidateKey(key);
  if (err != Error::kOk) return err;
  return Touch(Hash(key), ttl_ms);
}

namespace {

// A random start for the chunk write ids of this run (chunked_value.h).
uint64_t RandomWriteIdBase() {
  const uint64_t fixed =
      chunk_write_id_base_for_testing.load(std::memory_order_relaxed);
  if (fixed != 0) return fixed;
  std::random_device device;
  return (uint64_t{device()} << 32) ^ device();
}

// The FurrBall: one NodeShard and one NodeJob per node. Routing and the key
// locks' home live here, and the chunking of large values
// (chunked_value.h) on top of the per-entry operations; everything else is
// the shard's.
class FurrBallImpl final : public FurrBall, private ChunkStore {
 public:
  FurrBallImpl(const FurrBallOptions& options, const MemoryPlan& plan,
               std::unique_ptr<Numatic> numatic, std::vector<int> nodes,
               std::unique_ptr<spill::SpillStore> spill_store)
      : spill_store_(std::move(spill_store)),
        options_(options),
        plan_(plan),
        hasher_(options.hash_secret.has_value() ? KeyHasher(*options.hash_secret)
                                                : KeyHasher(options.hash_seed)),
        clock_(options.clock != nullptr ? options.clock : SteadyClock::Get()),
        numatic_(std::move(numatic)),
        router_(std::move(nodes)),
        // A quarter of the pages for replaced values that readers may
        // still be reading (chunked_value.h, "Bound").
        chunked_(this, plan.page_size, RandomWriteIdBase(),
                 plan.value_bytes() * router_.count() / 4) {
    shards_.reserve(router_.count());
    for (int i = 0; i < router_.count(); ++i) {
      shards_.emplace_back(nullptr, &NodeShard::Destroy);
    }
  }

  // Workers first: a queued job may still use any shard.
  ~FurrBallImpl() override {
    Close();
    // No reader is left: the replaced chunks go now, not to the disk
    // (chunked_value.h, "Shutdown").
    if (started_) chunked_.Drain();
    // A start that failed has shards missing and nothing of its own to
    // persist.
    if (started_ && spill_store_ != nullptr && options_.warm_restart) {
      PersistForWarmRestart().IgnoreError();  // a failure means a cold start
    }
    for (ShardPtr& shard : shards_) shard.reset();
  }

  // Graceful shutdown with the spill tier: every resident page goes to the
  // store, then the manifest (secret, versions, index) is written.
  absl::Status PersistForWarmRestart() {
    const uint64_t now = clock_->NowMs();
    RestartManifest manifest;
    manifest.secret = hasher_.secret();
    manifest.wall_ms = WallMs();
    manifest.nodes.resize(shards_.size());
    for (size_t i = 0; i < shards_.size(); ++i) {
      shards_[i]->SpillAllForShutdown();
      RestartManifest::Node& node = manifest.nodes[i];
      node.next_version = shards_[i]->next_version();
      node.keys = shards_[i]->SpilledKeys();
      std::erase_if(node.keys, [now](const auto& e) {
        return e.second.Expired(now);
      });
      for (auto& [h, k] : node.keys) {
        if (k.expiry_ms != 0) k.expiry_ms -= now;  // the TTL left
      }
    }
    return spill_store_->Close(EncodeRestartManifest(manifest));
  }

  // Warm restart: the previous run's index, with TTLs shortened by the time
  // the server was down.
  void Restore(const RestartManifest& restored) {
    const uint64_t now = clock_->NowMs();
    const uint64_t wall = WallMs();
    const uint64_t down = wall > restored.wall_ms ? wall - restored.wall_ms : 0;
    for (size_t i = 0; i < shards_.size(); ++i) {
      std::vector<std::pair<HashPair, SpilledKey>> keys;
      uint64_t max_version = restored.nodes[i].next_version;
      for (auto [h, k] : restored.nodes[i].keys) {
        if (k.expiry_ms != 0) {
          if (k.expiry_ms <= down) continue;
          k.expiry_ms = now + (k.expiry_ms - down);
        }
        max_version = std::max(max_version, k.version);
        keys.emplace_back(h, k);
      }
      shards_[i]->RestoreSpilled(keys, max_version);
    }
  }

  absl::Status Start() {
    const int n = node_count();
    jobs_.resize(n);
    for (int i = 0; i < n; ++i) {
      ShardConfig config;
      config.node = router_.IdOf(i);
      config.node_index = i;
      config.page_count = plan_.page_count;
      config.page_size = plan_.page_size;
      config.max_keys = plan_.max_keys;
      config.eviction_enabled = options_.eviction_enabled;
      config.clock = clock_;
      config.home_of = [](void* self, const HashPair& h) -> NodeShard& {
        FurrBallImpl* ball = static_cast<FurrBallImpl*>(self);
        return *ball->shards_[ball->HomeIndex(h)];
      };
      config.home_context = this;
      config.spill_store = spill_store_.get();
      config.spill_reload_whole_page = options_.spill_reload_whole_page;
      config.spill_cold_pages = options_.spill_cold_pages;
      config.memory_plan = plan_;
      config.hasher = hasher_;

      absl::StatusOr<NumaNodeMemoryResource*> resource =
          numatic_->NodeResource(router_.IdOf(i));
      if (!resource.ok()) return resource.status();
      NodeJob::Options job_options;
      job_options.node = router_.IdOf(i);
      job_options.pin = options_.pin_workers;
      job_options.queue_capacity = options_.job_queue_capacity;
      job_options.maintenance_interval = options_.maintenance_interval;
      // §3.4/§3.5: every node builds its shard on its own pinned worker, in
      // parallel; Open waits for all of them.
      jobs_[i] = std::make_unique<NodeJob>(
          numatic_.get(), job_options, *resource, [this, i, config] {
            if (config.node == node_init_failure_for_testing.load(
                                   std::memory_order_relaxed)) {
              return ErrorStatus(Error::kAllocationFailed,
                                 "injected by SetNodeInitFailureForTesting");
            }
            absl::StatusOr<ShardPtr> shard =
                NodeShard::Create(config, numatic_.get());
            if (!shard.ok()) return shard.status();
            shards_[i] = *std::move(shard);
            return absl::OkStatus();
          });
    }
    absl::Status first_error;
    for (int i = 0; i < n; ++i) {
      absl::Status s = jobs_[i]->WaitForInit();
      if (!s.ok() && first_error.ok()) {
        first_error = ErrorStatus(
            ErrorOf(s),
            absl::StrCat("node ", router_.IdOf(i), ": ", s.message()));
      }
    }
    if (!first_error.ok()) {
      // All or nothing (§3.4): stop every worker, free every shard built.
      Close();
      return first_error;
    }
    for (int i = 0; i < n; ++i) {
      NodeShard* shard = shards_[i].get();
      jobs_[i]->Activate([shard] {
        return shard->Maintain() ? Maintenance::kActive : Maintenance::kIdle;
      });
    }
    started_ = true;
    return StartLocator();
  }

  // Search routings find keys through a KeyLocator (key_locator.h), with a
  // location cache sliced over the nodes (location_cache.h) when asked for
  // and the plan paid for it.
  absl::Status StartLocator() {
    if (options_.routing == RoutingPolicy::kHash) return absl::OkStatus();
    std::unique_ptr<LocationCache> cache;
    if (plan_.location_cache_bytes != 0) {
      std::vector<RawAllocator> allocators;
      for (int id : router_.ids()) {
        absl::StatusOr<RawAllocator> a = numatic_->NodeAllocator(id);
        if (!a.ok()) return a.status();
        allocators.push_back(*a);
      }
      cache = std::make_unique<LocationCache>(
          &router_, std::move(allocators),
          LocationCache::EntriesFor(plan_.max_keys));
      if (!cache->ok()) {
        return ErrorStatus(Error::kAllocationFailed,
                           absl::StrCat("the location cache's ",
                                        plan_.location_cache_bytes,
                                        " bytes per node"));
      }
    }
    std::vector<NodeShard*> shards;
    std::vector<NodeJob*> jobs;
    for (int i = 0; i < node_count(); ++i) {
      shards.push_back(shards_[i].get());
      jobs.push_back(jobs_[i].get());
    }
    locator_ = std::make_unique<KeyLocator>(numatic_.get(), &router_,
                                            std::move(shards), std::move(jobs),
                                            options_.locate, std::move(cache));
    return absl::OkStatus();
  }

  void Close() override {
    for (std::unique_ptr<NodeJob>& job : jobs_) {
      if (job != nullptr) job->Stop();
    }
  }

  HashPair Hash(std::string_view key) const override {
    return hasher_.Hash(key);
  }

  int OwnerOf(const HashPair& h) const override {
    if (options_.routing != RoutingPolicy::kHash) return -1;
    return router_.IdOf(router_.HomeIndex(h));
  }
  const NodeRouter& router() const override { return router_; }
  const FurrBallOptions& options() const override { return options_; }
  const MemoryPlan& memory_plan() const override { return plan_; }
  std::string TopologySummary() const override {
    return numatic_->topology().Summary();
  }

  GetResult Get(const KeyRef& key, std::string* value) override {
    EntryKind kind = EntryKind::kValue;
    const GetResult r =
        GetEntry(key, value, EntryKind::kValue, &kind, /*read_disk=*/true);
    if (!r.found || kind != EntryKind::kChunkedHead) return r;
    return chunked_.Assemble(key, r, value, /*read_disk=*/true);
  }

  void PrefetchGet(const HashPair& h, int step) const override {
    if (options_.routing == RoutingPolicy::kHash) {
      shards_[HomeIndex(h)]->PrefetchGet(h, step);
    }
  }

  GetResult GetFromMemory(const KeyRef& key, std::string* value) override {
    EntryKind kind = EntryKind::kValue;
    const GetResult r =
        GetEntry(key, value, EntryKind::kValue, &kind, /*read_disk=*/false);
    if (!r.found || kind != EntryKind::kChunkedHead) return r;
    return chunked_.Assemble(key, r, value, /*read_disk=*/false);
  }

  SetResult Set(const KeyRef& key, std::string_view value,
                const WriteOptions& options) override {
    if (ValidateValue(value) != Error::kOk) {
      return SetResult{Error::kValueTooLarge, 0};
    }
    if (chunked_.NeedsChunks(key.key.size(), value.size())) {
      return chunked_.Set(key, value, options);
    }
    std::string replaced;
    const SetResult r =
        SetEntry(key, value, options, EntryKind::kValue, &replaced);
    chunked_.RetireChunksOf(key.hash, replaced);
    return r;
  }

  DeleteResult Delete(const HashPair& h) override {
    std::string replaced;
    const DeleteResult r = DeleteEntry(h, 0, &replaced);
    chunked_.RetireChunksOf(h, replaced);
    return r;
  }

  Error Touch(const HashPair& h, uint64_t ttl_ms) override {
    ParkingLockHolder l(KeyLockFor(h));
    const int target = Locate(h);
    if (target < 0) return Error::kKeyNotFound;
    NodeShard& shard = *shards_[target];
    numatic_->SimulateRemoteAccess(numatic_->GetCurrentNode(), shard.node());
    return shard.Touch(h, ttl_ms);
  }

  Error SubmitToNode(int node, Job job, void* context) override {
    const int index = router_.IndexOf(node);
    if (index < 0) return Error::kNoSuchNode;
    return jobs_[index]->Submit(job, context);
  }

  absl::Status PinCurrentThreadToNode(int node) const override {
    return numatic_->PinCurrentThreadToNode(node);
  }

  std::vector<NodeStatsSnapshot> Stats() const override {
    std::vector<NodeStatsSnapshot> out;
    out.reserve(shards_.size());
    for (const ShardPtr& shard : shards_) {
      if (shard != nullptr) out.push_back(shard->Snapshot());
    }
    return out;
  }

  // ChunkStoreForTesting (furrball_testing.h).
  ChunkStore& chunk_store() { return *this; }

  // LocateEntryForTesting (furrball_testing.h).
  EntryPlacement LocateEntry(const HashPair& h) {
    ParkingLockHolder l(KeyLockFor(h));
    const int index = Locate(h);
    if (index < 0) return {};
    const uint8_t* entry = shards_[index]->EntryForTesting(h);
    if (entry == nullptr) return {};
    return {router_.IdOf(index), entry};
  }

  size_t MetadataBytes() const override {
    // Everything this cache mapped on its nodes (Numatic counts each
    // mapping) minus the value pages themselves and the key tables that
    // growths left mapped but released: CMap slots, ARC arena and index,
    // page metadata, key locks, statistics, job queues, the shard objects,
    // and the page rounding of each of those mappings.
    uint64_t total = 0;
    for (int i = 0; i < router_.count(); ++i) {
      total += numatic_->MappedBytes(router_.IdOf(i));
      if (shards_[i] != nullptr) {
        total -= shards_[i]->page_bytes() +
                 shards_[i]->key_table_released_bytes();
      }
    }
    return total;
  }

 private:
  using ShardPtr = std::unique_ptr<NodeShard, void (*)(NodeShard*)>;

  // ---- ChunkStore: one entry, under its key's lock ----

  HashPair HashOf(std::string_view key) const override { return Hash(key); }

  GetResult GetEntry(const KeyRef& key, std::string* value, EntryKind wanted,
                     EntryKind* kind, bool read_disk) override {
    const HashPair& h = key.hash;
    ParkingLock& key_lock = KeyLockFor(h);
    if (options_.routing == RoutingPolicy::kHash) {
      return shards_[HomeIndex(h)]->Get(h, key.key, value,
                                        numatic_->GetCurrentNode(), key_lock,
                                        /*count_miss=*/true, read_disk, wanted,
                                        kind);
    }
    // The owner is unknown: the location cache's hint, else a search of the
    // shards (key_locator.h). At most one shard holds a key (writers search
    // before they insert, under the key lock) except while it moves, and a
    // search that missed looks again if a move ran meanwhile (key_mover.h).
    // The spill tier needs hash routing (docs/spill.md), so these routings
    // never read the disk.
    const bool migrate = options_.migrate_to_readers;
    for (;;) {
      const uint32_t moves = migrate ? mover_.MovesBefore(h) : 0;
      int holder = -1;
      GetResult r = locator_->Get({h, key.key, &key_lock, wanted, read_disk},
                                  value, kind, &holder);
      if (r.found) {
        // Chunked values and their chunks stay put (key_mover.h).
        if (migrate && kind != nullptr && *kind == EntryKind::kValue) {
          const int reader = router_.IndexOf(numatic_->GetCurrentNode());
          const bool moved =
              mover_.OnRead(h, *shards_[holder],
                            reader < 0 ? nullptr : shards_[reader].get(),
                            key_lock);
          // The hint follows the key, so its next Get is not a stale probe
          // (a hint is only a hint: a Delete racing this is harmless).
          if (moved && locator_ != nullptr) locator_->Placed(h, reader);
        }
        return r;
      }
      if (!migrate || !mover_.MovedSince(h, moves)) break;
    }
    if (wanted != EntryKind::kChunk) {
      shards_[router_.IndexOrFirst(numatic_->GetCurrentNode())]->CountMiss();
    }
    return GetResult{};
  }

  SetResult SetEntry(const KeyRef& key, std::string_view value,
                     const WriteOptions& options, EntryKind kind,
                     std::string* replaced_head) override {
    const HashPair& h = key.hash;
    NodeShard* shard;
    SetResult r;
    {
      ParkingLockHolder l(KeyLockFor(h));
      const int target = WriteTarget(h);
      shard = shards_[target].get();
      numatic_->SimulateRemoteAccess(numatic_->GetCurrentNode(), shard->node());
      r = shard->Set(h, key.key, value, options, kind, replaced_head);
      if (locator_ != nullptr && r.error == Error::kOk) {
        locator_->Placed(h, target);
      }
    }
    // An insert into a full key table evicts to the spill batch; the writer
    // writes it out once it is a page long, holding no lock (docs/spill.md).
    shard->FlushVictimBatchIfFull();
    return r;
  }

  DeleteResult DeleteEntry(const HashPair& h, uint64_t if_version,
                           std::string* replaced_head) override {
    ParkingLockHolder l(KeyLockFor(h));
    const int target = Locate(h);
    if (target < 0) return DeleteResult{};
    NodeShard& shard = *shards_[target];
    numatic_->SimulateRemoteAccess(numatic_->GetCurrentNode(), shard.node());
    const DeleteResult r = shard.Delete(h, if_version, replaced_head);
    if (locator_ != nullptr && r.deleted) locator_->Removed(h, target);
    return r;
  }

  bool RunSoon(void (*job)(void* context), void* context) override {
    if (jobs_.empty()) return false;
    const int index = router_.IndexOrFirst(numatic_->GetCurrentNode());
    return jobs_[index]->Submit(job, context) == Error::kOk;
  }

  // The hash-routing owner's index, which is also every key's home: its
  // write lock and the counter its versions come from.
  int HomeIndex(const HashPair& h) const { return router_.HomeIndex(h); }

  ParkingLock& KeyLockFor(const HashPair& h) {
    return shards_[HomeIndex(h)]->KeyLockFor(h);
  }

  // The shard holding `h`, or -1. REQUIRES: the key lock (so the answer
  // stays true until the caller's operation).
  int Locate(const HashPair& h) const {
    if (options_.routing == RoutingPolicy::kHash) return HomeIndex(h);
    return locator_->Locate(h);
  }

  // Where a write goes: the key's shard if it has one, else where the
  // routing policy places new keys. REQUIRES: the key lock.
  int WriteTarget(const HashPair& h) {
    switch (options_.routing) {
      case RoutingPolicy::kHash:
        return HomeIndex(h);
      case RoutingPolicy::kRoundRobin: {
        const int found = Locate(h);
        if (found >= 0) return found;
        // A per-thread turn, started at a per-thread offset: even spread
        // without a shared counter on the write path.
        thread_local uint64_t turn =
            furrball_internal::ThisThreadStatShard();
        return static_cast<int>(turn++ % router_.count());
      }
      case RoutingPolicy::kThreadLocal: {
        const int found = Locate(h);
        if (found >= 0) return found;
        return router_.IndexOrFirst(numatic_->GetCurrentNode());
      }
    }
    return HomeIndex(h);
  }

  // Declared first so that it outlives the shards, which point at it.
  std::unique_ptr<spill::SpillStore> spill_store_;
  const FurrBallOptions options_;
  const MemoryPlan plan_;
  const KeyHasher hasher_;
  const Clock* const clock_;
  const std::unique_ptr<Numatic> numatic_;
  const NodeRouter router_;
  std::vector<ShardPtr> shards_;  // by index; written once by the workers
  // Created by Start, never resized afterwards (SubmitToNode reads it
  // concurrently with Close).
  std::vector<std::unique_ptr<NodeJob>> jobs_;
  // Every shard was built (Start succeeded).
  bool started_ = false;
  // Values too large for one entry (chunked_value.h).
  ChunkedValues chunked_;
  // Keys following their readers (migrate_to_readers).
  KeyMover mover_;
  // Search routings only: finds a key's node (built by Start once the
  // shards exist; uses the shards, workers and numatic_, so declared after
  // them).
  std::unique_ptr<KeyLocator> locator_;
};

}  // namespace

EntryPlacement LocateEntryForTesting(FurrBall& ball, const HashPair& h) {
  // Open makes no other FurrBall.
  return static_cast<FurrBallImpl&>(ball).LocateEntry(h);
}

ChunkStore& ChunkStoreForTesting(FurrBall& ball) {
  return static_cast<FurrBallImpl&>(ball).chunk_store();
}

absl::StatusOr<std::unique_ptr<FurrBall>> FurrBall::Open(
    const FurrBallOptions& options) {
  absl::Status valid = ValidateOptions(options);
  if (!valid.ok()) return valid;

  NumaticOptions numatic_options;
  numatic_options.simulate_nodes =
      options.simulate_topology ? options.node_count : 0;
  numatic_options.simulated_node_ids = options.simulated_node_ids;
  numatic_options.remote_access_delay_ns = options.simulated_remote_delay_ns;
  absl::StatusOr<std::unique_ptr<Numatic>> numatic =
      Numatic::Create(numatic_options);
  if (!numatic.ok()) return numatic.status();

  std::vector<int> nodes = (*numatic)->topology().node_ids();
  if (options.node_count > 0) {
    if (options.node_count > static_cast<int>(nodes.size())) {
      return ErrorStatus(
          Error::kInvalidTopology,
          absl::StrCat("node_count = ", options.node_count, " but only ",
                       nodes.size(), " usable nodes (",
                       FormatIdList(nodes),
                       "); use simulate_topology to split them"));
    }
    nodes.resize(options.node_count);
  }
  FurrBallOptions effective = options;
  absl::StatusOr<MemoryPlan> plan =
      PlanMemory(options, static_cast<int>(nodes.size()));
  if (!plan.ok()) return plan.status();
  effective.page_size_bytes = plan->page_size;
  std::unique_ptr<spill::SpillStore> store;
  std::optional<RestartManifest> restored;
  if (!options.spill_dir.empty()) {
    spill::SpillStoreOptions so;
    so.dir = options.spill_dir;
    so.node_count = static_cast<int>(nodes.size());
    so.disk_budget_bytes = options.spill_disk_budget_bytes;
    // Inside the budget (MemoryPlan).
    so.write_buffer_bytes = SpillWriteBufferBytes(*plan);
    so.env = options.spill_env;
    so.cold_start = !options.warm_restart;
    std::optional<std::string> manifest;
    absl::StatusOr<std::unique_ptr<spill::SpillStore>> opened =
        spill::SpillStore::Open(so, &manifest);
    // The store's code says what is wrong (a directory in use, missing,
    // not writable, an I/O error) and its message names the directory.
    if (!opened.ok()) return opened.status();
    store = *std::move(opened);
    if (manifest.has_value()) {
      absl::StatusOr<RestartManifest> parsed =
          ParseRestartManifest(*manifest, static_cast<int>(nodes.size()));
      if (parsed.ok()) restored = *std::move(parsed);  // else: a cold start
    }
    // The keys' identities depend on the secret: a restart must hash with
    // the one the spilled pages were indexed under. An explicitly different
    // secret makes the old index meaningless (its pages age out).
    if (restored.has_value()) {
      if (options.hash_secret.has_value() &&
          *options.hash_secret != restored->secret) {
        restored.reset();
      } else {
        effective.hash_secret = restored->secret;
      }
    }
  }
  auto ball = std::make_unique<FurrBallImpl>(effective, *plan,
                                            *std::move(numatic),
                                            std::move(nodes), std::move(store));
  absl::Status started = ball->Start();
  if (!started.ok()) return started;
  if (restored.has_value()) ball->Restore(*restored);
  return std::unique_ptr<FurrBall>(std::move(ball));
}

}  // namespace furrballs
