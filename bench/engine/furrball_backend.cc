// bench/engine/furrball_backend.cc: CacheBackend over furrballs::FurrBall.
#include "bench/engine/furrball_backend.h"

#include <string>
#include <string_view>
#include <vector>

#include <absl/base/thread_annotations.h>
#include <absl/container/flat_hash_map.h>
#include <absl/strings/str_format.h>
#include <absl/synchronization/mutex.h>

#include "engine/common/error.h"
#include "engine/furrball/furrball.h"
#include "engine/furrball/options.h"
#include "engine/furrball/stats.h"

namespace furrballs::bench {
namespace {

class FurrBallBackend final : public CacheBackend {
 public:
  explicit FurrBallBackend(std::unique_ptr<FurrBall> cache)
      : cache_(std::move(cache)) {}

  bool Get(const std::string& key, std::string* value) override {
    const GetResult r = cache_->Get(std::string_view(key), value);
    return r.error == Error::kOk && r.found;
  }

  bool Set(const std::string& key, std::string_view value) override {
    const Error error = cache_->Set(std::string_view(key), value).error;
    if (error == Error::kOk) return true;
    // Only on the failure path: the tally of why writes were refused.
    absl::MutexLock lock(&mu_);
    ++refusals_[error];
    return false;
  }

  uint64_t LiveValueBytes() override {
    uint64_t bytes = 0;
    for (const NodeStatsSnapshot& s : cache_->Stats()) bytes += s.live_bytes;
    return bytes;
  }

  bool bounded() const override { return true; }

  std::string Describe() override {
    NodeStatsSnapshot sum;
    const std::vector<NodeStatsSnapshot> nodes = cache_->Stats();
    for (const NodeStatsSnapshot& s : nodes) {
      sum.live_keys += s.live_keys;
      sum.sets += s.sets;
      sum.in_place_sets += s.in_place_sets;
      sum.staging_sets += s.staging_sets;
      sum.page_evictions += s.page_evictions;
      sum.evictions_capacity += s.evictions_capacity;
      sum.evictions_keys += s.evictions_keys;
      sum.relocations += s.relocations;
      sum.promote_drops += s.promote_drops;
      sum.dead_bytes += s.dead_bytes;
    }
    std::string note = absl::StrFormat(
        "%d node(s), metadata %.1f MiB on top of the budget, %u live keys, "
        "%u sets (%u in place, %u to staging), evictions %u (capacity) + %u "
        "(key table) + %u whole pages, %u relocations, %u PromoteBuf drops, "
        "%.1f MiB dead bytes",
        static_cast<int>(nodes.size()),
        static_cast<double>(cache_->MetadataBytes()) / (1 << 20), sum.live_keys,
        sum.sets, sum.in_place_sets, sum.staging_sets, sum.evictions_capacity,
        sum.evictions_keys, sum.page_evictions, sum.relocations,
        sum.promote_drops, static_cast<double>(sum.dead_bytes) / (1 << 20));
    absl::MutexLock lock(&mu_);
    for (const auto& [error, count] : refusals_) {
      note += absl::StrFormat("; %u sets refused with %s", count,
                              std::string(ErrorName(error)));
    }
    return note;
  }

 private:
  std::unique_ptr<FurrBall> cache_;
  absl::Mutex mu_;
  absl::flat_hash_map<Error, uint64_t> refusals_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

absl::StatusOr<std::unique_ptr<CacheBackend>> MakeFurrBallBackend(
    const BackendConfig& config) {
  FurrBallOptions options;
  options.memory_budget_bytes = config.memory_budget_bytes;
  if (config.furrball_keys_per_node == 0) {
    // The budget holds the key table too (memory_plan.h): divide it for
    // entries of exactly this workload's key and value size.
    options.expected_entry_bytes = config.key_bytes + config.value_bytes;
  } else if (config.furrball_keys_per_node > 0) {
    options.max_keys_per_node = static_cast<size_t>(config.furrball_keys_per_node);
  }
  absl::StatusOr<std::unique_ptr<FurrBall>> cache = FurrBall::Open(options);
  if (!cache.ok()) return cache.status();
  return std::make_unique<FurrBallBackend>(*std::move(cache));
}

}  // namespace furrballs::bench
