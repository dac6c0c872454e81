// bench/engine/furrball_backend.h: the FurrBall engine as a benchmark
// backend.
//
// Thread safety: the backend is safe for concurrent Get/Set (FurrBall is).
//
// The backend calls the key-string conveniences FurrBall::Get/Set(string_view
// key, ...), so the key is validated and hashed (keyed XXH3-128) inside the
// timed call, as every peer hashes its own key. The cache is opened with
// memory_budget_bytes = the budget (its value pages; metadata comes on top and
// is reported in the note), the default page size and routing, real topology,
// and, unless BackendConfig::furrball_keys_per_node says otherwise, a memory
// plan for entries of exactly this key and value size (expected_entry_bytes:
// the planner adds the entry header and divides the budget between key
// table and pages), as the HyperClockCache peer is told its exact entry
// charge.
#ifndef FURRBALLS_BENCH_ENGINE_FURRBALL_BACKEND_H_
#define FURRBALLS_BENCH_ENGINE_FURRBALL_BACKEND_H_

#include <memory>

#include <absl/status/statusor.h>

#include "bench/engine/cache_backend.h"

namespace furrballs::bench {

absl::StatusOr<std::unique_ptr<CacheBackend>> MakeFurrBallBackend(
    const BackendConfig& config);

}  // namespace furrballs::bench

#endif  // FURRBALLS_BENCH_ENGINE_FURRBALL_BACKEND_H_
