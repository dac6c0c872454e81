// engine/furrball/key_mover.h: KeyMover, keys follow their readers across
// nodes (report §2.9.4, insert-before-erase; SimpleMigratePolicy,
// migrate_policy.h). Used under the search routings (round-robin,
// thread-local) with FurrBallOptions::migrate_to_readers.
//
// Thread safety: thread-safe. MovesBefore/MovedSince and OnRead run on any
// thread with no lock held; Move requires the key's write lock.
//
// ---------------------------------------------------------------------------
// Counting
//
// One Get in SimpleMigratePolicy::kSamplePeriod per thread (a thread-local
// countdown: no shared write) that hit a key counts in the key's locality
// byte (KeyMeta::locality, the version word's spare top byte: no memory per
// key), as a local read if the reading thread runs on the key's node, else
// remote (NodeShard::RecordRead). When the policy says the remote reads
// dominate, the reading thread try-locks the key's write lock and, if it
// got it, moves the key to its own node there and then. It never waits: a
// busy key is moved by a later sample. Reads from a thread on no served
// node are not counted (there is nowhere to move to).
//
// ---------------------------------------------------------------------------
// The move (Move), under the key's write lock
//
//   1. copy     the key's payload and KeyMeta from node i, by the Get
//               protocol (node_shard.h), if it is resident, unexpired and a
//               plain value;
//   2. insert   it on node j with the same version and deadline
//               (NodeShard::InsertMoved): from here the key is on both
//               nodes, with the same bytes and version;
//   3. bump     the move sequence of the key's stripe (fetch_add, release);
//   4. erase    it from node i (NodeShard::EraseMoved, retried while a slot
//               holder is in the way, so that at most one copy is left).
//
// The key lock keeps every writer of the key (Set, Delete, Touch, each of
// which searches the shards under it) out for the whole move, so no write
// lands between the copy and the erase and no writer sees two copies. What
// can still happen on node i between 1 and 4 is a relocation (the same
// bytes elsewhere: the erase removes it wherever it is) or an eviction
// (then 4 finds nothing and the key lives on on node j, with the newest
// value: an eviction is never a promise that a key is gone). TTL
// reclamation try-locks the key lock, so it skips a key being moved.
//
// Chunked values stay where they are (CopyForMove refuses heads and
// chunks): a head names chunks under other keys, each with its own lock, so
// a whole move would take several key locks or leave the chunks behind;
// and a chunked value is at least an eighth of a page, whose copy costs
// far more than the one remote access its read pays per chunk.
//
// ---------------------------------------------------------------------------
// Readers: no miss of a key that is moving (the move sequence)
//
// A Get scans the shards without a lock, its own node first. With inserts
// before erases the key is always somewhere, but a scan can still miss it:
// it probes node j (not inserted yet), the move runs, it probes node i
// (erased already). So a Get reads its key's stripe's sequence before the
// scan (s0, acquire) and, after a scan that found nothing, again (s1, after
// an acquire fence); if it changed it scans again (FurrBall's GetEntry).
// Why that closes the window, per move M of the key (I, C, E = its insert,
// bump and erase; moves of one key are ordered by its lock, so their bumps
// are too):
//
//   - s0 reads C or a later value: I happens before C (program order, C a
//     release), so every probe after s0's acquire sees the insert on j.
//   - a probe saw E (the erase's stores, ctrl byte or fingerprint, come
//     after the release fence of the erase's slot lock, which C precedes):
//     that load and the acquire fence before s1 synchronize with the fence,
//     so s1 reads C or later.
//
// If s1 == s0, no bump lies between them, so each move is either wholly
// visible at s0 (its insert seen by every probe) or its erase is seen by
// no probe. Take the last move whose bump s0 saw (or the key's original
// insert, which preceded the Get if the key was present throughout): its
// destination's probe sees the insert and not the next move's erase, so it
// finds the key. A miss after s1 == s0 is therefore a key that was absent
// (deleted, evicted, expired) at some point of the scan. The sequence is 32
// bits: a reader would have to be fooled by exactly 2^32 moves in one
// stripe during one scan.
//
// Stripes are indexed by the key's H2 like the key locks; a move bumps one
// shared cache line that every node's readers hold read-only otherwise, and
// moves are rare next to reads. The sequences are one small array for the
// whole cache (4 KiB, on the heap like the FurrBall itself).
//
// Hash routing never moves keys (a key's node is its hash's), and the spill
// tier requires hash routing: a moving key is never on disk, so the spill
// tier's no-resurrection argument (docs/spill.md) is untouched.
// ValidateOptions refuses migrate_to_readers with either.
#ifndef FURRBALLS_ENGINE_FURRBALL_KEY_MOVER_H_
#define FURRBALLS_ENGINE_FURRBALL_KEY_MOVER_H_

#include <array>
#include <atomic>
#include <cstdint>

#include "engine/common/hash_pair.h"
#include "engine/common/parking_lock.h"
#include "engine/furrball/node_shard.h"

namespace furrballs {
namespace furrball_internal {

class KeyMover {
 public:
  KeyMover() = default;
  KeyMover(const KeyMover&) = delete;
  KeyMover& operator=(const KeyMover&) = delete;

  // The move sequence of h's stripe, read before a lock-free scan.
  uint32_t MovesBefore(const HashPair& h) const {
    // Acquire: pairs with Move's release bump, so a move counted here has
    // its insert visible to the scan that follows.
    return StripeOf(h).load(std::memory_order_acquire);
  }
  // After a scan that found nothing: whether a move of a key of h's stripe
  // ran meanwhile (then scan again).
  bool MovedSince(const HashPair& h, uint32_t before) const {
    // The fence pairs with the release fence of the erase's slot lock (see
    // the protocol above): a probe that saw an erase makes its bump visible.
    std::atomic_thread_fence(std::memory_order_acquire);
    return StripeOf(h).load(std::memory_order_relaxed) != before;
  }

  // A Get of `h` hit on `holder`; `reader` is the shard of the calling
  // thread's node (nullptr if the thread runs on no served node). Counts a
  // sampled read and moves the key to `reader` if the policy says so and
  // `key_lock` (h's write lock) is free. True if it moved the key.
  // REQUIRES: no key lock held.
  bool OnRead(const HashPair& h, NodeShard& holder, NodeShard* reader,
              ParkingLock& key_lock);

  // Moves `h` from `from` to `to` (the protocol above). True if moved.
  // REQUIRES: h's write lock; from != to.
  bool Move(const HashPair& h, NodeShard& from, NodeShard& to);

 private:
  static constexpr uint32_t kStripes = 1024;
  static_assert((kStripes & (kStripes - 1)) == 0, "mask indexing");

  std::atomic<uint32_t>& StripeOf(const HashPair& h) const {
    return stripes_[h.h2 & (kStripes - 1)];
  }

  mutable std::array<std::atomic<uint32_t>, kStripes> stripes_{};
};

}  // namespace furrball_internal
}  // namespace furrballs

#endif  // FURRBALLS_ENGINE_FURRBALL_KEY_MOVER_H_
