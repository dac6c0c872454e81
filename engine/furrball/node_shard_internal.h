// engine/furrball/node_shard_internal.h: helpers shared by NodeShard's
// translation units (node_shard*.cc).
//
// Thread safety: TestHooks is an acquire load of the hooks set by
// SetEngineTestHooksForTesting; the rest are constants and pure functions.
#ifndef FURRBALLS_ENGINE_FURRBALL_NODE_SHARD_INTERNAL_H_
#define FURRBALLS_ENGINE_FURRBALL_NODE_SHARD_INTERNAL_H_

#include <cstdint>

#include "engine/furrball/furrball_testing.h"
#include "engine/furrball/key_meta.h"

namespace furrballs {
namespace furrball_internal {

// The engine's test pause points, or null (furrball_testing.h).
const EngineTestHooks* TestHooks();

// Attempts of a reclaimer's single-key CMap operation that keeps finding the
// slot busy (a writer is inside it for a few hundred nanoseconds at most).
inline constexpr int kBusyRetries = 64;

}  // namespace furrball_internal
}  // namespace furrballs

#endif  // FURRBALLS_ENGINE_FURRBALL_NODE_SHARD_INTERNAL_H_
