// engine/furrball/broadcast_get.h: RunBroadcastGet, the broadcast-race Get
// (report §8 Phase 4 §4.1, §4.4): one Get's probe runs on every node's
// worker at once, each against its own shard, and the first hit wins.
//
// Thread safety: thread-safe; each call keeps its state on the caller's
// stack and returns only once no worker can touch it again.
//
// ---------------------------------------------------------------------------
// Protocol
//
//   caller   pending = n (under the race's mutex); submits node i's probe
//            to node i's worker for every i != self; probes `self`
//            itself meanwhile (the report sends that one to its own worker
//            too, to free the caller for batching; nothing batches here,
//            so it would only add a wake-up); probes inline every node
//            whose queue refused the job (full, or the cache is closing:
//            counted as fallbacks); then waits on the CondVar until
//            pending == 0.
//   prober   runs probe(i) into its own slot (value, kind, result); on a
//            hit claims the result with one CAS of `winner` from -1 to i
//            (two nodes hold a key only while it moves between them, as
//            copies of one version: either is right, the CAS picks one);
//            then, under the mutex, --pending and signal at 0.
//
// The mutex's unlock by the last prober happens before the caller's lock
// that sees pending == 0, so every slot's writes are visible to the
// caller, and no prober touches the race after that unlock: the caller may
// return and its stack go away. A job a worker accepted always runs
// (NodeJob::Stop runs every queued job before it joins), so the wait ends
// as soon as the workers get to the jobs; a Get never waits on a queue that
// refused it. The caller sleeps (no spin: on 2 cores a spinning caller would
// take the CPU its workers need).
//
// A caller that is itself a node worker must not race: it would wait for
// a job queued behind itself, or two workers for each other. Callers check
// NodeJob::OnWorkerThread().
#ifndef FURRBALLS_ENGINE_FURRBALL_BROADCAST_GET_H_
#define FURRBALLS_ENGINE_FURRBALL_BROADCAST_GET_H_

#include <string>

#include <absl/functional/function_ref.h>

#include "engine/common/error.h"
#include "engine/furrball/entry.h"
#include "engine/furrball/operations.h"

namespace furrballs {
namespace furrball_internal {

// The most nodes one race probes (its slots are on the caller's stack);
// more nodes scan.
inline constexpr int kMaxRaceNodes = 16;

struct RaceOutcome {
  GetResult result;  // the winner's; found = false when every probe missed
  EntryKind kind = EntryKind::kValue;
  int winner = -1;     // the index of the node whose probe won, or -1
  int fallbacks = 0;   // nodes whose worker refused the job (probed inline)
};

// Node i's shard Get into *value and *kind, on whichever thread runs it.
using RaceProbe =
    absl::FunctionRef<GetResult(int index, std::string* value, EntryKind* kind)>;
// Queues job(context) on node i's worker (NodeJob::Submit).
using RaceSubmit =
    absl::FunctionRef<Error(int index, void (*job)(void*), void* context)>;

// Runs the race over nodes 0..n-1; the winner's value is moved into *value
// (cleared on a miss). REQUIRES: 1 <= n <= kMaxRaceNodes, 0 <= self < n,
// and the caller is not a node worker (see above).
RaceOutcome RunBroadcastGet(int n, int self, RaceSubmit submit,
                            RaceProbe probe, std::string* value);

}  // namespace furrball_internal
}  // namespace furrballs

#endif  // FURRBALLS_ENGINE_FURRBALL_BROADCAST_GET_H_
