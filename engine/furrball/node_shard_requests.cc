// engine/furrball/node_shard_requests.cc: NodeShard's request path: Get
// (the optimistic seqlock read and its ghost-hit reloads), Set (conditions,
// versions, in-place and out-of-place writes, inserts), Delete and Touch.
//
// Thread safety: Get runs on any thread with no lock; Set, Delete and Touch
// run under the key's write lock (the "writer" of node_shard.h). The Get
// protocol, and who may change a KeyMeta and how, are at the top of
// node_shard.h.
#include <cassert>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "engine/furrball/entry.h"
#include "engine/furrball/furrball_testing.h"
#include "engine/furrball/node_shard.h"
#include "engine/furrball/node_shard_internal.h"

namespace furrballs {
namespace furrball_internal {
namespace {

// The expiry for a TTL set now: 0 (never) for no TTL, without a clock read,
// saturating at the largest deadline KeyMeta holds so that a huge TTL means
// "practically never" rather than wrapping into the past. REQUIRES: the
// clock reads below kMaxExpiryMs (FurrBall::Open checks it).
uint64_t Deadline(OperationClock& clock, uint64_t ttl_ms) {
  if (ttl_ms == 0) return 0;
  const uint64_t now = clock.NowMs();
  return ttl_ms > kMaxExpiryMs - now ? kMaxExpiryMs : now + ttl_ms;
}

bool SameEntry(const KeyMeta& a, const KeyMeta& b) {
  return a.page == b.page && a.offset() == b.offset() &&
         a.generation == b.generation;
}

}  // namespace

GetResult NodeShard::Get(const HashPair& h, std::string_view key,
                         std::string* value, int requester, ParkingLock& key_lock,
                         bool count_miss, bool read_disk, EntryKind wanted,
                         EntryKind* kind, int hit_node) {
  numatic_->SimulateRemoteAccess(requester, config_.node);
  OperationClock clock(config_.clock);
  // Chunks are the engine's own entries: only client keys are counted.
  const bool counted = wanted != EntryKind::kChunk;
  GetResult result = GetResident(h, key, value, key_lock, clock, wanted, kind);
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
    if (!spill_index_->Lookup(h, &spilled) ||
        clock.Passed(spilled.expiry_ms)) {
      // An ARC victim of h between ARC and the index: indexed now, look
      // it up again.
      if (SettleVictim(h)) continue;
      // No entry. Another Get may have reloaded the key since we looked in
      // memory: a reload inserts the key before it takes the entry, so look
      // in memory once more rather than miss a key that is being reloaded.
      result = GetResident(h, key, value, key_lock, clock, wanted, kind);
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
    // The blob's copy is an entry's portable form: the hit is the key
    // asked for only if the key stored with it is (entry.h).
    if (result.found) {
      std::string_view stored_key, stored_value;
      EntryKind stored_kind;
      if (SplitPortable(*value, &stored_key, &stored_value, &stored_kind) &&
          stored_key == key && KindMatches(stored_kind, wanted)) {
        if (kind != nullptr) *kind = stored_kind;
        value->erase(0, stored_value.data() - value->data());
      } else {
        result = GetResult{};
        break;
      }
    }
    // The reload's inserts may have pushed victims into the batch.
    FlushVictimBatchIfFull();
    if (!result.found) {
      result = GetResident(h, key, value, key_lock, clock, wanted, kind);
    }
    if (result.found) {
      result.reloaded = true;
      if (counted) stats_.Add(Counter::kGhostHits);
    }
  }
  if (!result.found) {
    value->clear();
    if (count_miss && counted) stats_.Add(Counter::kMisses);
  } else if (counted) {
    const int reader = hit_node < 0 ? requester : hit_node;
    stats_.Add(reader == config_.node ? Counter::kHitsLocal
                                      : Counter::kHitsRemote);
  }
  return result;
}

GetResult NodeShard::GetResident(const HashPair& h, std::string_view key,
                                 std::string* value, ParkingLock& key_lock,
                                 OperationClock& clock, EntryKind wanted,
                                 EntryKind* kind) {
  GetResult result;
  std::optional<KeyMeta> expired;
  auto attempt = [&](bool promote) -> bool {  // true: settled
    // One probe: the key is compared and the value copied inside CMap's
    // seqlock read of the KeyMeta (TryVisit), so both answers are about one
    // immutable image (the Get protocol above, with step 3's re-probe
    // replaced by the slot's sequence check).
    std::optional<KeyMeta> seen;
    bool is_key = false;
    EntryKind seen_kind = EntryKind::kValue;
    const Arc::VisitOutcome outcome =
        arc_->TryVisit(h, promote, [&](const KeyMeta& m) {
          seen = m;
          is_key = false;
          if (clock.Passed(m.expiry_ms)) return;
          // Bytes that cannot be a header mean m is stale (its page was
          // recycled): the sequence check below then fails.
          EntryHeader header;
          if (!HeaderWithin(m, &header)) return;
          const uint8_t* entry = pool_.EntryAt(m.page, m.offset());
          is_key = PayloadKeyEquals(entry, header, key, wanted, &seen_kind);
          if (is_key) {
            value->resize(header.value_size());
            CopyPayloadRange(entry, header.key_size, value->size(),
                             value->data());
          }
        });
    if (outcome == Arc::VisitOutcome::kChanged) return false;
    if (outcome == Arc::VisitOutcome::kAbsent ||
        clock.Passed(seen->expiry_ms)) {
      result.found = false;
      if (outcome != Arc::VisitOutcome::kAbsent) expired = seen;
      return true;
    }
    // Another key with the same hash: a miss, not its value.
    result.found = is_key;
    if (!is_key) return true;
    if (kind != nullptr) *kind = seen_kind;
    result.version = seen->version;
    result.ttl_remaining_ms =
        seen->expiry_ms == 0 ? 0 : seen->expiry_ms - clock.NowMs();
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
    ReclaimIfExpired(h, expired->page, expired->offset(), expired->generation,
                     clock.NowMs());
  }
  return result;
}

std::optional<bool> NodeShard::ResidentKeyIs(const HashPair& h,
                                             const KeyMeta& m,
                                             std::string_view key) const {
  EntryHeader header;
  const bool is_key =
      HeaderWithin(m, &header) &&
      PayloadKeyEquals(pool_.EntryAt(m.page, m.offset()), header, key);
  const std::optional<KeyMeta> again = arc_->Peek(h);
  if (!again.has_value() || !(*again == m)) return std::nullopt;
  return is_key;
}

bool NodeShard::Holds(const HashPair& h) const {
  return arc_->Peek(h).has_value();
}

SetResult NodeShard::Set(const HashPair& h, std::string_view key,
                         std::string_view value, const WriteOptions& options,
                         EntryKind kind, std::string* replaced_head) {
  const SetResult r = SetValue(h, key, value, options, kind, replaced_head);
  if (config_.spill_cold_pages && r.error == Error::kOk) {
    MigrateCooperatively();
  }
  return r;
}

uint64_t NodeShard::NextVersion(const HashPair& h, uint64_t current,
                                uint32_t superseded) {
  // The home's counter whichever shard holds the key: every writer of the
  // key, on any node, holds the home's key lock and uses this one counter.
  std::atomic<uint64_t>& counter = HomeOf(h).next_version_.value;
  const uint64_t per_key = current + 1 + superseded;
  // Relaxed: the key lock orders this load after the loads and fetch_adds
  // of the key's earlier writers, so the value read is at or above the one
  // every earlier version of the key was checked against or reserved from.
  if (current != 0 && per_key < counter.load(std::memory_order_relaxed)) {
    return per_key;
  }
  const uint64_t headroom = current != 0 ? kVersionStride - 1 : 0;
  return counter.fetch_add(1 + uint64_t{superseded} + headroom,
                           std::memory_order_relaxed) +
         superseded;
}

SetResult NodeShard::SetValue(const HashPair& h, std::string_view key,
                              std::string_view value,
                              const WriteOptions& options, EntryKind kind,
                              std::string* replaced_head) {
  const uint32_t size =
      static_cast<uint32_t>(PayloadSize(key.size(), value.size()));
  const uint32_t capacity = static_cast<uint32_t>(EntryFootprint(size));
  OperationClock clock(config_.clock);
  bool waited_for_evictions = false;
  for (;;) {
    const std::optional<KeyMeta> cur = arc_->Peek(h);
    // A key whose only copy is spilled is live for the conditions too. Under
    // the key lock it is in memory or in the spill index, never both.
    SpilledKey spilled;
    const bool live_spilled = !cur.has_value() && spill_index_ != nullptr &&
                              spill_index_->Lookup(h, &spilled) &&
                              !clock.Passed(spilled.expiry_ms);
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
        !clock.Passed(cur->expiry_ms)) {
      const std::optional<bool> is_key = ResidentKeyIs(h, *cur, key);
      if (!is_key.has_value()) continue;  // it changed: look again
      resident_is_key = *is_key;
    }
    const bool live =
        (cur.has_value() && !clock.Passed(cur->expiry_ms) &&
         resident_is_key) ||
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
        clock.Passed(dropped.expiry_ms)) {
      stats_.Add(Counter::kTtlExpirations);
    }
    const uint64_t version = NextVersion(h, cur.has_value() ? cur->version : 0,
                                         options.superseded_writes);
    const uint64_t expiry = Deadline(clock, options.ttl_ms);
    if (expiry != 0 && !has_ttl_keys_.load(std::memory_order_relaxed)) {
      has_ttl_keys_.store(true, std::memory_order_relaxed);
    }

    // Fast path (§2.8.5): overwrite in place when the new value fits the
    // entry. The bytes are written inside the slot's seqlock.
    // The capacity read here is the entry's unless cur is already stale;
    // the slot's lock below checks it again.
    EntryHeader cur_header;
    if (cur.has_value() && HeaderWithin(*cur, &cur_header) &&
        capacity <= cur_header.capacity) {
      bool same = false;
      uint32_t old_size = 0;
      const Error err = arc_->UpdateInPlace(h, [&](KeyMeta& m) {
        if (!SameEntry(m, *cur)) return;  // relocated since we looked
        // The footprint read above is a hint: m is the key's entry now, so
        // its header is read again here, where it cannot change. That keeps
        // the write inside the entry even if a stale cur matched (KeyMeta's
        // generation is only 16 bits, key_meta.h).
        const EntryHeader old = HeaderOf(m);
        if (capacity > old.capacity) return;
        same = true;
        old_size = old.size;
        CopyIfChunkedHead(m, replaced_head);
        WriteKeyedEntry(pool_.EntryAt(m.page, m.offset()), key, value,
                        old.capacity, kind);
        m.version = version;
        m.expiry_ms = expiry;
      });
      if (err == Error::kOk && same) {
        // The entry this write replaced had expired: one key left (an
        // expiration), one came in, so live_keys stays.
        if (clock.Passed(cur->expiry_ms)) {
          stats_.Add(Counter::kTtlExpirations);
        }
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
    WriteKeyedEntry(pool_.EntryAt(r.page, r.offset), key, value, capacity,
                    kind);
    const KeyMeta fresh{.version = version,
                        .expiry_ms = expiry,
                        .offset_words = KeyMeta::OffsetWords(r.offset),
                        .page = r.page,
                        .generation = r.generation & kGenerationMask};

    if (cur.has_value()) {
      bool same = false;
      KeyMeta before;
      EntryHeader replaced;
      const Error err = arc_->UpdateInPlace(h, [&](KeyMeta& m) {
        if (!SameEntry(m, *cur)) return;
        same = true;
        before = m;
        replaced = HeaderOf(m);
        CopyIfChunkedHead(m, replaced_head);
        const uint64_t locality = m.locality;  // who reads it is unchanged
        m = fresh;
        m.locality = locality;
      });
      if (err == Error::kOk && same) {
        pool_.Publish(r.page, capacity);
        pool_.EndWrite(r.page);
        pool_.Unpublish(before.page, replaced.capacity);
        if (clock.Passed(before.expiry_ms)) {
          stats_.Add(Counter::kTtlExpirations);
        }
        stats_.Add(Counter::kSets);
        stats_.AddSigned(Counter::kLiveBytes,
                         int64_t{size} - int64_t{replaced.size});
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
            static_cast<int64_t>(arc_->capacity())) {
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

DeleteResult NodeShard::Delete(const HashPair& h, uint64_t if_version,
                               std::string* replaced_head) {
  OperationClock clock(config_.clock);
  for (;;) {
    // Under the key lock only movers (which keep the version and the
    // deadline) and evictors change the KeyMeta, so a version checked here
    // still holds at the Erase, or the key is gone from memory and the index
    // is checked below.
    const std::optional<KeyMeta> cur = arc_->Peek(h);
    if (if_version != 0 && cur.has_value() && cur->version != if_version) {
      return DeleteResult{Error::kOk, false};
    }
    // The Delete takes effect at the Erase, so whether it removed a live
    // key is decided by the clock before it: read after, a thread delayed
    // between the two would call a key that was live when it removed it
    // expired, and answer deleted = false for it.
    if (cur.has_value() && cur->expiry_ms != 0) clock.NowMs();
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
      if (spill_index_ != nullptr && if_version != 0 &&
          (!spill_index_->Lookup(h, &spilled) ||
           spilled.version != if_version)) {
        return DeleteResult{Error::kOk, false};
      }
      if (spill_index_ != nullptr && spill_index_->Take(h, &spilled)) {
        const bool expired = clock.Passed(spilled.expiry_ms);
        stats_.Add(expired ? Counter::kTtlExpirations : Counter::kDeletes);
        return DeleteResult{Error::kOk, !expired};
      }
      return DeleteResult{Error::kOk, false};
    }
    if (err != Error::kOk) return DeleteResult{err, false};
    // Unpublished only by AccountRemoved: the bytes are still the entry's.
    CopyIfChunkedHead(erased, replaced_head);
    AccountRemoved(erased);
    const bool expired = clock.Passed(erased.expiry_ms);
    stats_.Add(expired ? Counter::kTtlExpirations : Counter::kDeletes);
    return DeleteResult{Error::kOk, !expired};
  }
}

Error NodeShard::Touch(const HashPair& h, uint64_t ttl_ms) {
  // Read up front: the liveness check below runs inside the slot's write.
  OperationClock clock(config_.clock);
  const uint64_t now = clock.NowMs();
  const uint64_t expiry = Deadline(clock, ttl_ms);
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
      if (spill_index_->Lookup(h, &spilled) &&
          !clock.Passed(spilled.expiry_ms) &&
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

void NodeShard::CopyIfChunkedHead(const KeyMeta& m, std::string* out) const {
  if (out == nullptr) return;
  const EntryHeader header = HeaderOf(m);
  if (header.kind != EntryKind::kChunkedHead) return;
  out->resize(header.value_size());
  CopyPayloadRange(pool_.EntryAt(m.page, m.offset()), header.key_size,
                   out->size(), out->data());
}

}  // namespace furrball_internal
}  // namespace furrballs
