// engine/furrball/migrate_policy.h: SimpleMigratePolicy, the report's
// locality policy (introduction, §2.9.4, §3.27, §3.28): two 4-bit saturating
// counters per key, reads from the key's own node and from other nodes, with
// exponential decay, and the decision "remote reads dominate: move the key
// to the node that reads it".
//
// Thread safety: stateless; the functions are pure. The counters live in one
// byte of the key's KeyMeta (KeyMeta::locality, key_meta.h), read and written
// under the CMap slot's seqlock like the rest of it (key_mover.h).
//
// Locality is an axis of its own (§3.28): ARC says whether a key is worth
// keeping, this says whether it sits on the right node; the two never
// consult each other. A key moves only while it is resident and read.
//
// The byte: low nibble = local reads, high nibble = remote reads, both
// counting *sampled* Gets (kSamplePeriod). Decay: when the counter a read
// would raise is at 15, both counters are halved first, so the byte keeps
// the recent ratio of local to remote reads rather than a lifetime total.
// Local reads count only while the key has remote ones to weigh them
// against (remote > 0): a key read only on its own node keeps its byte as
// it is, so local hits, the common case, write nothing. The comparison
// therefore starts at the first sampled remote read; it loses nothing,
// since a key with remote 0 is nowhere near moving.
#ifndef FURRBALLS_ENGINE_FURRBALL_MIGRATE_POLICY_H_
#define FURRBALLS_ENGINE_FURRBALL_MIGRATE_POLICY_H_

#include <cstdint>

namespace furrballs {
namespace furrball_internal {

class SimpleMigratePolicy {
 public:
  static constexpr uint8_t kCounterMax = 15;

  // One Get in kSamplePeriod per thread is counted. A counted Get probes the
  // key again and, if the counters change, writes its slot (a seqlock
  // write, which also makes concurrent readers of the key retry once);
  // counting every Get would put that on every hit. 16 makes it one Get in
  // 16 (docs/engine.md, "Keys follow their readers", has the measurement),
  // while a key read remotely still reaches kMoveRemote after ~128 remote
  // Gets.
  static constexpr uint32_t kSamplePeriod = 16;

  // A key moves when its sampled remote reads reach kMoveRemote and are at
  // least kDominance times its local ones. Why these:
  //  - kMoveRemote = 8 is ~128 remote Gets at the sample period above. A
  //    move costs about one out-of-place Set plus an erase (a few
  //    microseconds); at the 70-140 ns remote penalty of the report's §5.8
  //    it pays back after some tens of remote Gets, so 128 keeps one-off
  //    remote reads from moving a key while a persistent remote reader gets
  //    it soon. It is also half the counter's range, which leaves room for
  //    the dominance test below before decay halves the counts.
  //  - kDominance = 2 is hysteresis against ping-pong. A key read about as
  //    often from two nodes has remote ~= local and never qualifies. After a
  //    move the counts are swapped (AfterMove), so the key arrives with
  //    local >= 8: moving it back needs remote >= 16 before decay, i.e. its
  //    readers must really have changed, not merely fluctuated.
  static constexpr uint8_t kMoveRemote = 8;
  static constexpr uint8_t kDominance = 2;

  static constexpr uint8_t Local(uint8_t b) { return b & 0x0f; }
  static constexpr uint8_t Remote(uint8_t b) { return b >> 4; }
  static constexpr uint8_t Pack(uint8_t local, uint8_t remote) {
    return static_cast<uint8_t>((remote << 4) | (local & 0x0f));
  }

  // The counters after one more sampled read, from the key's node (local)
  // or another node.
  static constexpr uint8_t Record(uint8_t b, bool local) {
    uint8_t l = Local(b);
    uint8_t r = Remote(b);
    if (local && r == 0) return b;
    if ((local ? l : r) == kCounterMax) {
      l >>= 1;
      r >>= 1;
    }
    return local ? Pack(l + 1, r) : Pack(l, r + 1);
  }

  // Whether the key should move to the node of a remote reader.
  static constexpr bool ShouldMove(uint8_t b) {
    return Remote(b) >= kMoveRemote && Remote(b) >= kDominance * Local(b);
  }

  // The counters a key arrives with on the reader's node: the remote reads
  // that moved it are local there, and its old node's reads are remote
  // (exact with 2 nodes; with more, the remote count merges the others).
  static constexpr uint8_t AfterMove(uint8_t b) {
    return Pack(Remote(b), Local(b));
  }
};

}  // namespace furrball_internal
}  // namespace furrballs

#endif  // FURRBALLS_ENGINE_FURRBALL_MIGRATE_POLICY_H_
