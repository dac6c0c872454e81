#include "engine/furrball/node_shard.h"

#include <algorithm>
#include <atomic>
#include <cassert>
#include <cstring>
#include <chrono>
#include <new>
#include <thread>
#include <utility>

#include <absl/strings/str_cat.h>

#include "engine/furrball/entry.h"
#include "engine/furrball/furrball_testing.h"
#include "engine/furrball/node_shard_internal.h"
#include "engine/numatic/error_status.h"
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
// This thread's Sets on cold-page nodes, for cooperative migration (every
// 16th). Per thread, so that the Set path writes no shared cache line.
thread_local uint32_t tls_cold_page_sets = 0;


class EvictionReason {
 public:
  explicit EvictionReason(Counter reason) : saved_(tls_eviction_reason) {
    tls_eviction_reason = reason;
  }
  ~EvictionReason() { tls_eviction_reason = saved_; }

 private:
  Counter saved_;
};

// The expiry for a TTL set at `now`: 0 (never) for no TTL, saturating so
// that a huge TTL means "practically never" rather than wrapping into the
// past.
uint64_t Deadline(uint64_t now, uint64_t ttl_ms) {
  if (ttl_ms == 0) return 0;
  return ttl_ms > UINT64_MAX - now ? UINT64_MAX : now + ttl_ms;
}

bool SameEntry(const KeyMeta& a, const KeyMeta& b) {
  return a.page == b.page && a.offset == b.offset &&
         a.generation == b.generation;
}

// Attempts of a reclaimer's single-key CMap operation that keeps finding the
// slot busy (a writer is inside it for a few hundred nanoseconds at most).
constexpr int kBusyRetries = 64;

std::atomic<const EngineTestHooks*> g_test_hooks{nullptr};

}  // namespace

const EngineTestHooks* TestHooks() {
  return g_test_hooks.load(std::memory_order_acquire);
}

// ---- Construction ----------------------------------------------------------

absl::StatusOr<std::unique_ptr<NodeShard, void (*)(NodeShard*)>>
NodeShard::Create(const ShardConfig& config, const Numatic* numatic) {
  using Ptr = std::unique_ptr<NodeShard, void (*)(NodeShard*)>;
  absl::StatusOr<NumaNodeMemoryResource*> resource =
      numatic->NodeResource(config.node);
  if (!resource.ok()) return resource.status();
  absl::StatusOr<RawAllocator> allocator = numatic->NodeAllocator(config.node);
  if (!allocator.ok()) return allocator.status();

  const size_t block_bytes = size_t{config.page_count} * config.page_size;
  absl::StatusOr<NumaBlock> block =
      numatic->AllocateOnNode(block_bytes, config.node);
  if (!block.ok()) {
    return ErrorStatus(ErrorOf(block.status()),
                       absl::StrCat("node ", config.node, ": value pages (",
                                    block_bytes, " bytes): ",
                                    block.status().message()));
  }

  void* memory = (*resource)->AllocateOrNull(sizeof(NodeShard),
                                             alignof(NodeShard));
  if (memory == nullptr) {
    numatic->Free(*block);
    return ErrorStatus(Error::kAllocationFailed,
                       absl::StrCat("node ", config.node,
                                    ": shard metadata (", sizeof(NodeShard),
                                    " bytes)"));
  }
  // The constructor's PMR containers throw std::bad_alloc when the node
  // refuses memory; turn that into the same all-or-nothing error.
  NodeShard* shard = nullptr;
  try {
    shard = new (memory) NodeShard(config, numatic, *resource, *block);
  } catch (const std::bad_alloc&) {
    (*resource)->DeallocateBytes(memory, sizeof(NodeShard));
    numatic->Free(*block);
    return ErrorStatus(Error::kAllocationFailed,
                       absl::StrCat("node ", config.node,
                                    ": page metadata or key locks"));
  }
  Ptr owned(shard, &NodeShard::Destroy);

  ConcurrentArcOptions<KeyMeta> arc_options;
  arc_options.capacity = config.max_keys;
  arc_options.allocator = *allocator;
  arc_options.on_evict = [shard](const HashPair& h, const KeyMeta& m) {
    shard->OnEvict(h, m);
  };
  absl::StatusOr<std::unique_ptr<Arc>> arc = Arc::Create(arc_options);
  if (!arc.ok()) {
    return ErrorStatus(ErrorOf(arc.status()),
                       absl::StrCat("node ", config.node, ": key table for ",
                                    config.max_keys, " keys: ",
                                    arc.status().message()));
  }
  shard->arc_ = *std::move(arc);
  return owned;
}

NodeShard::NodeShard(const ShardConfig& config, const Numatic* numatic,
                     NumaNodeMemoryResource* resource, NumaBlock block)
    : config_(config),
      numatic_(numatic),
      resource_(resource),
      block_(block),
      pool_(static_cast<uint8_t*>(block.data), config.page_count,
            config.page_size, resource, config.spill_cold_pages),
      stats_(resource),
      key_locks_(kKeyLocks, resource),
      cold_keys_(resource) {
  if (config.spill_cold_pages) {
    // Sized once: marking allocates nothing afterwards.
    MutexLock l(&reclaim_mu_);
    cold_keys_.reserve(kColdWindow);
    coldest_scratch_.reserve(kColdWindow);
  }
  next_version_.value.store(
      (uint64_t{static_cast<uint32_t>(config.node_index)} << 58) + 1,
      std::memory_order_relaxed);
  if (config.spill_store != nullptr) {
    spill_index_ = std::make_unique<SpillIndex>();
  }
}

NodeShard::~NodeShard() {
  arc_.reset();
  numatic_->Free(block_);
}

void NodeShard::Destroy(NodeShard* shard) {
  NumaNodeMemoryResource* resource = shard->resource_;
  shard->~NodeShard();
  resource->DeallocateBytes(shard, sizeof(NodeShard));
}

// ---- Request path ------------------------------------------------------------

GetResult NodeShard::Get(const HashPair& h, std::string_view key,
                         std::string* value, int requester, ParkingLock& key_lock,
                         bool count_miss, bool read_disk) {
  numatic_->SimulateRemoteAccess(requester, config_.node);
  const uint64_t now = NowMs();
  GetResult result = GetResident(h, key, value, key_lock, now);
  // Ghost hit (§2.9.6): the key's page is in the spill store. Under memory
  // pressure the reloaded key can be spilled again before we read it (the
  // reload itself makes room); then it is indexed under its new page and we
  // follow it, a bounded number of times.
  constexpr int kMaxReloads = 4;
  for (int reloads = 0; !result.found && spill_index_ != nullptr;
       ++reloads) {
    if (const EngineTestHooks* t = TestHooks();
        t != nullptr && t->get_missed_memory != nullptr) {
      t->get_missed_memory(h);
    }
    SpilledKey spilled;
    if (!spill_index_->Lookup(h, &spilled) || spilled.Expired(now)) {
      // An ARC victim of h between ARC and the index: indexed now, look
      // it up again.
      if (SettleVictim(h)) continue;
      // No entry. Another Get may have reloaded the key since we looked in
      // memory: a reload inserts the key before it takes the entry, so look
      // in memory once more rather than miss a key that is being reloaded.
      result = GetResident(h, key, value, key_lock, now);
      break;
    }
    if (!read_disk) {
      value->clear();
      result.on_disk = true;
      return result;
    }
    if (reloads == kMaxReloads) break;
    // The reload answers from the blob when the key's entry was still the
    // one it read: the newest acknowledged value at that moment, whether or
    // not memory kept it afterwards.
    result = ReloadPage(spilled.page_id, h, spilled, value);
    // The blob's copy is a payload: the hit is the key asked for only if
    // the key stored with it is (entry.h).
    if (result.found) {
      std::string_view stored_key, stored_value;
      if (SplitPayload(*value, &stored_key, &stored_value) &&
          stored_key == key) {
        value->erase(0, PayloadSize(key.size(), 0));
      } else {
        result = GetResult{};
        break;
      }
    }
    // The reload's inserts may have pushed victims into the batch.
    FlushVictimBatchIfFull();
    if (!result.found) result = GetResident(h, key, value, key_lock, now);
    if (result.found) {
      result.reloaded = true;
      stats_.Add(Counter::kGhostHits);
    }
  }
  if (!result.found) {
    value->clear();
    if (count_miss) stats_.Add(Counter::kMisses);
  } else {
    stats_.Add(requester == config_.node ? Counter::kHitsLocal
                                         : Counter::kHitsRemote);
  }
  return result;
}

GetResult NodeShard::GetResident(const HashPair& h, std::string_view key,
                                 std::string* value, ParkingLock& key_lock,
                                 uint64_t now) {
  GetResult result;
  std::optional<KeyMeta> expired;
  const uint64_t key_part = PayloadSize(key.size(), 0);
  auto attempt = [&](bool promote) -> bool {  // true: settled
    // One probe: the key is compared and the value copied inside CMap's
    // seqlock read of the KeyMeta (TryVisit), so both answers are about one
    // immutable image (the Get protocol above, with step 3's re-probe
    // replaced by the slot's sequence check).
    std::optional<KeyMeta> seen;
    bool is_key = false;
    const Arc::VisitOutcome outcome =
        arc_->TryVisit(h, promote, [&](const KeyMeta& m) {
          seen = m;
          is_key = false;
          if (m.Expired(now)) return;
          const uint8_t* entry = pool_.EntryAt(m.page, m.offset);
          is_key = PayloadKeyEquals(entry, m.size, key);
          if (is_key) {
            value->resize(m.size - key_part);
            CopyPayloadRange(entry, key_part, value->size(), value->data());
          }
        });
    if (outcome == Arc::VisitOutcome::kChanged) return false;
    if (outcome == Arc::VisitOutcome::kAbsent || seen->Expired(now)) {
      result.found = false;
      if (outcome != Arc::VisitOutcome::kAbsent) expired = seen;
      return true;
    }
    // Another key with the same hash: a miss, not its value.
    result.found = is_key;
    if (!is_key) return true;
    result.version = seen->version;
    result.ttl_remaining_ms = seen->expiry_ms == 0 ? 0 : seen->expiry_ms - now;
    return true;
  };
  bool settled = false;
  for (int i = 0; i < kOptimisticReads && !settled; ++i) {
    settled = attempt(/*promote=*/i == 0);
  }
  if (!settled) {
    // Writers of this key keep changing it under us. With its lock held only
    // movers and evictors can, and they are bounded, so this terminates.
    ParkingLockHolder l(key_lock);
    while (!attempt(/*promote=*/false)) {
    }
  }
  // An expired entry leaves the table (and the live counts) when a Get
  // meets it, as memcached does, rather than when the worker's walk reaches
  // its page: the walk skips open pages, so a few keys with a TTL could
  // count as live forever. Try-lock: a Get never waits for a writer, and a
  // writer holding the lock deals with the entry itself.
  if (expired.has_value()) {
    ReclaimIfExpired(h, expired->page, expired->offset, expired->generation,
                     now);
  }
  return result;
}

std::optional<bool> NodeShard::ResidentKeyIs(const HashPair& h,
                                             const KeyMeta& m,
                                             std::string_view key) const {
  const bool is_key =
      PayloadKeyEquals(pool_.EntryAt(m.page, m.offset), m.size, key);
  const std::optional<KeyMeta> again = arc_->Peek(h);
  if (!again.has_value() || !(*again == m)) return std::nullopt;
  return is_key;
}

bool NodeShard::Holds(const HashPair& h) const {
  return arc_->Peek(h).has_value();
}

SetResult NodeShard::Set(const HashPair& h, std::string_view key,
                         std::string_view value, const WriteOptions& options) {
  const SetResult r = SetValue(h, key, value, options);
  if (config_.spill_cold_pages && r.error == Error::kOk) {
    MigrateCooperatively();
  }
  return r;
}

SetResult NodeShard::SetValue(const HashPair& h, std::string_view key,
                              std::string_view value,
                              const WriteOptions& options) {
  const uint32_t size =
      static_cast<uint32_t>(PayloadSize(key.size(), value.size()));
  const uint32_t capacity = static_cast<uint32_t>(EntryFootprint(size));
  const uint64_t now = NowMs();
  bool waited_for_evictions = false;
  for (;;) {
    const std::optional<KeyMeta> cur = arc_->Peek(h);
    // A key whose only copy is spilled is live for the conditions too. Under
    // the key lock it is in memory or in the spill index, never both.
    SpilledKey spilled;
    const bool live_spilled = !cur.has_value() && spill_index_ != nullptr &&
                              spill_index_->Lookup(h, &spilled) &&
                              !spilled.Expired(now);
    // ... except for an ARC victim between its erase and its indexing
    // (spill_index.h, "victim"): a condition must not decide on that, so
    // have it indexed (SettleVictim) and look again.
    if (options.mode != SetMode::kAlways && spill_index_ != nullptr &&
        !cur.has_value() && !live_spilled && !waited_for_evictions) {
      SettleVictim(h);
      waited_for_evictions = true;
      continue;
    }
    // A condition is about this key: a resident entry of another key with
    // the same hash (entry.h) counts as absent. A spilled one is judged by
    // its hash alone; its key is on disk.
    bool resident_is_key = true;
    if (options.mode != SetMode::kAlways && cur.has_value() &&
        !cur->Expired(now)) {
      const std::optional<bool> is_key = ResidentKeyIs(h, *cur, key);
      if (!is_key.has_value()) continue;  // it changed: look again
      resident_is_key = *is_key;
    }
    const bool live =
        (cur.has_value() && !cur->Expired(now) && resident_is_key) ||
        live_spilled;
    const uint64_t live_version = cur.has_value() ? cur->version
                                                  : spilled.version;
    if (options.mode == SetMode::kIfAbsent && live) {
      return SetResult{Error::kAlreadyExists, 0};
    }
    if (options.mode == SetMode::kIfVersion) {
      if (!live) return SetResult{Error::kKeyNotFound, 0};
      if (live_version != options.expected_version) {
        return SetResult{Error::kVersionMismatch, 0};
      }
    }
    // No resurrection: the spilled copy is dropped before this write can
    // be acknowledged, so no reload can bring it back afterwards.
    SpilledKey dropped;
    if (spill_index_ != nullptr && spill_index_->Take(h, &dropped) &&
        dropped.Expired(now)) {
      stats_.Add(Counter::kTtlExpirations);
    }
    const uint64_t version = NextVersion(options.superseded_writes);
    const uint64_t expiry = Deadline(now, options.ttl_ms);
    if (expiry != 0 && !has_ttl_keys_.load(std::memory_order_relaxed)) {
      has_ttl_keys_.store(true, std::memory_order_relaxed);
    }

    // Fast path (§2.8.5): overwrite in place when the new value fits the
    // entry. The bytes are written inside the slot's seqlock.
    if (cur.has_value() && capacity <= cur->capacity) {
      bool same = false;
      uint32_t old_size = 0;
      const Error err = arc_->UpdateInPlace(h, [&](KeyMeta& m) {
        if (!SameEntry(m, *cur)) return;  // relocated since we looked
        same = true;
        old_size = m.size;
        uint8_t* entry = pool_.EntryAt(m.page, m.offset);
        WritePayloadWords(entry, key, value);
        WriteSizeWord(entry, size, m.capacity);
        m.size = size;
        m.version = version;
        m.expiry_ms = expiry;
      });
      if (err == Error::kOk && same) {
        // The entry this write replaced had expired: one key left (an
        // expiration), one came in, so live_keys stays.
        if (cur->Expired(now)) stats_.Add(Counter::kTtlExpirations);
        stats_.Add(Counter::kSets);
        stats_.Add(Counter::kInPlaceSets);
        stats_.AddSigned(Counter::kLiveBytes,
                         int64_t{size} - int64_t{old_size});
        return SetResult{Error::kOk, version};
      }
      if (err != Error::kOk && err != Error::kKeyNotFound &&
          err != Error::kAbandonedSet) {
        return SetResult{err, 0};
      }
      continue;  // moved, evicted or busy: look again
    }

    Reservation r;
    const Error reserve_err = Reserve(capacity, &r);
    if (reserve_err != Error::kOk) return SetResult{reserve_err, 0};
    stats_.Add(Counter::kPaddingBytes, capacity - kEntryHeaderBytes - size);
    WriteKeyedEntry(pool_.EntryAt(r.page, r.offset), h, key, value, capacity);
    const KeyMeta fresh{version, expiry,   r.page,       r.offset,
                        size,    capacity, r.generation, 0};

    if (cur.has_value()) {
      bool same = false;
      KeyMeta before;
      const Error err = arc_->UpdateInPlace(h, [&](KeyMeta& m) {
        if (!SameEntry(m, *cur)) return;
        same = true;
        before = m;
        m = fresh;
      });
      if (err == Error::kOk && same) {
        pool_.Publish(r.page, capacity);
        pool_.EndWrite(r.page);
        pool_.Unpublish(before.page, before.capacity);
        if (before.Expired(now)) stats_.Add(Counter::kTtlExpirations);
        stats_.Add(Counter::kSets);
        stats_.AddSigned(Counter::kLiveBytes,
                         int64_t{size} - int64_t{before.size});
        return SetResult{Error::kOk, version};
      }
      pool_.EndWrite(r.page);  // nothing points at the entry: dead bytes
      if (err != Error::kOk && err != Error::kKeyNotFound &&
          err != Error::kAbandonedSet) {
        return SetResult{err, 0};
      }
      continue;
    }

    if (!config_.eviction_enabled &&
        resident_keys_.fetch_add(1, std::memory_order_relaxed) >=
            int64_t{config_.max_keys}) {
      resident_keys_.fetch_sub(1, std::memory_order_relaxed);
      pool_.EndWrite(r.page);
      return SetResult{Error::kNoMemory, 0};
    }
    if (const EngineTestHooks* t = TestHooks();
        t != nullptr && t->before_insert != nullptr) {
      t->before_insert(h);
    }
    const CMapSetResult sr = arc_->Set(h, fresh);
    // Victims this insert made ARC evict are copied out now that ARC's
    // lock is released.
    DrainVictims();
    if (sr.err == Error::kOk) {
      // Only writers insert and they hold the key's lock, so the key was
      // absent when Peek said so and Set inserted it.
      assert(sr.inserted);
      // An ARC victim is erased under ARC's lock and indexed after it,
      // without its key lock: Peek and the index lookup above can both
      // fall between the two and miss the key. Once it is indexed
      // (SettleVictim) its entry is older than this write and must not
      // outlive it (docs/spill.md, "No resurrection").
      if (spill_index_ != nullptr) {
        SettleVictim(h);
        spill_index_->TakeIfOlder(h, version);
      }
      pool_.Publish(r.page, capacity);
      pool_.EndWrite(r.page);
      stats_.Add(Counter::kSets);
      stats_.Add(Counter::kLiveKeys);
      stats_.Add(Counter::kLiveBytes, size);
      return SetResult{Error::kOk, version};
    }
    pool_.EndWrite(r.page);
    if (!config_.eviction_enabled) {
      resident_keys_.fetch_sub(1, std::memory_order_relaxed);
    }
    if (sr.err == Error::kAbandonedSet) continue;
    // kCacheFull: the table's slack makes it unreachable; report it as what
    // it would mean to a client.
    return SetResult{sr.err == Error::kCacheFull ? Error::kNoMemory : sr.err,
                     0};
  }
}

DeleteResult NodeShard::Delete(const HashPair& h) {
  const uint64_t now = NowMs();
  for (;;) {
    KeyMeta erased;
    const Error err = arc_->Erase(h, &erased);
    if (err == Error::kAbandonedSet) continue;
    // Removing an expired key is counted as its expiration: the client
    // deleted nothing (deleted = false).
    if (err == Error::kKeyNotFound) {
      // A victim of h between ARC and the index is indexed first, so that
      // this Delete removes it.
      SettleVictim(h);
      SpilledKey spilled;
      if (spill_index_ != nullptr && spill_index_->Take(h, &spilled)) {
        const bool expired = spilled.Expired(now);
        stats_.Add(expired ? Counter::kTtlExpirations : Counter::kDeletes);
        return DeleteResult{Error::kOk, !expired};
      }
      return DeleteResult{Error::kOk, false};
    }
    if (err != Error::kOk) return DeleteResult{err, false};
    AccountRemoved(erased);
    const bool expired = erased.Expired(now);
    stats_.Add(expired ? Counter::kTtlExpirations : Counter::kDeletes);
    return DeleteResult{Error::kOk, !expired};
  }
}

Error NodeShard::Touch(const HashPair& h, uint64_t ttl_ms) {
  const uint64_t now = NowMs();
  const uint64_t expiry = Deadline(now, ttl_ms);
  if (expiry != 0 && !has_ttl_keys_.load(std::memory_order_relaxed)) {
    has_ttl_keys_.store(true, std::memory_order_relaxed);
  }
  for (;;) {
    bool live = false;
    const Error err = arc_->UpdateInPlace(h, [&](KeyMeta& m) {
      if (m.Expired(now)) return;
      live = true;
      m.expiry_ms = expiry;
    });
    if (err == Error::kAbandonedSet) continue;
    if (err == Error::kKeyNotFound && spill_index_ != nullptr) {
      // A spilled key's expiry lives in its index entry. A victim between
      // its erase and its indexing is in neither place: have it indexed,
      // then look again (spill_index.h, "victim").
      SettleVictim(h);
      if (arc_->Peek(h).has_value()) continue;
      SpilledKey spilled;
      if (spill_index_->Lookup(h, &spilled) && !spilled.Expired(now) &&
          spill_index_->SetExpiry(h, expiry)) {
        stats_.Add(Counter::kTouches);
        return Error::kOk;
      }
    }
    if (err == Error::kKeyNotFound || (err == Error::kOk && !live)) {
      return Error::kKeyNotFound;
    }
    if (err != Error::kOk) return err;
    stats_.Add(Counter::kTouches);
    return Error::kOk;
  }
}

// ---- Accounting --------------------------------------------------------------

void NodeShard::AccountRemoved(const KeyMeta& m) {
  pool_.Unpublish(m.page, m.capacity);
  stats_.AddSigned(Counter::kLiveKeys, -1);
  stats_.AddSigned(Counter::kLiveBytes, -int64_t{m.size});
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
  if (spill_index_ != nullptr) {
    // Only evictors claim slots, and they all hold ARC's lock: no two claim
    // at once. The acquire load pairs with the release store that freed the
    // slot, so the drainer's reads of it are done before we overwrite it.
    for (VictimSlot& slot : victims_) {
      if (slot.state.load(std::memory_order_acquire) != kSlotFree) continue;
      slot.h1.store(h.h1, std::memory_order_relaxed);
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
  const HashPair h{slot.h1.load(std::memory_order_relaxed),
                   slot.h2.load(std::memory_order_relaxed)};
  const KeyMeta m = slot.meta;
  if (const EngineTestHooks* t = TestHooks();
      t != nullptr && t->victim_erased != nullptr) {
    t->victim_erased(h);
  }
  // The worker's victims always go to the batch. A writer's (its insert
  // made ARC evict: a full key table) only while the batch is under two
  // pages: the writer flushes it afterwards, and must not let it grow
  // without bound when the flushes fall behind.
  bool batched;
  {
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
      if (state == kSlotFree ||
          slot.h1.load(std::memory_order_relaxed) != h.h1 ||
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
  CopyValueOut(pool_.EntryAt(m.page, m.offset), m.size,
               batch_->Add(h, m.version, m.expiry_ms, m.size));
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
  // The blob is written with no lock held: batch_mu_ is taken under ARC's
  // lock (OnEvict), so it must never wait for the disk. Meanwhile the blob
  // is the in-flight page, which a reload of one of its keys reads from
  // memory.
  std::shared_ptr<const std::string> bytes;
  uint64_t page_id = 0;
  {
    MutexLock l(&batch_mu_);
    if (batch_ == nullptr || inflight_ != nullptr) return;  // one at a time
    if (!force && batch_->data_bytes() < pool_.page_size()) return;
    bytes = std::make_shared<const std::string>(batch_->Finish());
    page_id = batch_page_id_;
    inflight_ = bytes;
    inflight_page_id_ = page_id;
    batch_.reset();
    batch_full_.store(false, std::memory_order_relaxed);
  }
  // Every key of the batch may have left it already (overwritten, deleted,
  // reloaded): then there is nothing to write.
  if (spill_index_->HasKeys(page_id)) {
    const absl::Status put =
        config_.spill_store->Put(config_.node_index, page_id, *bytes);
    if (put.ok()) {
      stats_.Add(Counter::kSpillPages);
      stats_.Add(Counter::kSpillBytes, bytes->size());
    } else {
      // The keys are indexed under a page the store does not have: their
      // reloads miss (and drop the entries). Never a wrong value.
      stats_.Add(Counter::kSpillErrors);
    }
  }
  MutexLock l(&batch_mu_);
  inflight_.reset();
  inflight_page_id_ = 0;
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

// ---- Space -------------------------------------------------------------------

Error NodeShard::Reserve(uint32_t capacity, Reservation* out) {
  // Each round finds space, reclaims something, or finds that what is left
  // to reclaim is held by another thread's operation in flight (a write not
  // yet ended, or an entry whose KeyMeta already left the page but whose
  // Unpublish has not run yet: its thread was preempted between the two).
  // Those finish without waiting for anything a writer holds, so the writer
  // yields and looks again. It gives up only after config_.reclaim_patience
  // without any progress, which a healthy node never reaches.
  using SteadyClock = std::chrono::steady_clock;
  SteadyClock::time_point waiting_since;
  for (uint64_t waits = 0;;) {
    ReserveSource source;
    uint64_t tail_waste = 0;
    if (pool_.ReserveOnCurrent(capacity, out, &source, &tail_waste)) {
      if (tail_waste != 0) stats_.Add(Counter::kPaddingBytes, tail_waste);
      return Error::kOk;
    }
    if (pool_.ReserveOnStaging(capacity, out)) {
      stats_.Add(Counter::kStagingSets);
      return Error::kOk;
    }
    switch (ReclaimForWriter(capacity)) {
      case Reclaim::kProgress:
        waits = 0;
        break;
      case Reclaim::kNoMemory:
        return Error::kNoMemory;
      case Reclaim::kWait:
        stats_.Add(Counter::kReclaimWaits);
        // The clock is read once per 64 waits: a yield is cheap when the
        // thread we wait for already runs on another core.
        if (waits++ == 0) {
          waiting_since = SteadyClock::now();
        } else if (waits % 64 == 0 &&
                   SteadyClock::now() - waiting_since >
                       config_.reclaim_patience) {
          return Error::kNoMemory;
        }
        std::this_thread::yield();
        break;
    }
  }
}

NodeShard::Reclaim NodeShard::ReclaimForWriter(uint32_t capacity) {
  MutexLock l(&reclaim_mu_);
  // Someone reclaimed while we waited for the mutex.
  if (pool_.free_pages() > kRelocationReserve ||
      pool_.staging_room() >= capacity) {
    return Reclaim::kProgress;
  }
  const uint32_t recycled = pool_.RecycleDeadPages();
  if (recycled > 0) {
    sealed_for_reclaim_ = false;
    stats_.Add(Counter::kPagesRecycled, recycled);
    return Reclaim::kProgress;
  }
  // The staging page is emptied by the worker, but a writer that finds it
  // full of dead or relocatable entries need not wait for the next pass.
  if (RelocateStaging()) return Reclaim::kProgress;
  // Compact without losing data if the sparsest page is worth it (an eighth
  // of it dead: a drain moves its live bytes, so draining a full page would
  // only churn) and fits where relocation can put it.
  const uint64_t page = pool_.page_size();
  if (DrainSparsest(std::min(page - page / 8,
                             pool_.relocation_room() +
                                 uint64_t{pool_.free_pages()} * page))) {
    return Reclaim::kProgress;
  }
  if (config_.eviction_enabled) {
    // Whole-page eviction of the sparsest page: bounded work that frees a
    // page unless another thread still holds a live byte of it (see
    // Reserve). It ignores ARC's order, which is why the worker tries to
    // keep free pages in reserve so that writers rarely come here. With the
    // spill tier the page goes to disk first; keys it could not take (their
    // key lock was busy, e.g. our own) are then evicted.
    // With cold pages, a sealed COLD page is the first to go.
    if (config_.spill_cold_pages && SpillColdPage()) {
      return Reclaim::kProgress;
    }
    if (spill_index_ != nullptr) {
      if (SpillSparsestPage()) return Reclaim::kProgress;
      // What the spill left (keys whose lock was busy: another key sharing
      // our own key's lock, say) is moved rather than dropped if it fits.
      if (DrainSparsest(std::min(page - page / 8,
                                 pool_.relocation_room() +
                                     uint64_t{pool_.free_pages()} * page))) {
        return Reclaim::kProgress;
      }
    }
    if (EvictSparsestPage()) return Reclaim::kProgress;
  }
  uint64_t live = 0;
  if (pool_.SparsestSealedPage(&live) != kNoPage) {
    // A candidate exists. With eviction, what keeps it from being freed is
    // an operation in flight on another thread; without, it is not worth
    // draining and the node is full.
    return config_.eviction_enabled ? Reclaim::kWait : Reclaim::kNoMemory;
  }
  // No sealed page at all: in a small pool every page can be open (current,
  // relocation, staging) or the reserve. Seal the current and relocation
  // pages so that the next round can drain or evict them.
  if (!sealed_for_reclaim_) {
    sealed_for_reclaim_ = true;
    uint64_t waste = 0;
    const bool sealed = pool_.SealOpenPagesForReclaim(&waste);
    stats_.Add(Counter::kPaddingBytes, waste);
    if (sealed) return Reclaim::kProgress;
  }
  sealed_for_reclaim_ = false;
  // Every page is open, reserved or has a write in flight.
  return config_.eviction_enabled ? Reclaim::kWait : Reclaim::kNoMemory;
}

bool NodeShard::DrainSparsest(uint64_t max_live_bytes) {
  uint64_t live = 0;
  const uint32_t page = pool_.SparsestSealedPage(&live);
  if (page == kNoPage || live > max_live_bytes) return false;
  uint64_t frozen;
  if (!pool_.TryFreeze(page, &frozen)) return false;
  return DrainFrozen(page, frozen);
}

bool NodeShard::DrainFrozen(uint32_t page, uint64_t frozen) {
  const uint32_t generation =
      pool_.page(page).generation.load(std::memory_order_relaxed);
  const uint64_t now = NowMs();
  // A COLD page's survivors are still cold: they stay on COLD pages.
  const bool to_cold = config_.spill_cold_pages &&
                       PageState::Tier(frozen) == PageTier::kCold;
  pool_.ForEachEntry(page, frozen, [&](uint32_t offset,
                                       const EntryHeader& header) {
    const std::optional<KeyMeta> m = arc_->Peek(header.hash);
    if (!m.has_value() || !PointsAt(*m, page, offset, generation)) {
      return true;  // dead entry
    }
    if (m->Expired(now) && ReclaimIfExpired(header.hash, page, offset,
                                            generation, now)) {
      return true;
    }
    const uint32_t capacity = static_cast<uint32_t>(EntryFootprint(m->size));
    Reservation r;
    const bool reserved =
        to_cold ? pool_.ReserveForColdMigration(capacity, /*for_drain=*/true,
                                                &r)
                : pool_.ReserveForRelocation(capacity, &r);
    if (!reserved) return false;  // no room
    MoveEntry(header.hash, page, offset, generation, r,
              Counter::kRelocations);
    return true;
  });
  const bool recycled = pool_.FinishFreeze(page, frozen);
  if (recycled) {
    stats_.Add(Counter::kPagesDrained);
    stats_.Add(Counter::kPagesRecycled);
  }
  return recycled;
}

bool NodeShard::MoveEntry(const HashPair& h, uint32_t page, uint32_t offset,
                          uint32_t generation, const Reservation& r,
                          Counter counter) {
  bool moved = false;
  KeyMeta before;
  for (int i = 0; i < kBusyRetries && !moved; ++i) {
    const Error err = arc_->UpdateInPlaceWithoutHit(h, [&](KeyMeta& cur) {
      if (!PointsAt(cur, page, offset, generation) ||
          EntryFootprint(cur.size) > r.capacity) {
        return;
      }
      // Inside the slot's seqlock: an in-place writer of this key has
      // either finished (we copy its bytes) or is refused the slot and
      // looks again (it then finds the moved entry, see Set).
      CopyEntry(pool_.EntryAt(page, offset), pool_.EntryAt(r.page, r.offset),
                h, cur.size, r.capacity);
      before = cur;
      cur.page = r.page;
      cur.offset = r.offset;
      cur.generation = r.generation;
      cur.capacity = r.capacity;
      moved = true;
    });
    if (err != Error::kAbandonedSet) break;
  }
  if (moved) {
    pool_.Publish(r.page, r.capacity);
    pool_.EndWrite(r.page);
    pool_.Unpublish(page, before.capacity);
    stats_.Add(counter);
    // Alignment padding of the new copy (the old entry's goes dead).
    stats_.Add(Counter::kPaddingBytes,
               r.capacity - kEntryHeaderBytes - before.size);
  } else {
    // Evicted, overwritten elsewhere, grown in place or busy: the copy is
    // dead; keep the reservation walkable.
    WriteDeadEntry(pool_.EntryAt(r.page, r.offset), h, r.capacity);
    pool_.EndWrite(r.page);
  }
  return moved;
}

bool NodeShard::ReclaimIfExpired(const HashPair& h, uint32_t page,
                                 uint32_t offset, uint32_t generation,
                                 uint64_t now) {
  // Try-lock only: the reclaim mutex holder must never wait for a key lock
  // (a writer holding one may be waiting for the reclaim mutex). Holding it,
  // no writer can give the key a fresh value between the check and the
  // erase.
  ParkingLock& lock = config_.key_lock_for(config_.key_lock_context, h);
  if (!lock.try_lock()) return false;
  bool erased = false;
  const std::optional<KeyMeta> m = arc_->Peek(h);
  if (m.has_value() && PointsAt(*m, page, offset, generation) &&
      m->Expired(now)) {
    erased = EraseAndAccount(h, Counter::kTtlExpirations);
  }
  lock.unlock();
  return erased;
}

bool NodeShard::EvictSparsestPage() {
  uint64_t live = 0;
  const uint32_t page = pool_.SparsestSealedPage(&live);
  if (page == kNoPage) return false;
  uint64_t frozen;
  if (!pool_.TryFreeze(page, &frozen)) return false;
  const bool recycled = EvictFrozen(page, frozen);
  if (recycled) stats_.Add(Counter::kPageEvictions);
  return recycled;
}

bool NodeShard::EvictFrozen(uint32_t page, uint64_t frozen) {
  const uint32_t generation =
      pool_.page(page).generation.load(std::memory_order_relaxed);
  const uint64_t now = NowMs();
  pool_.ForEachEntry(page, frozen, [&](uint32_t offset,
                                       const EntryHeader& header) {
    const std::optional<KeyMeta> m = arc_->Peek(header.hash);
    if (m.has_value() && PointsAt(*m, page, offset, generation)) {
      // No key lock: an eviction may take any key at any time. If a writer
      // re-pointed the key meanwhile, that newer entry is what gets erased
      // and accounted; the cache just loses it a little earlier.
      EraseAndAccount(header.hash, m->Expired(now)
                                       ? Counter::kTtlExpirations
                                       : Counter::kEvictionsCapacity);
    }
    return true;
  });
  const bool recycled = pool_.FinishFreeze(page, frozen);
  if (recycled) stats_.Add(Counter::kPagesRecycled);
  return recycled;
}

bool NodeShard::RelocateStaging() {
  const uint32_t staging = pool_.staging_page();
  const uint64_t state = pool_.page(staging).state.load(
      std::memory_order_relaxed);
  if (PageState::Used(state) == 0) return false;
  const uint64_t live =
      pool_.page(staging).live.load(std::memory_order_relaxed) &
      0xffffffffull;
  // Relocate only when everything fits without touching the relocation
  // reserve: unlike a drain, emptying staging frees no page, so using the
  // reserve here could leave a full cache with no room to compact in.
  const uint32_t free = pool_.free_pages();
  const uint64_t spare_pages = free > kRelocationReserve
                                   ? free - kRelocationReserve
                                   : 0;
  if (live > pool_.relocation_room() + spare_pages * pool_.page_size()) {
    return false;
  }
  pool_.SealStaging();
  uint64_t frozen;
  if (!pool_.TryFreeze(staging, &frozen)) {
    pool_.ReopenStaging();  // writes in flight; next pass
    return false;
  }
  const bool recycled = DrainFrozen(staging, frozen);  // reopens if emptied
  if (!recycled) pool_.ReopenStaging();
  return recycled;
}

bool NodeShard::RefillStep() {
  // Free pages to keep for bursts: 1/16 of the pool, at least the
  // relocation reserve plus one; with cold pages plus two, so that the
  // refill starts while a COLD page can still be opened beyond the reserve.
  const uint32_t target = std::max<uint32_t>(
      kRelocationReserve + (config_.spill_cold_pages ? 2 : 1),
      config_.page_count / 16);
  if (pool_.free_pages() >= target) return false;
  const uint32_t recycled = pool_.RecycleDeadPages();
  if (recycled > 0) {
    stats_.Add(Counter::kPagesRecycled, recycled);
    return true;
  }
  // Report §2.10.4: drain a page once a quarter of it is dead.
  const uint64_t page = pool_.page_size();
  if (DrainSparsest(std::min(page * 3 / 4,
                             pool_.relocation_room() +
                                 uint64_t{pool_.free_pages()} * page))) {
    return true;
  }
  if (!config_.eviction_enabled) return false;
  if (config_.spill_cold_pages) return ColdStep();
  return ForceEvictBatch();
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

void NodeShard::ReclaimExpired() {
  if (!has_ttl_keys_.load(std::memory_order_relaxed)) return;
  // One sealed page per pass, round robin: expired keys are already
  // invisible to Get, so this only returns their bytes, and can be slow.
  for (uint32_t tries = 0; tries < config_.page_count; ++tries) {
    const uint32_t page = ttl_cursor_;
    ttl_cursor_ = (ttl_cursor_ + 1) % config_.page_count;
    uint64_t frozen;
    if (!pool_.TryFreeze(page, &frozen)) continue;
    const uint32_t generation =
        pool_.page(page).generation.load(std::memory_order_relaxed);
    const uint64_t now = NowMs();
    pool_.ForEachEntry(page, frozen, [&](uint32_t offset,
                                         const EntryHeader& header) {
      const std::optional<KeyMeta> m = arc_->Peek(header.hash);
      if (m.has_value() && PointsAt(*m, page, offset, generation) &&
          m->Expired(now)) {
        ReclaimIfExpired(header.hash, page, offset, generation, now);
      }
      return true;
    });
    if (pool_.FinishFreeze(page, frozen)) {
      stats_.Add(Counter::kPagesRecycled);
    }
    return;
  }
}

void NodeShard::Maintain() {
  // Idle promotions are applied here so that a read-only period does not
  // leave ARC's order stale (§2.8.2). Only if ARC's lock is free: a writer
  // holding it is no read-only period, and spinning here would take CPU from
  // that writer.
  arc_->TryDrainPromotions();
  // Each step takes the reclaim mutex on its own, so that a writer that ran
  // out of room waits for one step, never for a whole pass.
  {
    MutexLock l(&reclaim_mu_);
    // A mark is good for one pass: re-marking next time it is needed skips
    // the keys that were read or written meanwhile.
    if (config_.spill_cold_pages) {
      cold_keys_.clear();
      cold_pending_.store(0, std::memory_order_relaxed);
    }
    const uint32_t recycled = pool_.RecycleDeadPages();
    if (recycled > 0) stats_.Add(Counter::kPagesRecycled, recycled);
    RelocateStaging();
  }
  constexpr int kMaxRefillSteps = 32;  // bounded work per pass
  for (int step = 0; step < kMaxRefillSteps; ++step) {
    MutexLock l(&reclaim_mu_);
    if (!RefillStep()) break;
  }
  MutexLock l(&reclaim_mu_);
  ReclaimExpired();
  if (spill_index_ != nullptr) {
    // Writers' victims (a full key table) fill the batch too.
    FlushVictimBatch(/*force=*/false);
    SweepSpillIndex();
    DeleteDeadSpillPages();
  }
}

// ---- Cold pages ----------------------------------------------------------------

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
  if (m.has_value() && *m == k.meta && !OnColdPage(*m)) {
    const uint32_t capacity = static_cast<uint32_t>(EntryFootprint(m->size));
    Reservation r;
    if (!pool_.ReserveForColdMigration(capacity, /*for_drain=*/false, &r)) {
      return Migration::kNoRoom;
    }
    if (MoveEntry(k.hash, m->page, m->offset, m->generation, r,
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

std::string NodeShard::CheckPageAccountingForTesting() const {
  std::string bad;
  uint64_t pointed = 0;
  for (uint32_t page = 0; page < config_.page_count; ++page) {
    const Page& p = pool_.page(page);
    const uint64_t state = p.state.load(std::memory_order_acquire);
    if (PageState::Pending(state) != 0) {
      absl::StrAppend(&bad, "page ", page, " has writes in flight; ");
      continue;
    }
    const uint32_t generation = p.generation.load(std::memory_order_relaxed);
    uint64_t bytes = 0, entries = 0;
    pool_.ForEachEntry(page, state, [&](uint32_t offset,
                                        const EntryHeader& header) {
      if (header.capacity == 0) {
        absl::StrAppend(&bad, "page ", page, " offset ", offset,
                        ": zero-capacity entry; ");
        return false;
      }
      const std::optional<KeyMeta> m = arc_->Peek(header.hash);
      if (m.has_value() && PointsAt(*m, page, offset, generation)) {
        if (m->capacity != header.capacity) {
          absl::StrAppend(&bad, "page ", page, " offset ", offset,
                          ": KeyMeta capacity ", m->capacity, " vs entry ",
                          header.capacity, "; ");
        }
        bytes += header.capacity;
        ++entries;
      }
      return true;
    });
    const uint64_t live = p.live.load(std::memory_order_acquire);
    if ((live & 0xffffffffull) != bytes || (live >> 32) != entries) {
      absl::StrAppend(&bad, "page ", page, " (tier ",
                      static_cast<int>(PageState::Tier(state)),
                      "): live word says ", live & 0xffffffffull, " bytes in ",
                      live >> 32, " entries, its entries ", bytes, " in ",
                      entries, "; ");
    }
    pointed += entries;
  }
  if (pointed != arc_->size()) {
    absl::StrAppend(&bad, arc_->size(), " keys resident but ", pointed,
                    " entries pointed at; ");
  }
  return bad;
}

// ---- Introspection -----------------------------------------------------------

NodeStatsSnapshot NodeShard::Snapshot() const {
  NodeStatsSnapshot s;
  s.node = config_.node;
  s.hits_local = stats_.Sum(Counter::kHitsLocal);
  s.hits_remote = stats_.Sum(Counter::kHitsRemote);
  s.misses = stats_.Sum(Counter::kMisses);
  s.sets = stats_.Sum(Counter::kSets);
  s.in_place_sets = stats_.Sum(Counter::kInPlaceSets);
  s.staging_sets = stats_.Sum(Counter::kStagingSets);
  s.deletes = stats_.Sum(Counter::kDeletes);
  s.touches = stats_.Sum(Counter::kTouches);
  s.ttl_expirations = stats_.Sum(Counter::kTtlExpirations);
  s.evictions_capacity = stats_.Sum(Counter::kEvictionsCapacity);
  s.evictions_keys = stats_.Sum(Counter::kEvictionsKeys);
  s.page_evictions = stats_.Sum(Counter::kPageEvictions);
  // Deltas summed over shards; a snapshot taken mid-update can be a few
  // counts off in either direction, never negative in the output.
  s.live_keys = static_cast<uint64_t>(
      std::max<int64_t>(0, static_cast<int64_t>(stats_.Sum(Counter::kLiveKeys))));
  s.live_bytes = static_cast<uint64_t>(std::max<int64_t>(
      0, static_cast<int64_t>(stats_.Sum(Counter::kLiveBytes))));
  const PoolCensus census = pool_.Census();
  s.dead_bytes = census.used_bytes > census.live_bytes
                     ? census.used_bytes - census.live_bytes
                     : 0;
  s.memory_limit_bytes = page_bytes();
  s.pages_hot = census.pages_hot;
  s.pages_cold = census.pages_cold;
  s.pages_empty = census.pages_empty;
  s.pages_freeze = census.pages_freeze;
  s.pages_staging = census.pages_staging;
  s.staging_used_bytes = census.staging_used_bytes;
  s.padding_bytes = stats_.Sum(Counter::kPaddingBytes);
  s.relocations = stats_.Sum(Counter::kRelocations);
  s.pages_drained = stats_.Sum(Counter::kPagesDrained);
  s.pages_recycled = stats_.Sum(Counter::kPagesRecycled);
  s.promote_drops = arc_->stats().promotions_dropped;
  s.reclaim_waits = stats_.Sum(Counter::kReclaimWaits);
  s.spill_pages_written = stats_.Sum(Counter::kSpillPages);
  s.spill_bytes_written = stats_.Sum(Counter::kSpillBytes);
  s.spill_keys_written = stats_.Sum(Counter::kSpilledKeys);
  s.spill_reloads = stats_.Sum(Counter::kSpillReloads);
  s.spill_reloaded_keys = stats_.Sum(Counter::kSpillReloadedKeys);
  s.spill_ghost_hits = stats_.Sum(Counter::kGhostHits);
  s.spill_errors = stats_.Sum(Counter::kSpillErrors);
  s.cold_keys_marked = stats_.Sum(Counter::kColdKeysMarked);
  s.cold_migrations = stats_.Sum(Counter::kColdMigrations);
  s.cold_migrations_cooperative =
      stats_.Sum(Counter::kColdMigrationsCooperative);
  s.cold_pages_spilled = stats_.Sum(Counter::kColdPagesSpilled);
  s.cold_fallbacks = stats_.Sum(Counter::kColdFallbacks);
  if (spill_index_ != nullptr) {
    s.spill_keys_indexed = spill_index_->size();
    s.spill_disk_bytes =
        config_.spill_store->stats().node_bytes[config_.node_index];
  }
  return s;
}

}  // namespace furrball_internal

void SetEngineTestHooksForTesting(const EngineTestHooks* hooks) {
  furrball_internal::g_test_hooks.store(hooks, std::memory_order_release);
}

}  // namespace furrballs
