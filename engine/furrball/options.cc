// engine/furrball/options.cc: ValidateOptions, the checks of a
// FurrBallOptions that do not depend on the topology (options.h).
#include "engine/furrball/options.h"

#include <bit>
#include <cstdint>

#include <absl/strings/str_cat.h>

#include "engine/common/error.h"
#include "engine/furrball/clock.h"
#include "engine/furrball/entry.h"
#include "engine/furrball/key_meta.h"
#include "engine/furrball/page_pool.h"
#include "engine/numatic/error_status.h"
#include "engine/numatic/topology.h"

namespace furrballs {
namespace {

using furrball_internal::kMaxPageSize;
using furrball_internal::kMinPageSize;

// The largest max_value_bytes: a value is assembled in one string.
constexpr size_t kMaxValueBytes = size_t{1} << 30;

}  // namespace

absl::Status ValidateOptions(const FurrBallOptions& o) {
  auto bad = [](auto&&... parts) {
    return ErrorStatus(Error::kInvalidArgument, absl::StrCat(parts...));
  };
  if (o.page_size_bytes != 0 &&
      (!std::has_single_bit(o.page_size_bytes) ||
       o.page_size_bytes < kMinPageSize || o.page_size_bytes > kMaxPageSize)) {
    return bad("page_size_bytes = ", o.page_size_bytes,
               ": must be 0 (automatic) or a power of two in [", kMinPageSize,
               ", ", kMaxPageSize, "] (", kMaxPageSize >> 20,
               " MiB, the largest page an entry header describes)");
  }
  if (o.max_key_bytes == 0 ||
      o.max_key_bytes > furrball_internal::kMaxPayloadKeyBytes) {
    return bad("max_key_bytes = ", o.max_key_bytes, ": must be in [1, ",
               furrball_internal::kMaxPayloadKeyBytes, "]");
  }
  // Values larger than a page's share are stored in chunks
  // (chunked_value.h), so max_value_bytes does not bound the page size.
  if (o.max_value_bytes > kMaxValueBytes) {
    return bad("max_value_bytes = ", o.max_value_bytes, ": must be at most ",
               kMaxValueBytes, " (1 GiB, memcached's largest item too)");
  }
  if (o.node_count < 0 || o.node_count > kMaxSimulatedNodes) {
    return bad("node_count = ", o.node_count, ": must be in [0, ",
               kMaxSimulatedNodes, "]");
  }
  if (o.simulate_topology && o.node_count == 0) {
    return bad("simulate_topology needs node_count > 0");
  }
  if (!o.simulated_node_ids.empty() &&
      (!o.simulate_topology ||
       o.simulated_node_ids.size() != static_cast<size_t>(o.node_count))) {
    return bad("simulated_node_ids needs simulate_topology and node_count = ",
               o.simulated_node_ids.size());
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
  // A key moves only between nodes that a search finds it on; and the
  // spill tier's no-resurrection relies on a key's node being its hash's
  // (key_mover.h, docs/spill.md).
  if (o.migrate_to_readers && !o.spill_dir.empty()) {
    return bad("migrate_to_readers cannot be combined with spill_dir (a "
               "spilled key's node must be a function of its hash)");
  }
  if (o.migrate_to_readers && o.routing == RoutingPolicy::kHash) {
    return bad("migrate_to_readers needs routing = kRoundRobin or "
               "kThreadLocal (under kHash a key's node is fixed)");
  }
  if (!o.spill_dir.empty() && o.routing != RoutingPolicy::kHash) {
    return bad("spill_dir needs routing = kHash (a spilled key's node must "
               "be a function of its hash)");
  }
  const Clock* clock = o.clock != nullptr ? o.clock : SteadyClock::Get();
  if (const uint64_t now = clock->NowMs(); now > kMaxExpiryMs / 2) {
    return bad("the clock reads ", now, " ms, past half of the ",
               kMaxExpiryMs, " ms a key's deadline can hold");
  }
  return absl::OkStatus();
}

}  // namespace furrballs
