// engine/furrball/furrball_testing.h: fault injection for tests of
// FurrBall::Open's all-or-nothing start-up (report §3.4), pause points
// for tests that need one particular interleaving, and where a key's bytes
// are (LocateEntryForTesting), and its per-entry operations
// (ChunkStoreForTesting).
//
// Thread safety: thread-safe (atomics, and the key's lock for
// LocateEntryForTesting); the setters are meant to be called by a test
// before Open and reset after.
#ifndef FURRBALLS_ENGINE_FURRBALL_FURRBALL_TESTING_H_
#define FURRBALLS_ENGINE_FURRBALL_FURRBALL_TESTING_H_

#include <cstdint>

#include "engine/common/hash_pair.h"

namespace furrballs {

class FurrBall;

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

// The node holding key `h` and the address of its entry (entry.h: header,
// key, value; for a value stored in chunks, its head's) in one of that
// node's value pages; node -1 and no address if the key is not resident. Exists for tests/numa_guest, which asks the
// kernel (move_pages) which NUMA node a key's bytes are really on after the
// key moved to its reader's node: nothing else names an entry's address,
// and the request path has no use for one. Runs under the key's write lock,
// so no write or move of the key is in progress; the node's worker may
// still relocate the entry within the node's pages afterwards, so the
// address is good only for asking which node it is on. `ball` must come
// from FurrBall::Open.
struct EntryPlacement {
  int node = -1;
  const void* entry = nullptr;
};
EntryPlacement LocateEntryForTesting(FurrBall& ball, const HashPair& h);

// The cache's operations on one entry (chunked_value.h's ChunkStore), for
// tests that drive a ChunkedValues of their own over a real cache and stop
// it between two chunk reads. `ball` must come from FurrBall::Open and
// outlive the store's use.
namespace furrball_internal {
class ChunkStore;
}  // namespace furrball_internal
furrball_internal::ChunkStore& ChunkStoreForTesting(FurrBall& ball);

}  // namespace furrballs

#endif  // FURRBALLS_ENGINE_FURRBALL_FURRBALL_TESTING_H_
