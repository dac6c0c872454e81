// engine/furrball/spill_index.h: SpillIndex, one node's evictedKeyIndex
// (report §2.9.5-§2.9.6): for every key whose only copy is in the spill
// store, the page it was spilled with and the version and expiry it had.
//
// Thread safety: thread-safe (16 mutex-guarded shards by hash, and one
// mutex for the per-page counts).
//
// Protocol (no resurrection). Every change to a key's entry happens under
// the key's write lock, the same lock every Set/Delete/Touch holds:
//   spill    Add(h) while the key's KeyMeta still points at the page being
//            spilled, then erase the KeyMeta (add-before-erase: a Get in
//            between still finds the key in memory).
//   write    Set/Delete remove the entry (Take) before they acknowledge, so
//            an older spilled copy can never be reloaded after them.
//   victim   an ARC victim is the one entry added without its key lock: it
//            is erased from the table under ARC's lock and indexed just
//            after it (node_shard.h, "ARC victims"). A writer's Peek and
//            Lookup may fall between the two and see the key nowhere; so a
//            writer that then inserts has the victim indexed
//            (NodeShard::SettleVictim) and removes any entry older than its
//            write (TakeIfOlder), and Delete settles after its Erase and
//            before it looks at the index. A conditional Set, a Touch or a
//            Get that finds the key in neither place settles and looks
//            again before deciding.
//   reload   re-inserts the key only if the entry is still exactly the one
//            the blob was read for (same page id and version), then removes
//            it. Insert first: a Get that missed in memory and then finds
//            no entry looks in memory again, and finds the key.
// So under the key lock a key is in memory or in the index, never both, and
// a reload can only bring back the newest acknowledged value. Readers
// (Lookup) take no key lock; what they see only decides whether to try a
// reload, and the reload re-checks under the lock.
//
// Stale entries (expired, or of a page the store removed for its disk
// budget) are answered as absent or miss on reload. They are dropped when a
// writer or a reload meets them, and otherwise by the node's worker, which
// sweeps the index a slice at a time (FindStale) and removes each stale
// entry with TakeIf under the key's lock, like any other change, so a
// sweep never removes an entry a writer replaced meanwhile. Without the
// sweep, keys spilled once and never asked for again would keep their
// entries forever.
#ifndef FURRBALLS_ENGINE_FURRBALL_SPILL_INDEX_H_
#define FURRBALLS_ENGINE_FURRBALL_SPILL_INDEX_H_

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include <absl/base/thread_annotations.h>

#include "engine/common/hash_pair.h"
#include "engine/common/sync.h"

namespace furrballs {
namespace furrball_internal {

struct SpilledKey {
  uint64_t page_id = 0;
  uint64_t version = 0;
  uint64_t expiry_ms = 0;  // 0 = never

  bool Expired(uint64_t now) const { return expiry_ms != 0 && now >= expiry_ms; }
  friend bool operator==(const SpilledKey&, const SpilledKey&) = default;
};

class SpillIndex {
 public:
  // Entries, over all shards. A writer that must see an entry holds the key
  // lock the entry was added under, which orders it. Acquire, pairing with
  // the release of every removal: a Lookup that finds the index empty has
  // seen what the remover did before (a reload's insert into memory, which
  // a Get that misses in the index then finds, NodeShard::Get).
  size_t size() const { return size_.load(std::memory_order_acquire); }

  bool Lookup(const HashPair& h, SpilledKey* out) const;
  // REQUIRES: h's key lock. Replaces any entry h had.
  void Add(const HashPair& h, const SpilledKey& key);
  // REQUIRES: h's key lock. Removes h's entry if any (returning it).
  bool Take(const HashPair& h, SpilledKey* out = nullptr);
  // REQUIRES: h's key lock. Removes h's entry only if it equals `expected`.
  bool TakeIf(const HashPair& h, const SpilledKey& expected);
  // REQUIRES: h's key lock. Removes h's entry only if its version is below
  // `version` (a write of that version is in memory now).
  bool TakeIfOlder(const HashPair& h, uint64_t version);
  // REQUIRES: h's key lock. Sets the expiry of h's entry; false if none.
  bool SetExpiry(const HashPair& h, uint64_t expiry_ms);

  // Pages none of whose keys were indexed at some point since the last
  // call: their blobs can go unless keys were indexed under them again
  // since (a page still being assembled can be), which HasKeys tells.
  std::vector<uint64_t> TakeDeadPages();
  bool HasKeys(uint64_t page_id);
  // Puts a page TakeDeadPages returned back on the dead list (its blob could
  // not be deleted yet), unless keys were indexed under it since.
  void RequeueDeadPage(uint64_t page_id);

  // The store removed these pages (disk budget): their entries are stale.
  void MarkPagesGone(const std::vector<uint64_t>& page_ids);
  // Where a sweep stopped; owned by the one thread that sweeps.
  struct SweepCursor {
    size_t shard = 0;
    size_t bucket = 0;
  };
  // Looks at up to `max_entries` entries from *cursor on (wrapping around)
  // and returns the stale ones: expired at `now_ms`, or of a gone page.
  // Nothing is removed; the caller takes each with TakeIf under its key
  // lock. Returns at once when no entry can be stale.
  std::vector<std::pair<HashPair, SpilledKey>> FindStale(uint64_t now_ms,
                                                         size_t max_entries,
                                                         SweepCursor* cursor);

  // Every entry, for the warm-restart manifest. Not atomic with writers;
  // call when no writer runs.
  std::vector<std::pair<HashPair, SpilledKey>> Snapshot() const;

 private:
  struct HashOfPair {
    size_t operator()(const HashPair& h) const { return h.h1 ^ (h.h2 << 1); }
  };
  struct alignas(64) Shard {
    mutable Mutex mu;
    std::unordered_map<HashPair, SpilledKey, HashOfPair> keys
        ABSL_GUARDED_BY(mu);
  };
  static constexpr size_t kShards = 16;

  Shard& ShardOf(const HashPair& h) { return shards_[h.h2 % kShards]; }
  const Shard& ShardOf(const HashPair& h) const {
    return shards_[h.h2 % kShards];
  }
  void Retain(uint64_t page_id);
  void Release(uint64_t page_id);
  // Counts entries with an expiry (FindStale's early exit).
  void NoteExpiry(uint64_t old_expiry_ms, uint64_t new_expiry_ms) {
    expiring_.fetch_add(int64_t{new_expiry_ms != 0} - int64_t{old_expiry_ms != 0},
                        std::memory_order_relaxed);
  }

  std::array<Shard, kShards> shards_;
  std::atomic<size_t> size_{0};
  std::atomic<int64_t> expiring_{0};  // entries with expiry_ms != 0
  Mutex pages_mu_;
  std::unordered_map<uint64_t, uint32_t> page_keys_ ABSL_GUARDED_BY(pages_mu_);
  std::vector<uint64_t> dead_pages_ ABSL_GUARDED_BY(pages_mu_);
  // Pages removed from the store that still have entries.
  std::unordered_set<uint64_t> gone_pages_ ABSL_GUARDED_BY(pages_mu_);
};

}  // namespace furrball_internal
}  // namespace furrballs

#endif  // FURRBALLS_ENGINE_FURRBALL_SPILL_INDEX_H_
