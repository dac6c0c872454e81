// engine/furrball/node_shard_cold.cc: the report's compactor with
// ShardConfig::spill_cold_pages (§2.4.1, §2.9.1-§2.9.3): mark ARC's coldest
// keys, migrate them to COLD pages (the worker's batches and every 16th
// Set's cooperative share), and spill or evict sealed COLD pages whole.
//
// Thread safety: all of it runs under the node's reclaim mutex; a Set's
// cooperative migration only try-locks it. The protocol ("Cold pages") is
// at the top of node_shard.h.
#include <cstdint>
#include <optional>

#include "engine/furrball/entry.h"
#include "engine/furrball/node_shard.h"

namespace furrballs {
namespace furrball_internal {
namespace {

// This thread's Sets on cold-page nodes, for cooperative migration (every
// 16th). Per thread, so that the Set path writes no shared cache line.
thread_local uint32_t tls_cold_page_sets = 0;

}  // namespace

void NodeShard::MarkColdKeys() {
  coldest_scratch_.clear();
  arc_->ColdestKeys(kColdWindow, &coldest_scratch_);
  cold_keys_.clear();
  const uint64_t now = NowMs();
  // Coldest last: migration pops from the back.
  for (auto it = coldest_scratch_.rbegin(); it != coldest_scratch_.rend();
       ++it) {
    const std::optional<KeyMeta> m = arc_->Peek(*it);
    if (!m.has_value() || m->Expired(now) || OnColdPage(*m)) continue;
    cold_keys_.push_back(ColdKey{*it, *m});
  }
  stats_.Add(Counter::kColdKeysMarked, cold_keys_.size());
  cold_pending_.store(static_cast<uint32_t>(cold_keys_.size()),
                      std::memory_order_relaxed);
}

NodeShard::Migration NodeShard::MigrateNextColdKey(bool cooperative) {
  const ColdKey& k = cold_keys_.back();
  Migration result = Migration::kSkipped;
  const std::optional<KeyMeta> m = arc_->Peek(k.hash);
  // Changed since marking (written, deleted, moved) or already cold.
  // The header read is a hint for the reservation (m may be stale by now;
  // MoveEntry checks again inside the slot's lock).
  EntryHeader header;
  if (m.has_value() && *m == k.meta && !OnColdPage(*m) &&
      HeaderWithin(*m, &header)) {
    const uint32_t capacity =
        static_cast<uint32_t>(EntryFootprint(header.size));
    Reservation r;
    if (!pool_.ReserveForColdMigration(capacity, /*for_drain=*/false, &r)) {
      return Migration::kNoRoom;
    }
    if (MoveEntry(k.hash, m->page, m->offset(), m->generation, r,
                  Counter::kColdMigrations)) {
      result = Migration::kMoved;
      if (cooperative) stats_.Add(Counter::kColdMigrationsCooperative);
    }
  }
  cold_keys_.pop_back();
  cold_pending_.store(static_cast<uint32_t>(cold_keys_.size()),
                      std::memory_order_relaxed);
  return result;
}

bool NodeShard::ColdStep() {
  // 1. A sealed COLD page (full, or sealed below) goes whole (§2.9.5).
  if (SpillColdPage()) return true;
  // 2. Move ARC's coldest keys to the COLD destination (§2.9.3).
  if (cold_keys_.empty()) MarkColdKeys();
  int moved = 0;
  bool no_room = false;
  while (moved < kColdMigrateBatch && !cold_keys_.empty() && !no_room) {
    switch (MigrateNextColdKey(/*cooperative=*/false)) {
      case Migration::kMoved: ++moved; break;
      case Migration::kSkipped: break;
      case Migration::kNoRoom: no_room = true; break;
    }
  }
  if (moved > 0) return true;
  // 3. Nothing moved: the coldest keys already sit on COLD pages, or no page
  // is free to open another. Seal the open COLD page so that step 1 spills
  // it next.
  uint64_t waste = 0;
  if (pool_.SealColdPage(&waste)) {
    stats_.Add(Counter::kPaddingBytes, waste);
    return true;
  }
  // 4. No COLD page to give up at all: ARC's victims, as without cold pages.
  stats_.Add(Counter::kColdFallbacks);
  return ForceEvictBatch();
}

bool NodeShard::SpillColdPage() {
  uint64_t live = 0;
  const uint32_t page = pool_.FullestSealedPage(PageTier::kCold, &live);
  if (page == kNoPage) return false;
  uint64_t frozen;
  if (!pool_.TryFreeze(page, &frozen)) return false;
  stats_.Add(Counter::kColdPagesSpilled);
  return spill_index_ != nullptr ? SpillFrozen(page, frozen)
                                 : EvictFrozen(page, frozen);
}

void NodeShard::MigrateCooperatively() {
  // §2.9.2 item 3: one cold key per 16 Sets, bounded and never blocking.
  if (cold_pending_.load(std::memory_order_relaxed) == 0) return;
  if ((++tls_cold_page_sets & 15) != 0) return;
  if (!reclaim_mu_.TryLock()) return;
  // A few stale entries may be skipped on the way to one that moves.
  constexpr int kMaxTries = 4;
  for (int i = 0; i < kMaxTries && !cold_keys_.empty(); ++i) {
    const Migration m = MigrateNextColdKey(/*cooperative=*/true);
    if (m != Migration::kSkipped) break;
  }
  reclaim_mu_.Unlock();
}

int NodeShard::CompactColdKeysForTesting(int max_moves) {
  MutexLock l(&reclaim_mu_);
  if (cold_keys_.empty()) MarkColdKeys();
  int moved = 0;
  while (moved < max_moves && !cold_keys_.empty()) {
    const Migration m = MigrateNextColdKey(/*cooperative=*/false);
    if (m == Migration::kNoRoom) break;
    if (m == Migration::kMoved) ++moved;
  }
  return moved;
}

}  // namespace furrball_internal
}  // namespace furrballs
