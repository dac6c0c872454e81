// engine/furrball/node_shard_reclaim.cc: NodeShard's space management
// (report §2.9-§2.10): a writer's reservation and its in-line reclaim, page
// drains and relocation (the mover), whole-page eviction, TTL reclamation,
// and the worker's maintenance pass that keeps a reserve of free pages.
//
// Thread safety: everything but Reserve and ReclaimIfExpired runs under
// the node's reclaim mutex (one reclaimer at a time: the worker or a writer
// that ran out of room). Its holder never waits for a key lock: it only
// try-locks them (ReclaimIfExpired). The mover's protocol is at the top of
// node_shard.h, the page states in page_pool.h.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <thread>

#include "engine/furrball/entry.h"
#include "engine/furrball/node_shard.h"
#include "engine/furrball/node_shard_internal.h"

namespace furrballs {
namespace furrball_internal {

Error NodeShard::Reserve(uint32_t capacity, Reservation* out) {
  // Each round finds space, reclaims something, or finds that what is left
  // to reclaim is held by another thread's operation in flight (a write not
  // yet ended, or an entry whose KeyMeta already left the page but whose
  // Unpublish has not run yet: its thread was preempted between the two).
  // Those finish without waiting for anything a writer holds, so the writer
  // yields and looks again. It gives up only after config_.reclaim_patience
  // without any progress, which a healthy node never reaches.
  // A CAS only when this entry is the largest yet, which is rare.
  uint32_t largest = largest_entry_.load(std::memory_order_relaxed);
  while (capacity > largest &&
         !largest_entry_.compare_exchange_weak(largest, capacity,
                                               std::memory_order_relaxed)) {
  }
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
  return ReclaimStep();
}

NodeShard::Reclaim NodeShard::ReclaimStep() {
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
    // Whole-page eviction of the oldest of the sparsest pages
    // (PagePool::EvictionCandidate): bounded work that frees a page unless
    // another thread still holds a live byte of it (see Reserve). It
    // ignores ARC's order, which is why the worker tries to
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
    if (EvictOldSparsePage()) return Reclaim::kProgress;
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

uint32_t NodeShard::RetirePages(uint32_t n) {
  MutexLock l(&reclaim_mu_);
  uint32_t retired = 0;
  // Each round retires free pages or reclaims towards one. A step can
  // report progress without freeing a page (staging relocation, sealing
  // the open pages), hence the bound rather than a loop until done.
  for (uint32_t round = 0; retired < n && round < 2 * n + 8; ++round) {
    // The relocation reserve stays free: without it the node could not
    // compact.
    retired += pool_.RetireFreePages(n - retired, kRelocationReserve);
    if (retired == n || ReclaimStep() != Reclaim::kProgress) break;
  }
  return retired;
}

uint32_t NodeShard::UnretirePages(uint32_t n) {
  MutexLock l(&reclaim_mu_);
  return pool_.UnretirePages(n);
}

bool NodeShard::DrainSparsest(uint64_t max_live_bytes) {
  uint64_t live = 0;
  const uint32_t page = pool_.SparsestSealedPage(&live);
  if (page == kNoPage || live > max_live_bytes) return false;
  // A drain frees a page but may take a fresh one for what it moves. If the
  // live bytes do not fit the open relocation page, that page is sealed
  // with the room its next entry did not fit left unused (less than the
  // largest entry), and a fresh one opened: the room gained is then at
  // least page - live - min(room, largest entry). Entries over half a page
  // (one per page) make that zero, and a writer would drain one page into
  // another for ever; small entries waste little, and those drains go on.
  // COLD pages drain onto the COLD destination, which the compactor sizes.
  const uint64_t room = pool_.relocation_room();
  const uint64_t unused = std::min<uint64_t>(
      room, largest_entry_.load(std::memory_order_relaxed));
  const bool to_cold =
      config_.spill_cold_pages &&
      PageState::Tier(pool_.page(page).state.load(std::memory_order_relaxed)) ==
          PageTier::kCold;
  if (!to_cold && live > room && live + unused >= pool_.page_size()) {
    return false;
  }
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
  // The walk runs in this call, under the reclaim_mu_ its caller holds;
  // clang's lock analysis does not follow a lock into a lambda.
  ForEachKeyedEntry(page, frozen, [&](uint32_t offset,
                                      const EntryHeader& header,
                                      const HashPair& h)
                                      ABSL_NO_THREAD_SAFETY_ANALYSIS {
    const std::optional<KeyMeta> m = arc_->Peek(h);
    if (!m.has_value() || !PointsAt(*m, page, offset, generation)) {
      return true;  // dead entry
    }
    if (m->Expired(now) &&
        ReclaimIfExpired(h, page, offset, generation, now)) {
      return true;
    }
    // The walk's size is a hint (an in-place write may change it; MoveEntry
    // checks again inside the slot's lock). The page is frozen, so the
    // header is an entry's.
    const uint32_t capacity =
        static_cast<uint32_t>(EntryFootprint(header.size));
    Reservation r;
    const bool reserved =
        to_cold ? pool_.ReserveForColdMigration(capacity, /*for_drain=*/true,
                                                &r)
                : pool_.ReserveForRelocation(capacity, &r);
    if (!reserved) return false;  // no room
    MoveEntry(h, page, offset, generation, r, Counter::kRelocations);
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
  EntryHeader before;  // the moved entry's, read inside the slot's lock
  for (int i = 0; i < kBusyRetries && !moved; ++i) {
    const Error err = arc_->UpdateInPlaceWithoutHit(h, [&](KeyMeta& cur) {
      if (!PointsAt(cur, page, offset, generation)) return;
      before = HeaderOf(cur);
      if (EntryFootprint(before.size) > r.capacity) return;
      // Inside the slot's seqlock: an in-place writer of this key has
      // either finished (we copy its bytes) or is refused the slot and
      // looks again (it then finds the moved entry, see Set).
      CopyEntry(pool_.EntryAt(page, offset), pool_.EntryAt(r.page, r.offset),
                before, r.capacity);
      cur.page = r.page;
      cur.offset_words = KeyMeta::OffsetWords(r.offset);
      cur.generation = r.generation & kGenerationMask;
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
    WriteDeadEntry(pool_.EntryAt(r.page, r.offset), r.capacity);
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
  ParkingLock& lock = HomeKeyLock(h);
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

bool NodeShard::EvictOldSparsePage() {
  uint64_t live = 0;
  const uint32_t page = pool_.EvictionCandidate(&live);
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
  ForEachKeyedEntry(page, frozen, [&](uint32_t offset, const EntryHeader&,
                                      const HashPair& h) {
    const std::optional<KeyMeta> m = arc_->Peek(h);
    if (m.has_value() && PointsAt(*m, page, offset, generation)) {
      // No key lock: an eviction may take any key at any time. If a writer
      // re-pointed the key meanwhile, that newer entry is what gets erased
      // and accounted; the cache just loses it a little earlier.
      EraseAndAccount(h, m->Expired(now) ? Counter::kTtlExpirations
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

uint32_t NodeShard::RefillTarget() const {
  // The rule and why are FreePageReserve's (memory_plan.h). Every free page
  // is memory that holds no data: 1/16 until 2026-11-24 (3 pages of a 4 or
  // 8 MiB node), 1/32 until 2026-11-25 (7 pages of 256 KiB at 64 MiB).
  return FreePageReserve(pool_.pages_in_service(), config_.spill_cold_pages);
}

bool NodeShard::RefillStep() {
  if (pool_.free_pages() >= RefillTarget()) return false;
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
    ForEachKeyedEntry(page, frozen, [&](uint32_t offset, const EntryHeader&,
                                        const HashPair& h) {
      const std::optional<KeyMeta> m = arc_->Peek(h);
      if (m.has_value() && PointsAt(*m, page, offset, generation) &&
          m->Expired(now)) {
        ReclaimIfExpired(h, page, offset, generation, now);
      }
      return true;
    });
    if (pool_.FinishFreeze(page, frozen)) {
      stats_.Add(Counter::kPagesRecycled);
    }
    return;
  }
}

bool NodeShard::Maintain() {
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
  bool refill_left = true;
  for (int step = 0; step < kMaxRefillSteps && refill_left; ++step) {
    MutexLock l(&reclaim_mu_);
    refill_left = RefillStep();
  }
  {
    MutexLock l(&reclaim_mu_);
    ReclaimExpired();
    if (spill_index_ != nullptr) {
      // Writers' victims (a full key table) fill the batch too.
      FlushVictimBatch(/*force=*/false);
      SweepSpillIndex();
      DeleteDeadSpillPages();
    }
  }
  GrowKeyTableStep();
  // Every request counts one of these (a chunked value's parts too).
  uint64_t requests = 0;
  for (Counter c : {Counter::kHitsLocal, Counter::kHitsRemote, Counter::kMisses,
                    Counter::kSets, Counter::kDeletes, Counter::kTouches}) {
    requests += stats_.Sum(c);
  }
  const bool served = requests != requests_at_last_pass_;
  requests_at_last_pass_ = requests;
  return served || refill_left || growth_ != Growth::kIdle;
}

void NodeShard::GrowKeyTableStep() {
  const MemoryPlan& plan = config_.memory_plan;
  if (plan.key_ceiling <= config_.max_keys) return;  // a fixed table
  switch (growth_) {
    case Growth::kMoving:
      // GrowStep says "done" once the old memory is released, whoever's
      // step finished the growth (ConcurrentARC's GrowthTail), so the
      // pages that paid for the peak and that the new table does not need
      // can come back at once (GiveBackUnneededPages).
      if (!(shrinking_ ? ShrinkStep() : arc_->GrowStep(kGrowMovesPerPass))) {
        KeyTableStepForTesting();
        return;
      }
      stats_.Add(shrinking_ ? Counter::kKeyTableShrinks
                            : Counter::kKeyTableGrowths);
      growth_ = Growth::kIdle;
      GiveBackUnneededPages();
      KeyTableStepForTesting();
      return;
    case Growth::kIdle: {
      // What a finished growth could not give back yet.
      GiveBackUnneededPages();
      KeyTableLoad load;
      load.capacity = arc_->capacity();
      load.resident_keys = arc_->size();
      const uint64_t evictions = stats_.Sum(Counter::kKeyTableFull);
      load.evicted_for_keys = evictions != key_evictions_seen_;
      key_evictions_seen_ = evictions;
      // Keys that left memory for page room: evicted, or spilled with the
      // spill tier on (where the worker's victims all go to the spill
      // batch). A full key table's victims are spilled too, but they also
      // count in kKeyTableFull, which rules a shrink out.
      const uint64_t page_evictions = stats_.Sum(Counter::kEvictionsCapacity) +
                                      stats_.Sum(Counter::kSpilledKeys);
      load.evicted_for_pages = page_evictions != page_evictions_seen_;
      page_evictions_seen_ = page_evictions;
      load.free_pages = pool_.free_pages();
      load.retired_pages = pool_.retired_pages();
      load.retired_tables = RetiredKeyTables();
      growth_to_ = KeyTableGrowthTo(plan, load, RefillTarget());
      shrinking_ = false;
      if (growth_to_ == load.capacity && config_.eviction_enabled) {
        growth_to_ = KeyTableShrinkTo(plan, load, RefillTarget());
        shrinking_ = growth_to_ < load.capacity;
      }
      if (growth_to_ == load.capacity) return;
      growth_ = Growth::kPaying;
      paying_passes_ = 0;
      break;
    }
    case Growth::kPaying:
      break;
  }
  // The pages that pay for the peak (the new table and what of the old one
  // is still in memory, KeyTableGrowthPeakBytes; for a shrink both whole)
  // leave service before the new table is mapped.
  growth_from_ = arc_->capacity();
  const uint64_t peak =
      shrinking_ ? KeyTableBytes(growth_from_) + KeyTableBytes(growth_to_)
                 : KeyTableGrowthPeakBytes(growth_from_, growth_to_);
  const uint32_t need = RetiredPagesFor(
      plan, peak + RetiredKeyTableBytes(RetiredKeyTables()));
  const uint32_t retired = pool_.retired_pages();
  if (need > retired) {
    const uint32_t got = RetirePages(need - retired);
    if (got > 0) KeyTableStepForTesting();
    if (got < need - retired) {
      if (++paying_passes_ < kMaxPayingPasses) return;
      growth_ = Growth::kIdle;
      GiveBackUnneededPages();
      KeyTableStepForTesting();
      return;
    }
  }
  if (shrinking_) {
    // Paying took passes: if the keys came back meanwhile (the values got
    // smaller again), the target no longer leaves the rule's eighth above
    // them and the trim would evict keys the table holds; give up.
    const uint64_t resident = arc_->size();
    if (resident + resident / 8 > growth_to_) {
      growth_ = Growth::kIdle;
      GiveBackUnneededPages();
      KeyTableStepForTesting();
      return;
    }
  }
  if (!(shrinking_ ? arc_->Shrink(growth_to_) : arc_->Grow(growth_to_))
           .ok()) {
    // No memory for the new table (ResourceExhausted): the node goes on
    // as it was, with its pages back.
    growth_ = Growth::kIdle;
    GiveBackUnneededPages();
    KeyTableStepForTesting();
    return;
  }
  growth_ = Growth::kMoving;
  KeyTableStepForTesting();
}

uint32_t NodeShard::RetiredKeyTables() const {
  // Every finished resize leaves its old table mapped.
  return static_cast<uint32_t>(stats_.Sum(Counter::kKeyTableGrowths) +
                               stats_.Sum(Counter::kKeyTableShrinks));
}

void NodeShard::KeyTableStepForTesting() const {
  if (const EngineTestHooks* t = TestHooks();
      t != nullptr && t->key_table_step != nullptr) {
    t->key_table_step(config_.node);
  }
}

void NodeShard::GiveBackUnneededPages() {
  const MemoryPlan& plan = config_.memory_plan;
  const uint32_t retired = pool_.retired_pages();
  const uint32_t need =
      RetiredPagesFor(plan, KeyTableBytes(arc_->capacity()) +
                                RetiredKeyTableBytes(RetiredKeyTables()));
  if (retired <= need) return;
  // No more than what is mapped now leaves room for: everything the node
  // mapped but its page block and the released tables, plus the pages in
  // service (what stays owed is given back by later idle passes).
  const uint64_t held = numatic_->MappedBytes(config_.node) - page_bytes() -
                        key_table_released_bytes() + page_bytes_in_service();
  if (held >= plan.node_budget_bytes) return;
  const uint64_t room = (plan.node_budget_bytes - held) / config_.page_size;
  UnretirePages(static_cast<uint32_t>(
      std::min<uint64_t>(retired - need, room)));
}

}  // namespace furrball_internal
}  // namespace furrballs
