// engine/furrball/furrball_testing.h: fault injection for tests of
// FurrBall::Open's all-or-nothing start-up (report §3.4).
//
// Thread safety: thread-safe (one atomic); meant to be set by a test before
// Open and reset after.
#ifndef FURRBALLS_ENGINE_FURRBALL_FURRBALL_TESTING_H_
#define FURRBALLS_ENGINE_FURRBALL_FURRBALL_TESTING_H_

namespace furrballs {

// Makes every later Open fail to build the shard of node `node` (as if the
// node refused memory) while the other nodes build theirs; -1 turns it off.
void SetNodeInitFailureForTesting(int node);

}  // namespace furrballs

#endif  // FURRBALLS_ENGINE_FURRBALL_FURRBALL_TESTING_H_
