#include "engine/furrball/key_mover.h"

#include <string>

#include "engine/furrball/key_meta.h"
#include "engine/furrball/migrate_policy.h"

namespace furrballs {
namespace furrball_internal {
namespace {

// This thread's turn to count a read (one in kSamplePeriod).
bool SampleThisRead() {
  thread_local uint32_t countdown = SimpleMigratePolicy::kSamplePeriod;
  if (--countdown != 0) return false;
  countdown = SimpleMigratePolicy::kSamplePeriod;
  return true;
}

}  // namespace

bool KeyMover::OnRead(const HashPair& h, NodeShard& holder, NodeShard* reader,
                      ParkingLock& key_lock) {
  if (reader == nullptr || !SampleThisRead()) return false;
  if (!holder.RecordRead(h, reader == &holder)) return false;
  // Never wait for a writer: a later sample moves a key that is busy now.
  if (!key_lock.try_lock()) return false;
  const bool moved = Move(h, holder, *reader);
  key_lock.unlock();
  return moved;
}

bool KeyMover::Move(const HashPair& h, NodeShard& from, NodeShard& to) {
  // Reused: a move allocates only when a value is larger than any before
  // on this thread. The key lock is a ParkingLock, not a spin lock.
  thread_local std::string payload;
  KeyMeta meta;
  if (!from.CopyForMove(h, &payload, &meta)) return false;
  if (to.InsertMoved(h, payload, meta) != Error::kOk) return false;
  // Between the insert and the erase (see "Readers" in the header).
  StripeOf(h).fetch_add(1, std::memory_order_release);
  from.EraseMoved(h);
  return true;
}

}  // namespace furrball_internal
}  // namespace furrballs
