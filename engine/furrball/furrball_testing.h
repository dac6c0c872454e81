// engine/furrball/furrball_testing.h: fault injection for tests of
// FurrBall::Open's all-or-nothing start-up (report §3.4), and pause points
// for tests that need one particular interleaving.
//
// Thread safety: thread-safe (atomics); meant to be set by a test before
// Open and reset after.
#ifndef FURRBALLS_ENGINE_FURRBALL_FURRBALL_TESTING_H_
#define FURRBALLS_ENGINE_FURRBALL_FURRBALL_TESTING_H_

#include <cstdint>

#include "engine/common/hash_pair.h"

namespace furrballs {

// Makes every later Open fail to build the shard of node `node` (as if the
// node refused memory) while the other nodes build theirs; -1 turns it off.
void SetNodeInitFailureForTesting(int node);

// Makes every later Open start its chunk write ids (chunked_value.h) at
// `base` instead of a random number, so that a test can name a chunk's
// internal key; 0 turns it off.
void SetChunkWriteIdBaseForTesting(uint64_t base);

// Pause points inside the engine. A hook runs on the engine's thread at that
// point and may block it (a test then holds the engine there while it drives
// another thread). Null members are skipped; production never sets any.
struct EngineTestHooks {
  // An ARC victim has left the key table and is about to be copied to the
  // spill tier and indexed there. Runs after ARC's lock is released, on
  // the thread that copies it (the evicting one, or a writer or Get of
  // that key that settles it first).
  void (*victim_erased)(const HashPair& h) = nullptr;
  // A Set found its key neither in memory nor in the spill index and is
  // about to insert it (it holds the key's write lock).
  void (*before_insert)(const HashPair& h) = nullptr;
  // A Get of `h` is about to read its spilled page (holding no lock).
  void (*reload_read)(const HashPair& h) = nullptr;
  // A Get of `h` found no live copy in memory and is about to look in the
  // spill index (holding no lock).
  void (*get_missed_memory)(const HashPair& h) = nullptr;
  // A full batch of ARC victims (spill page `page_id`) is about to be
  // written to RocksDB (holding no lock).
  void (*victim_batch_write)(uint64_t page_id) = nullptr;
  // Node `node`'s key table growth took a step that changes what it maps
  // or holds out of service: pages retired, a new table installed, a
  // growth finished and pages given back. Runs on the node's worker,
  // holding no lock.
  void (*key_table_step)(int node) = nullptr;
};
// `hooks` must outlive its use; nullptr removes them.
void SetEngineTestHooksForTesting(const EngineTestHooks* hooks);

}  // namespace furrballs

#endif  // FURRBALLS_ENGINE_FURRBALL_FURRBALL_TESTING_H_
