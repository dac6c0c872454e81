#include "engine/furrball/furrball.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <absl/strings/str_cat.h>

#include "engine/furrball/entry.h"
#include "engine/furrball/furrball_testing.h"
#include "engine/furrball/node_job.h"
#include "engine/furrball/node_shard.h"
#include "engine/furrball/page_pool.h"
#include "engine/numatic/error_status.h"
#include "engine/numatic/numatic.h"

namespace furrballs {

using furrball_internal::EntryFootprint;
using furrball_internal::kMaxPageSize;
using furrball_internal::kMinPageSize;
using furrball_internal::NodeJob;
using furrball_internal::NodeShard;
using furrball_internal::PagePool;
using furrball_internal::ShardConfig;

namespace {

// See furrball_testing.h. Read once per node at Open.
std::atomic<int> node_init_failure_for_testing{-1};

}  // namespace

void SetNodeInitFailureForTesting(int node) {
  node_init_failure_for_testing.store(node, std::memory_order_relaxed);
}

absl::Status ValidateOptions(const FurrBallOptions& o) {
  auto bad = [](auto&&... parts) {
    return ErrorStatus(Error::kInvalidArgument, absl::StrCat(parts...));
  };
  if (!std::has_single_bit(o.page_size_bytes) ||
      o.page_size_bytes < kMinPageSize || o.page_size_bytes > kMaxPageSize) {
    return bad("page_size_bytes = ", o.page_size_bytes,
               ": must be a power of two in [", kMinPageSize, ", ",
               kMaxPageSize, "]");
  }
  if (o.max_key_bytes == 0) return bad("max_key_bytes must be > 0");
  if (o.max_value_bytes > UINT32_MAX ||
      EntryFootprint(o.max_value_bytes) > o.page_size_bytes) {
    return bad("max_value_bytes = ", o.max_value_bytes,
               " does not fit a page of ", o.page_size_bytes,
               " bytes with its ", furrball_internal::kEntryHeaderBytes,
               "-byte entry header; raise page_size_bytes");
  }
  if (o.node_count < 0 || o.node_count > kMaxSimulatedNodes) {
    return bad("node_count = ", o.node_count, ": must be in [0, ",
               kMaxSimulatedNodes, "]");
  }
  if (o.simulate_topology && o.node_count == 0) {
    return bad("simulate_topology needs node_count > 0");
  }
  if (o.memory_budget_bytes == 0) return bad("memory_budget_bytes must be > 0");
  if (o.max_keys_per_node > UINT32_MAX / 2) {
    return bad("max_keys_per_node = ", o.max_keys_per_node, " is too large");
  }
  if (o.maintenance_interval.count() <= 0) {
    return bad("maintenance_interval must be positive");
  }
  if (o.job_queue_capacity == 0 || o.job_queue_capacity > (size_t{1} << 24)) {
    return bad("job_queue_capacity = ", o.job_queue_capacity,
               ": must be in [1, 2^24]");
  }
  return absl::OkStatus();
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
  return Get(Hash(key), value);
}

SetResult FurrBall::Set(std::string_view key, std::string_view value,
                        const WriteOptions& options) {
  const Error err = ValidateKey(key);
  if (err != Error::kOk) return SetResult{err};
  return Set(Hash(key), value, options);
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

// The FurrBall: one NodeShard and one NodeJob per node. Routing and the key
// locks' home live here; everything else is the shard's.
class FurrBallImpl final : public FurrBall {
 public:
  FurrBallImpl(const FurrBallOptions& options, std::unique_ptr<Numatic> numatic,
               std::vector<int> nodes)
      : options_(options),
        hasher_(options.hash_secret.has_value() ? KeyHasher(*options.hash_secret)
                                                : KeyHasher(options.hash_seed)),
        clock_(options.clock != nullptr ? options.clock : SteadyClock::Get()),
        numatic_(std::move(numatic)),
        nodes_(std::move(nodes)) {
    shards_.reserve(nodes_.size());
    for (size_t i = 0; i < nodes_.size(); ++i) {
      shards_.emplace_back(nullptr, &NodeShard::Destroy);
    }
  }

  // Workers first: a queued job may still use any shard.
  ~FurrBallImpl() override {
    Close();
    for (ShardPtr& shard : shards_) shard.reset();
  }

  absl::Status Start() {
    const int n = node_count();
    const uint64_t per_node = options_.memory_budget_bytes / n;
    const uint32_t page_size = static_cast<uint32_t>(options_.page_size_bytes);
    const uint64_t pages = per_node / page_size;
    if (pages < PagePool::kMinPages) {
      return ErrorStatus(
          Error::kInvalidArgument,
          absl::StrCat("memory_budget_bytes = ", options_.memory_budget_bytes,
                       " gives each of ", n, " nodes ", pages, " pages of ",
                       page_size, " bytes; at least ", PagePool::kMinPages,
                       " are needed (current, staging, relocation, one "
                       "more): raise the budget or lower page_size_bytes"));
    }
    if (pages > UINT32_MAX / 2) {
      return ErrorStatus(Error::kInvalidArgument,
                         "too many pages per node; raise page_size_bytes");
    }
    // The documented default: one key per expected_entry_bytes of pages.
    const uint64_t max_keys =
        options_.max_keys_per_node != 0
            ? options_.max_keys_per_node
            : std::max<uint64_t>(
                  pages * page_size /
                      std::max<size_t>(options_.expected_entry_bytes, 1),
                  64);

    jobs_.resize(n);
    for (int i = 0; i < n; ++i) {
      ShardConfig config;
      config.node = nodes_[i];
      config.node_index = i;
      config.page_count = static_cast<uint32_t>(pages);
      config.page_size = page_size;
      config.max_keys = static_cast<uint32_t>(max_keys);
      config.eviction_enabled = options_.eviction_enabled;
      config.clock = clock_;
      config.key_lock_for = [](void* self, const HashPair& h) -> SpinLock& {
        return static_cast<FurrBallImpl*>(self)->KeyLockFor(h);
      };
      config.key_lock_context = this;

      absl::StatusOr<NumaNodeMemoryResource*> resource =
          numatic_->NodeResource(nodes_[i]);
      if (!resource.ok()) return resource.status();
      NodeJob::Options job_options;
      job_options.node = nodes_[i];
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
            ErrorOf(s), absl::StrCat("node ", nodes_[i], ": ", s.message()));
      }
    }
    if (!first_error.ok()) {
      // All or nothing (§3.4): stop every worker, free every shard built.
      Close();
      return first_error;
    }
    for (int i = 0; i < n; ++i) {
      NodeShard* shard = shards_[i].get();
      jobs_[i]->Activate([shard] { shard->Maintain(); });
    }
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
    return nodes_[HomeIndex(h)];
  }
  int node_count() const override { return static_cast<int>(nodes_.size()); }
  const FurrBallOptions& options() const override { return options_; }
  std::string TopologySummary() const override {
    return numatic_->topology().Summary();
  }

  GetResult Get(const HashPair& h, std::string* value) override {
    const int requester = numatic_->GetCurrentNode();
    SpinLock& key_lock = KeyLockFor(h);
    if (options_.routing == RoutingPolicy::kHash) {
      return shards_[HomeIndex(h)]->Get(h, value, requester, key_lock);
    }
    // The owner is unknown: search the shards, the requester's node first
    // (report §2.3). At most one shard holds a key (writers search before
    // they insert, under the key lock).
    const int first = IndexOfNode(requester);
    const int n = node_count();
    for (int k = 0; k < n; ++k) {
      NodeShard& shard = *shards_[(first + k) % n];
      GetResult r = shard.Get(h, value, requester, key_lock,
                              /*count_miss=*/false);
      if (r.found) return r;
    }
    shards_[first]->CountMiss();
    return GetResult{};
  }

  SetResult Set(const HashPair& h, std::string_view value,
                const WriteOptions& options) override {
    if (ValidateValue(value) != Error::kOk) {
      return SetResult{Error::kValueTooLarge, 0};
    }
    SpinLockHolder l(KeyLockFor(h));
    NodeShard& shard = *shards_[WriteTarget(h)];
    numatic_->SimulateRemoteAccess(numatic_->GetCurrentNode(), shard.node());
    return shard.Set(h, value, options);
  }

  DeleteResult Delete(const HashPair& h) override {
    SpinLockHolder l(KeyLockFor(h));
    const int target = Locate(h);
    if (target < 0) return DeleteResult{};
    NodeShard& shard = *shards_[target];
    numatic_->SimulateRemoteAccess(numatic_->GetCurrentNode(), shard.node());
    return shard.Delete(h);
  }

  Error Touch(const HashPair& h, uint64_t ttl_ms) override {
    SpinLockHolder l(KeyLockFor(h));
    const int target = Locate(h);
    if (target < 0) return Error::kKeyNotFound;
    NodeShard& shard = *shards_[target];
    numatic_->SimulateRemoteAccess(numatic_->GetCurrentNode(), shard.node());
    return shard.Touch(h, ttl_ms);
  }

  Error SubmitToNode(int node, Job job, void* context) override {
    const int index = IndexOfNodeOrMinusOne(node);
    if (index < 0) return Error::kNoSuchNode;
    return jobs_[index]->Submit(job, context);
  }

  std::vector<NodeStatsSnapshot> Stats() const override {
    std::vector<NodeStatsSnapshot> out;
    out.reserve(shards_.size());
    for (const ShardPtr& shard : shards_) {
      if (shard != nullptr) out.push_back(shard->Snapshot());
    }
    return out;
  }

  size_t MetadataBytes() const override {
    // Everything this cache mapped on its nodes (Numatic counts each
    // mapping) minus the value pages themselves: CMap slots, ARC arena and
    // index, page metadata, key locks, statistics, job queues, the shard
    // objects, and the page rounding of each of those mappings.
    uint64_t total = 0;
    for (size_t i = 0; i < nodes_.size(); ++i) {
      total += numatic_->MappedBytes(nodes_[i]);
      if (shards_[i] != nullptr) total -= shards_[i]->page_bytes();
    }
    return total;
  }

 private:
  using ShardPtr = std::unique_ptr<NodeShard, void (*)(NodeShard*)>;

  // The hash-routing owner, which is also every key's lock home. Uses H1's
  // high half: CMap picks groups from H1's low bits and ARC's index from H2,
  // so the node choice does not skew either table.
  int HomeIndex(const HashPair& h) const {
    return static_cast<int>(((h.h1 >> 32) * nodes_.size()) >> 32);
  }

  SpinLock& KeyLockFor(const HashPair& h) {
    return shards_[HomeIndex(h)]->KeyLockFor(h);
  }

  int IndexOfNodeOrMinusOne(int node) const {
    for (size_t i = 0; i < nodes_.size(); ++i) {
      if (nodes_[i] == node) return static_cast<int>(i);
    }
    return -1;
  }
  int IndexOfNode(int node) const {
    const int i = IndexOfNodeOrMinusOne(node);
    return i < 0 ? 0 : i;
  }

  // The shard holding `h`, or -1. REQUIRES: the key lock (so the answer
  // stays true until the caller's operation).
  int Locate(const HashPair& h) const {
    if (options_.routing == RoutingPolicy::kHash) return HomeIndex(h);
    const int n = node_count();
    const int first = IndexOfNode(numatic_->GetCurrentNode());
    for (int k = 0; k < n; ++k) {
      const int i = (first + k) % n;
      if (shards_[i]->Holds(h)) return i;
    }
    return -1;
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
        return static_cast<int>(turn++ % nodes_.size());
      }
      case RoutingPolicy::kThreadLocal: {
        const int found = Locate(h);
        if (found >= 0) return found;
        return IndexOfNode(numatic_->GetCurrentNode());
      }
    }
    return HomeIndex(h);
  }

  const FurrBallOptions options_;
  const KeyHasher hasher_;
  const Clock* const clock_;
  const std::unique_ptr<Numatic> numatic_;
  const std::vector<int> nodes_;  // node ids, by index
  std::vector<ShardPtr> shards_;  // by index; written once by the workers
  // Created by Start, never resized afterwards (SubmitToNode reads it
  // concurrently with Close).
  std::vector<std::unique_ptr<NodeJob>> jobs_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<FurrBall>> FurrBall::Open(
    const FurrBallOptions& options) {
  absl::Status valid = ValidateOptions(options);
  if (!valid.ok()) return valid;

  NumaticOptions numatic_options;
  numatic_options.simulate_nodes =
      options.simulate_topology ? options.node_count : 0;
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
  auto ball = std::make_unique<FurrBallImpl>(options, *std::move(numatic),
                                             std::move(nodes));
  absl::Status started = ball->Start();
  if (!started.ok()) return started;
  return std::unique_ptr<FurrBall>(std::move(ball));
}

}  // namespace furrballs
