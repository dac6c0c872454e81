// engine/furrball/node_shard_spill.cc: NodeShard's spill-tier glue (docs/spill.md):
// whole-page spills, ghost-hit reloads, the index sweep and warm restart.
// The protocols are at the top of node_shard.h; this file only holds the
// spill tier's share of NodeShard's member functions.
#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/furrball/entry.h"
#include "engine/furrball/furrball_testing.h"
#include "engine/furrball/node_shard.h"
#include "engine/furrball/node_shard_internal.h"
#include "engine/spill/page_blob.h"
#include "engine/spill/spill_store.h"

namespace furrballs {
namespace furrball_internal {

bool NodeShard::SpillSparsestPage() {
  uint64_t live = 0;
  const uint32_t page = pool_.SparsestSealedPage(&live);
  if (page == kNoPage || live == 0) return false;
  uint64_t frozen;
  if (!pool_.TryFreeze(page, &frozen)) return false;
  return SpillFrozen(page, frozen);
}

bool NodeShard::SpillFrozen(uint32_t page, uint64_t frozen) {
  spill::SpillStore& store = *config_.spill_store;
  const uint32_t generation =
      pool_.page(page).generation.load(std::memory_order_relaxed);
  const uint64_t now = NowMs();
  const uint64_t page_id = store.NewPageId();
  spill::PageBlobBuilder blob(static_cast<uint32_t>(config_.node_index),
                              page_id, now);
  struct Candidate {
    HashPair hash;
    KeyMeta meta;
  };
  std::vector<Candidate> candidates;
  std::string portable;  // an entry's portable form (entry.h)
  ForEachKeyedEntry(page, frozen, [&](uint32_t offset, const EntryHeader&,
                                      const HashPair& h) {
    const std::optional<KeyMeta> m = arc_->Peek(h);
    if (!m.has_value() || !PointsAt(*m, page, offset, generation)) {
      return true;  // dead entry
    }
    if (m->Expired(now)) {
      ReclaimIfExpired(h, page, offset, generation, now);
      return true;
    }
    // Frozen pages still take in-place overwrites; a copy that raced one
    // is skipped (the key then stays in memory): the size is read again
    // with the bytes, and an overwrite that wrote either changed the
    // version the second Peek compares.
    const EntryHeader header = HeaderOf(*m);
    portable.resize(PortableSize(header));
    CopyPortable(pool_.EntryAt(page, offset), header, portable.data());
    const std::optional<KeyMeta> again = arc_->Peek(h);
    if (!again.has_value() || !(*again == *m)) return true;
    std::memcpy(blob.Add(h, m->version, m->expiry_ms, portable.size()),
                portable.data(), portable.size());
    candidates.push_back({h, *m});
    return true;
  });
  if (!candidates.empty()) {
    const std::string bytes = blob.Finish();
    const absl::Status put =
        store.Put(config_.node_index, page_id, bytes);
    if (!put.ok()) {
      // The disk failed: keep serving from memory; the caller evicts.
      stats_.Add(Counter::kSpillErrors);
      pool_.FinishFreeze(page, frozen);
      return false;
    }
    stats_.Add(Counter::kSpillPages);
    stats_.Add(Counter::kSpillBytes, bytes.size());
    uint64_t indexed = 0;
    for (const Candidate& c : candidates) {
      // Try-lock only (see ReclaimIfExpired). Holding the key lock, no
      // writer can change the key between the check and the index entry.
      ParkingLock& lock = HomeKeyLock(c.hash);
      if (!lock.try_lock()) continue;
      const std::optional<KeyMeta> m = arc_->Peek(c.hash);
      if (m.has_value() && *m == c.meta) {
        const SpilledKey entry{page_id, c.meta.version, c.meta.expiry_ms};
        spill_index_->Add(c.hash, entry);  // before the erase: no miss window
        if (EraseAndAccount(c.hash, Counter::kSpilledKeys)) {
          ++indexed;
        } else if (arc_->Peek(c.hash).has_value()) {
          // Still in memory (its slot stayed busy): memory keeps it.
          spill_index_->TakeIf(c.hash, entry);
        } else {
          // An ARC eviction took it meanwhile, as the same version (we hold
          // its key lock): this page's copy is as good as the victim's,
          // whose entry ours replaced; keep it.
          ++indexed;
        }
      }
      lock.unlock();
    }
    if (indexed == 0) store.Delete(config_.node_index, page_id).IgnoreError();
  }
  const bool recycled = pool_.FinishFreeze(page, frozen);
  if (recycled) stats_.Add(Counter::kPagesRecycled);
  return recycled;
}

GetResult NodeShard::ReloadPage(uint64_t page_id, const HashPair& wanted,
                                const SpilledKey& wanted_entry,
                                std::string* wanted_value) {
  GetResult wanted_result;
  // The read holds no lock: other keys of the node are served meanwhile. A
  // page still being assembled from ARC victims is read from memory.
  std::optional<std::string> pending;
  {
    MutexLock l(&batch_mu_);
    if (batch_ != nullptr && batch_page_id_ == page_id) {
      pending = batch_->Finish();
    } else {
      for (const SealedBatch& b : sealed_) {
        if (b.page_id == page_id) pending = *b.bytes;
      }
    }
  }
  if (const EngineTestHooks* t = TestHooks();
      t != nullptr && t->reload_read != nullptr) {
    t->reload_read(wanted);
  }
  const absl::StatusOr<std::string> bytes =
      pending.has_value()
          ? absl::StatusOr<std::string>(*std::move(pending))
          : config_.spill_store->Get(config_.node_index, page_id);
  absl::StatusOr<spill::PageBlobView> blob =
      bytes.ok() ? spill::DecodePageBlob(*bytes)
                 : absl::StatusOr<spill::PageBlobView>(bytes.status());
  if (blob.ok() && (blob->node != static_cast<uint32_t>(config_.node_index) ||
                    blob->page_id != page_id)) {
    blob = absl::DataLossError("a page blob of another node or page");
  }
  if (!blob.ok()) {
    // Gone (removed for the disk budget) or unreadable: the key is a miss
    // from now on. Never serve what fails its checksum.
    if (!absl::IsNotFound(blob.status())) stats_.Add(Counter::kSpillErrors);
    ParkingLockHolder l(HomeKeyLock(wanted));
    spill_index_->TakeIf(wanted, wanted_entry);
    return wanted_result;
  }
  stats_.Add(Counter::kSpillReloads);
  const uint64_t now = NowMs();
  for (const spill::PageBlobEntry& e : blob->entries) {
    if (!config_.spill_reload_whole_page && !(e.hash == wanted)) continue;
    ParkingLockHolder l(HomeKeyLock(e.hash));
    SpilledKey entry;
    // Only the exact copy the index still names comes back: a key written or
    // deleted since the spill has no entry (or a newer one).
    if (!spill_index_->Lookup(e.hash, &entry) || entry.page_id != page_id ||
        entry.version != e.version) {
      continue;
    }
    if (entry.Expired(now) || arc_->Peek(e.hash).has_value()) {
      spill_index_->TakeIf(e.hash, entry);
      continue;
    }
    if (e.hash == wanted) {
      // Under the key lock, with the index naming this very copy: this is
      // the key's newest acknowledged value now.
      const std::string_view v = blob->Value(e);
      wanted_value->assign(v.data(), v.size());
      wanted_result.found = true;
      wanted_result.version = e.version;
      wanted_result.ttl_remaining_ms =
          entry.expiry_ms == 0 ? 0 : entry.expiry_ms - now;
    }
    if (InsertReloaded(e.hash, blob->Value(e), e.version, entry.expiry_ms) ==
        Error::kOk) {
      spill_index_->TakeIf(e.hash, entry);
      stats_.Add(Counter::kSpillReloadedKeys);
    }
  }
  return wanted_result;
}

Error NodeShard::InsertReloaded(const HashPair& h, std::string_view portable,
                                uint64_t version, uint64_t expiry_ms,
                                uint8_t locality) {
  std::string_view key, value;
  EntryKind kind;
  if (!SplitPortable(portable, &key, &value, &kind)) {
    return Error::kStorageCorrupt;
  }
  const uint32_t size =
      static_cast<uint32_t>(PayloadSize(key.size(), value.size()));
  const uint32_t capacity = static_cast<uint32_t>(EntryFootprint(size));
  for (;;) {
    Reservation r;
    const Error reserve_err = Reserve(capacity, &r);
    if (reserve_err != Error::kOk) return reserve_err;
    stats_.Add(Counter::kPaddingBytes, capacity - kEntryHeaderBytes - size);
    WriteKeyedEntry(pool_.EntryAt(r.page, r.offset), key, value, capacity,
                    kind);
    KeyMeta fresh{.version = version,
                  .expiry_ms = std::min(expiry_ms, kMaxExpiryMs),
                  .offset_words = KeyMeta::OffsetWords(r.offset),
                  .page = r.page,
                  .generation = r.generation & kGenerationMask};
    fresh.locality = locality;
    if (!config_.eviction_enabled &&
        resident_keys_.fetch_add(1, std::memory_order_relaxed) >=
            static_cast<int64_t>(arc_->capacity())) {
      resident_keys_.fetch_sub(1, std::memory_order_relaxed);
      pool_.EndWrite(r.page);
      return Error::kNoMemory;
    }
    const CMapSetResult sr = arc_->Set(h, fresh);
    DrainVictims();
    if (sr.err == Error::kOk) {
      pool_.Publish(r.page, capacity);
      pool_.EndWrite(r.page);
      stats_.Add(Counter::kLiveKeys);
      stats_.Add(Counter::kLiveBytes, size);
      if (expiry_ms != 0) has_ttl_keys_.store(true, std::memory_order_relaxed);
      return Error::kOk;
    }
    pool_.EndWrite(r.page);
    if (!config_.eviction_enabled) {
      resident_keys_.fetch_sub(1, std::memory_order_relaxed);
    }
    if (sr.err != Error::kAbandonedSet) return sr.err;
  }
}

void NodeShard::SweepSpillIndex() {
  spill_index_->MarkPagesGone(
      config_.spill_store->TakeRemovedPages(config_.node_index));
  // A slice per pass: the whole index is looked at every size/kSlice passes.
  constexpr size_t kSlice = 1024;
  const uint64_t now = NowMs();
  for (const auto& [h, key] :
       spill_index_->FindStale(now, kSlice, &sweep_cursor_)) {
    // Try-lock only (the reclaim mutex holder never waits for a key lock);
    // a key whose lock is busy is met again next round.
    ParkingLock& lock = HomeKeyLock(h);
    if (!lock.try_lock()) continue;
    if (spill_index_->TakeIf(h, key) && key.Expired(now)) {
      stats_.Add(Counter::kTtlExpirations);
    }
    lock.unlock();
  }
}

void NodeShard::DeleteDeadSpillPages() {
  // Keys are indexed under a page id again after all of its keys left only
  // while it is the victim batch (any thread's OnEvict may add to it), and
  // a page is written only as the batch, once sealed. So a dead page that
  // is neither the batch nor sealed and unwritten has no keys for good; one
  // that is comes back to the dead list for a later pass, so that its blob
  // is deleted once written.
  for (uint64_t page_id : spill_index_->TakeDeadPages()) {
    bool busy;
    {
      MutexLock l(&batch_mu_);
      busy = IsUnwrittenBatchLocked(page_id);
    }
    if (spill_index_->HasKeys(page_id)) continue;
    if (busy) {
      spill_index_->RequeueDeadPage(page_id);
      continue;
    }
    config_.spill_store->Delete(config_.node_index, page_id).IgnoreError();
  }
}

void NodeShard::SpillAllForShutdown() {
  if (spill_index_ == nullptr) return;
  FlushVictimBatch(/*force=*/true);
  MutexLock l(&reclaim_mu_);
  pool_.SealStaging();
  uint64_t waste = 0;
  pool_.SealOpenPagesForReclaim(&waste);
  for (uint32_t page = 0; page < config_.page_count; ++page) {
    uint64_t frozen;
    if (!pool_.TryFreeze(page, &frozen)) continue;
    SpillFrozen(page, frozen);
  }
  DeleteDeadSpillPages();
}

std::vector<std::pair<HashPair, SpilledKey>> NodeShard::SpilledKeys() const {
  if (spill_index_ == nullptr) return {};
  return spill_index_->Snapshot();
}

void NodeShard::RestoreSpilled(
    const std::vector<std::pair<HashPair, SpilledKey>>& keys,
    uint64_t max_version) {
  for (const auto& [h, key] : keys) {
    ParkingLockHolder l(HomeKeyLock(h));
    spill_index_->Add(h, key);
  }
  uint64_t next = next_version_.value.load(std::memory_order_relaxed);
  if (max_version + 1 > next) {
    next_version_.value.store(max_version + 1, std::memory_order_relaxed);
  }
}

}  // namespace furrball_internal
}  // namespace furrballs
