// engine/furrball/node_shard_move.cc: NodeShard's part of moving a key to
// the node that reads it (key_mover.h has the protocol): the locality
// counters of a sampled read, and the copy, insert and erase of a move.
//
// Thread safety: RecordRead runs on any thread with no lock; the others
// require the key's write lock (the mover holds it).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "engine/furrball/entry.h"
#include "engine/furrball/migrate_policy.h"
#include "engine/furrball/node_shard.h"

namespace furrballs {
namespace furrball_internal {

bool NodeShard::RecordRead(const HashPair& h, bool local) {
  using Policy = SimpleMigratePolicy;
  // The probe first: most samples of a purely local key change nothing
  // (Policy::Record), and then nothing is written.
  const std::optional<KeyMeta> seen = arc_->Peek(h);
  if (!seen.has_value()) return false;
  const uint8_t before = static_cast<uint8_t>(seen->locality);
  if (Policy::Record(before, local) == before) {
    return !local && Policy::ShouldMove(before);
  }
  bool move = false;
  // Not a reference for ARC: the Get that sampled it already noted one.
  // A busy slot (kAbandonedSet) or a key gone since the probe drops the
  // sample: counting is statistical.
  arc_->UpdateInPlaceWithoutHit(h, [&](KeyMeta& m) {
    m.locality = Policy::Record(static_cast<uint8_t>(m.locality), local);
    move = !local && Policy::ShouldMove(static_cast<uint8_t>(m.locality));
  });
  return move;
}

bool NodeShard::CopyForMove(const HashPair& h, std::string* payload,
                            KeyMeta* meta) {
  const uint64_t now = NowMs();
  for (;;) {
    bool movable = false;
    // The Get protocol (node_shard.h): copy inside the seqlock read, so the
    // bytes are the image the KeyMeta names. Under the key lock only movers
    // within this node (same bytes, new place) and evictors change it.
    const Arc::VisitOutcome outcome =
        arc_->TryVisit(h, /*promote=*/false, [&](const KeyMeta& m) {
          movable = false;
          *meta = m;
          if (m.Expired(now)) return;
          EntryHeader header;
          if (!HeaderWithin(m, &header)) return;  // stale: seq check fails
          if (header.kind != EntryKind::kValue) return;
          payload->resize(PortableSize(header));
          CopyPortable(pool_.EntryAt(m.page, m.offset()), header,
                       payload->data());
          movable = true;
        });
    if (outcome == Arc::VisitOutcome::kChanged) continue;
    return outcome == Arc::VisitOutcome::kVisited && movable;
  }
}

Error NodeShard::InsertMoved(const HashPair& h, std::string_view payload,
                             const KeyMeta& meta) {
  const Error err = InsertReloaded(
      h, payload, meta.version, meta.expiry_ms,
      SimpleMigratePolicy::AfterMove(static_cast<uint8_t>(meta.locality)));
  if (err == Error::kOk) stats_.Add(Counter::kMigrationsIn);
  return err;
}

bool NodeShard::EraseMoved(const HashPair& h) {
  for (;;) {
    KeyMeta erased;
    const Error err = arc_->Erase(h, &erased);
    // The slot's holder is a relocation or a sampled read's counter update
    // (writers of the key wait for the lock we hold): both finish at once.
    if (err == Error::kAbandonedSet) continue;
    if (err != Error::kOk) return false;
    AccountRemoved(erased);
    stats_.Add(Counter::kMigrationsOut);
    return true;
  }
}

}  // namespace furrball_internal
}  // namespace furrballs
