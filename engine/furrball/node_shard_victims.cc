// engine/furrball/node_shard_victims.cc: what happens to a KeyMeta that
// leaves its slot: the accounting of the removed entry, ARC's eviction
// callback, the worker's forced evictions, and, with the spill tier, ARC's
// victims in transit to the spill batch (claim, drain, settle) and the
// batch's hand-over to the node's spill writer thread, which writes it.
//
// Thread safety: OnEvict runs under ARC's SpinLock and neither blocks nor
// allocates; the victim slots follow the "ARC victims" protocol at the top
// of node_shard.h (states FREE -> PENDING -> DRAINING -> FREE, with the
// memory orders written at each transition below); batch_mu_ is a leaf
// held only for in-memory work (a thread waiting for the spill writer
// waits on batch_cv_, which releases it).
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "engine/furrball/entry.h"
#include "engine/furrball/furrball_testing.h"
#include "engine/furrball/node_shard.h"
#include "engine/furrball/node_shard_internal.h"
#include "engine/spill/page_blob.h"
#include "engine/spill/spill_store.h"

namespace furrballs {
namespace furrball_internal {
namespace {

// Why the eviction callback is running on this thread: ARC's own REPLACE
// inside Set (the key table was full) unless a reclaimer said otherwise.
thread_local Counter tls_eviction_reason = Counter::kEvictionsKeys;
// Set by the worker's reserve refill while it asks ARC for victims with the
// spill tier on: OnEvict then sends each victim to the spill batch.
thread_local bool tls_spill_victims = false;

class EvictionReason {
 public:
  explicit EvictionReason(Counter reason) : saved_(tls_eviction_reason) {
    tls_eviction_reason = reason;
  }
  ~EvictionReason() { tls_eviction_reason = saved_; }

 private:
  Counter saved_;
};

}  // namespace

void NodeShard::AccountRemoved(const KeyMeta& m) {
  // Read before the Unpublish: once the page's live word drops, the page
  // may be recycled and the header overwritten.
  const EntryHeader header = HeaderOf(m);
  pool_.Unpublish(m.page, header.capacity);
  stats_.AddSigned(Counter::kLiveKeys, -1);
  stats_.AddSigned(Counter::kLiveBytes, -int64_t{header.size});
  if (!config_.eviction_enabled) {
    resident_keys_.fetch_sub(1, std::memory_order_relaxed);
  }
}

void NodeShard::OnEvict(const HashPair& h, const KeyMeta& m) {
  // Runs under ARC's SpinLock: nothing here may block or allocate. With the
  // spill tier the victim only gets a transit slot (see "ARC victims" in
  // node_shard.h); the evicting thread copies and indexes it once ARC's
  // lock is released (DrainVictims). Its entry stays published until then,
  // so its page, and the bytes, cannot be recycled meanwhile.
  // The key table's growth rule looks for these, wherever the victim goes
  // (a relaxed add to this thread's statistics shard: no blocking).
  if (tls_eviction_reason == Counter::kEvictionsKeys) {
    stats_.Add(Counter::kKeyTableFull);
  }
  if (spill_index_ != nullptr) {
    // Only evictors claim slots, and they all hold ARC's lock: no two claim
    // at once. The acquire load pairs with the release store that freed the
    // slot, so the drainer's reads of it are done before we overwrite it.
    for (VictimSlot& slot : victims_) {
      if (slot.state.load(std::memory_order_acquire) != kSlotFree) continue;
      slot.h2.store(h.h2, std::memory_order_relaxed);
      slot.meta = m;
      slot.from_worker = tls_spill_victims;
      slot.reason = tls_eviction_reason;
      victims_pending_.fetch_add(1, std::memory_order_relaxed);
      // Publishes meta and the flags to the drainer's acquire CAS.
      slot.state.store(kSlotPending, std::memory_order_release);
      return;
    }
    // Every slot is taken (evictions outran their drains): the victim is
    // dropped, as any eviction without a spill tier.
  }
  AccountRemoved(m);
  stats_.Add(m.Expired(NowMs()) ? Counter::kTtlExpirations
                                : tls_eviction_reason);
}

bool NodeShard::DrainVictimSlot(VictimSlot& slot) {
  uint32_t pending = kSlotPending;
  // Acquire: pairs with OnEvict's release store, so meta is the victim's.
  if (!slot.state.compare_exchange_strong(pending, kSlotDraining,
                                          std::memory_order_acquire,
                                          std::memory_order_relaxed)) {
    return false;
  }
  const uint64_t h2 = slot.h2.load(std::memory_order_relaxed);
  const KeyMeta m = slot.meta;
  // ARC named the victim by h2 alone (its table key); the spill index and
  // the blob key by the whole HashPair, which the key stored in the entry
  // gives (its bytes are stable: see AddVictimLocked). An entry written
  // under another hash than its key's (a test's forced collision) is
  // dropped, not spilled: no lookup of its key would find it under h2.
  std::string key;
  const std::optional<HashPair> stored =
      StoredHash(m.page, m.offset(), HeaderOf(m), &key);
  const bool named = stored.has_value() && stored->h2 == h2;
  const HashPair h = named ? *stored : ArcTableKey(h2);
  if (const EngineTestHooks* t = TestHooks();
      t != nullptr && t->victim_erased != nullptr) {
    t->victim_erased(h);
  }
  // The worker's victims always go to the batch. A writer's (its insert
  // made ARC evict: a full key table) only while the batch is under two
  // pages: the writer flushes it afterwards, and must not let it grow
  // without bound when the flushes fall behind.
  bool batched = false;
  if (named) {
    MutexLock l(&batch_mu_);
    batched = slot.from_worker || batch_ == nullptr ||
              batch_->data_bytes() < 2 * uint64_t{pool_.page_size()};
    if (batched) AddVictimLocked(h, m);
  }
  AccountRemoved(m);
  stats_.Add(batched ? Counter::kSpilledKeys
                     : m.Expired(NowMs()) ? Counter::kTtlExpirations
                                          : slot.reason);
  // Release: a settler that sees the slot free (acquire) sees the index
  // entry, and the next claimer's writes come after our reads.
  slot.state.store(kSlotFree, std::memory_order_release);
  // Release, after the slot is free: a settler whose acquire load reads
  // zero sees every drain done (the decrements form one release sequence).
  victims_pending_.fetch_sub(1, std::memory_order_release);
  return true;
}

void NodeShard::DrainVictims() {
  if (victims_pending_.load(std::memory_order_relaxed) == 0) return;
  for (VictimSlot& slot : victims_) DrainVictimSlot(slot);
}

bool NodeShard::SettleVictim(const HashPair& h) {
  if (spill_index_ == nullptr) return false;
  // Every eviction of h that started before now has claimed its slot once
  // ARC's critical section is over; the lock hand-over orders the claim's
  // (relaxed) writes before our loads.
  arc_->WaitForEvictionsInFlight();
  if (victims_pending_.load(std::memory_order_acquire) == 0) return false;
  bool found = false;
  for (VictimSlot& slot : victims_) {
    for (;;) {
      const uint32_t state = slot.state.load(std::memory_order_acquire);
      // h2 is all a slot knows of its victim (ARC's name for it).
      if (state == kSlotFree ||
          slot.h2.load(std::memory_order_relaxed) != h.h2) {
        break;
      }
      found = true;
      if (state == kSlotPending) {
        DrainVictimSlot(slot);
      } else {
        // Another thread is indexing it: memory copies under batch_mu_ and
        // the index's mutexes, never a wait for a key lock.
        std::this_thread::yield();
      }
    }
  }
  return found;
}

void NodeShard::AddVictimLocked(const HashPair& h, const KeyMeta& m) {
  // Runs after the victim left the table and before its entry is
  // unpublished. Its bytes are stable: a page is recycled only once its live
  // bytes are zero, and this entry's are still counted until the drain's
  // AccountRemoved; no in-place writer can reach an entry whose KeyMeta is
  // gone.
  if (batch_ == nullptr) {
    batch_page_id_ = config_.spill_store->NewPageId();
    batch_ = std::make_unique<spill::PageBlobBuilder>(
        static_cast<uint32_t>(config_.node_index), batch_page_id_, NowMs());
  }
  const EntryHeader header = HeaderOf(m);
  CopyPortable(pool_.EntryAt(m.page, m.offset()), header,
               batch_->Add(h, m.version, m.expiry_ms, PortableSize(header)));
  spill_index_->Add(h, SpilledKey{batch_page_id_, m.version, m.expiry_ms});
  if (batch_->data_bytes() >= pool_.page_size()) {
    batch_full_.store(true, std::memory_order_relaxed);
  }
}

void NodeShard::FlushVictimBatchIfFull() {
  if (!batch_full_.load(std::memory_order_relaxed)) return;
  FlushVictimBatch(/*force=*/false);
}

void NodeShard::FlushVictimBatch(bool force) {
  // Only memory work here: the blob is written by the spill writer thread,
  // so that no caller (a gRPC thread in direct mode, the worker, a reload
  // thread) waits for the disk unless the writer is kMaxSealedBatches
  // behind. batch_mu_ is released while waiting: victims keep joining the
  // batch meanwhile.
  MutexLock l(&batch_mu_);
  for (;;) {
    if (batch_ == nullptr) break;
    if (!force && batch_->data_bytes() < pool_.page_size()) return;
    if (sealed_.size() < kMaxSealedBatches) {
      sealed_.push_back(SealedBatch{
          batch_page_id_,
          std::make_shared<const std::string>(batch_->Finish())});
      batch_.reset();
      batch_full_.store(false, std::memory_order_relaxed);
      batch_cv_.SignalAll();
      break;
    }
    batch_cv_.Wait(&batch_mu_);
  }
  while (force && !sealed_.empty()) batch_cv_.Wait(&batch_mu_);
}

void NodeShard::RunSpillWriter() {
  for (;;) {
    SealedBatch next;
    {
      MutexLock l(&batch_mu_);
      while (sealed_.empty() && !writer_stop_) batch_cv_.Wait(&batch_mu_);
      // At stop, what is queued is still written: a forced flush may be
      // waiting for it.
      if (sealed_.empty()) return;
      next = sealed_.front();
    }
    WriteSealedBatch(next.page_id, *next.bytes);
    {
      MutexLock l(&batch_mu_);
      sealed_.pop_front();
    }
    batch_cv_.SignalAll();
  }
}

void NodeShard::WriteSealedBatch(uint64_t page_id, const std::string& bytes) {
  // Every key of the batch may have left it already (overwritten, deleted,
  // reloaded): then there is nothing to write.
  if (!spill_index_->HasKeys(page_id)) return;
  if (const EngineTestHooks* t = TestHooks();
      t != nullptr && t->victim_batch_write != nullptr) {
    t->victim_batch_write(page_id);
  }
  const absl::Status put =
      config_.spill_store->Put(config_.node_index, page_id, bytes);
  if (put.ok()) {
    stats_.Add(Counter::kSpillPages);
    stats_.Add(Counter::kSpillBytes, bytes.size());
  } else {
    // The keys are indexed under a page the store does not have: their
    // reloads miss (and drop the entries). Never a wrong value.
    stats_.Add(Counter::kSpillErrors);
  }
}

bool NodeShard::IsUnwrittenBatchLocked(uint64_t page_id) const {
  if (batch_ != nullptr && batch_page_id_ == page_id) return true;
  for (const SealedBatch& b : sealed_) {
    if (b.page_id == page_id) return true;
  }
  return false;
}

bool NodeShard::EraseAndAccount(const HashPair& h, Counter reason) {
  for (int i = 0; i < kBusyRetries; ++i) {
    KeyMeta erased;
    const Error err = arc_->Erase(h, &erased);
    if (err == Error::kAbandonedSet) continue;
    if (err != Error::kOk) return false;
    AccountRemoved(erased);
    stats_.Add(reason);
    return true;
  }
  return false;
}

bool NodeShard::ShrinkStep() {
  EvictionReason reason(Counter::kEvictionsCapacity);
  tls_spill_victims = spill_index_ != nullptr;
  const size_t step =
      spill_index_ != nullptr ? kVictimSlots : kGrowMovesPerPass;
  bool done = false;
  for (size_t moved = 0; moved < kGrowMovesPerPass && !done; moved += step) {
    done = arc_->GrowStep(step);
    DrainVictims();
  }
  tls_spill_victims = false;
  if (spill_index_ != nullptr) FlushVictimBatch(/*force=*/false);
  return done;
}

bool NodeShard::ForceEvictBatch() {
  // No page is sparse enough: let ARC pick victims (§2.10.1 ForceEvictOne)
  // so that a later drain has dead bytes to reclaim. With the spill tier the
  // victims are not dropped: they are copied into the spill batch, a page
  // image of keys that went cold together (the report's COLD page, §2.9.1),
  // written whole once it is a page long (§2.9.5).
  constexpr int kEvictBatch = 64;
  EvictionReason reason(Counter::kEvictionsCapacity);
  tls_spill_victims = spill_index_ != nullptr;
  bool evicted = true;
  for (int i = 0; i < kEvictBatch && evicted; ++i) {
    const ForcedEviction<KeyMeta> e = arc_->ForceEvictOne();
    evicted = e.err != Error::kKeyNotFound;  // else nothing left to evict
    DrainVictims();
  }
  tls_spill_victims = false;
  if (spill_index_ != nullptr) FlushVictimBatch(/*force=*/false);
  return evicted;
}

}  // namespace furrball_internal
}  // namespace furrballs
