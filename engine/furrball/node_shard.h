// engine/furrball/node_shard.h: NodeShard, one NUMA node's part of a FurrBall
// (the report's PerNodeDetails, §2.2, §2.5, §2.8.5, §2.10): a ConcurrentARC
// of KeyMeta over a CMap, a PagePool, key write locks, a version counter and
// sharded statistics, all allocated on the node.
//
// Thread safety: thread-safe. Get may run on any thread with no lock. Set,
// Delete and Touch require the key's write lock (KeyLockFor), which the
// FurrBall takes; at most one key lock is held by a thread at a time.
// Maintain() runs on the node's NodeJob worker. With the spill tier the shard
// also runs a spill writer thread of its own, which writes sealed batches of
// ARC victims (FlushVictimBatch) and is joined by the destructor.
//
// ---------------------------------------------------------------------------
// Who changes a key's KeyMeta, and how
//
//   writer    Set/Delete/Touch, holding the key's write lock. Reads the
//             KeyMeta, decides (if-absent, compare-and-set), then changes it
//             with one CMap operation: UpdateInPlace (overwrite, touch),
//             ConcurrentARC::Set (insert) or Erase (delete).
//   mover     relocation (staging relocation, page drain, cold migration),
//             holding the reclaim mutex but no key lock: UpdateInPlace that
//             only changes the location, and only if the KeyMeta still
//             points at the entry being moved; the bytes are copied inside
//             the callback, so no writer can change them mid-copy (§2.9.3
//             "memcpy inside UpdateInPlace"). MoveEntry is the one
//             implementation.
//   evictor   ARC capacity eviction (inside ConcurrentARC::Set, under its
//             SpinLock; with the spill tier the victim is indexed after it,
//             see "ARC victims" below), ForceEvictOne, whole-page eviction and TTL
//             reclamation (the worker's, and a Get's of the expired entry
//             it found, with the key lock try-locked): erase the slot.
//             Erasing needs no key lock: an eviction may remove any key at
//             any time.
//
// Because only a writer inserts, and writers of one key are serialized by
// its lock, a writer that saw "absent" can insert without racing another
// insert, and every KeyMeta that leaves a slot (overwritten, moved, erased)
// is seen by exactly one actor, who then unpublishes the old entry from its
// page (PagePool::Unpublish). That keeps the per-page live/dead accounting
// exact, which page recycling depends on.
//
// Key locks are ParkingLocks (engine/common/parking_lock.h): a holder may
// block, and its waiters sleep on a futex.
//
// Lock order: key lock -> reclaim mutex -> (ARC SpinLock | CMap slot seq),
// and key lock -> reclaim mutex -> batch_mu_ -> the spill index's mutexes.
// The reclaim mutex holder never waits for a key lock (TTL reclamation only
// try-locks). No SpinLock or slot seq is held across anything that can
// block or allocate: ARC's eviction callback only parks its victim in a
// transit slot (below), and batch_mu_ and the index's mutexes are taken
// after ARC's lock is released. They are leaves held only for in-memory
// work (the node's spill writer thread writes a sealed batch with no lock
// held; FlushVictimBatch).
//
// ---------------------------------------------------------------------------
// ARC victims (spill tier on): erased under ARC's lock, indexed after it
//
// ARC evicts inside its own critical section (a Set that found the key
// table full, or the worker's ForceEvictOne). Copying the victim into the
// spill batch takes batch_mu_ and allocates, so it happens after ARC's lock
// is released, in two steps:
//
//   claim    OnEvict, under ARC's lock: takes a free VictimSlot (acquire
//            load of FREE; only evictors claim and they hold ARC's lock),
//            writes the h2, the KeyMeta and why, then stores PENDING
//            (release). The entry stays published, so its page cannot be
//            recycled and its bytes stay as they were. No free slot: the
//            victim is dropped (an eviction, as without the spill tier).
//   drain    DrainVictimSlot: CAS PENDING -> DRAINING (acquire), hash the
//            key in the entry (h1 and h2 for the index and the blob; ARC
//            keeps h2 only), copy into the batch and index it under
//            batch_mu_, unpublish the entry,
//            store FREE (release), then decrement victims_pending_
//            (release). The evicting thread drains every pending slot as
//            soon as its ARC call returns (DrainVictims).
//
// No resurrection (spill_index.h, "victim"): between the claim and the
// drain the key is in neither ARC nor the index. Every writer of the key
// (which holds its key lock) that could have looked in that window settles
// it before deciding or acknowledging: SettleVictim passes through ARC's
// lock (WaitForEvictionsInFlight), after which every eviction of the key
// that started earlier has claimed its slot, then drains a PENDING slot of
// the key itself or yields until another thread's DRAINING one is FREE.
// So: an inserting Set settles after its insert and then drops any older
// index entry (TakeIfOlder); Delete settles after its Erase and before it
// looks at the index; a conditional Set, a Touch and a Get that found the
// key nowhere settle and look again. A victim evicted after the writer's
// own ARC operation is a copy of the writer's value, never an older one.
// tests/spill/spill_race_test forces the interleavings.
//
// ---------------------------------------------------------------------------
// Versions (NextVersion): per key, with its home's counter as a ceiling
//
// A key's versions come from the counter of its home shard
// (NodeRouter::HomeIndex, ShardConfig::home_of), whichever shard holds the
// key: under hash routing that is the owner, under round-robin and
// thread-local routing the key may live on any node, but its writers all
// hold the home's key lock and all use the home's counter.
//
// A write of a resident key takes the key's version + 1 (+ the superseded
// writes it acknowledges) as long as that is below the home's counter, read
// with a relaxed load; a new key, and a key whose versions reached the
// counter, take versions from the counter (fetch_add). So the request path
// writes the shared counter line only for inserts and for one overwrite in
// kVersionStride of a hot key; overwrites of a resident key only read it.
//
// Invariant: every version of a key issued is below its home's counter,
// which only grows. The per-key path checks it; the counter path reserves
// its versions (and kVersionStride - 1 more of headroom for the key's next
// overwrites) before it uses them. Hence a key's versions only grow, across
// deletes, evictions and re-creation on another node too: its next write
// holds the key lock that its earlier writers released, so it reads the
// same counter at or above the value that any earlier version was issued
// below, and a new key's counter version exceeds them all. (Until issue 16
// each node used its own counter, node i from i * 2^58 + 1: a key deleted
// on node 1 and written again on node 0 went back.)
// Relocation, spill and a move between nodes (migration) keep a key's
// version: it stays below the home's counter, so nothing more is needed. A
// reload re-inserts it with the version it had; warm restart (hash routing:
// home == owner) moves each counter above every restored version of its
// node (RestoreSpilled). Versions are not unique across keys, only within
// one: (version, page, generation, offset) still names one byte image of a
// key, which is what the Get protocol below needs.
//
// ---------------------------------------------------------------------------
// The Get protocol (seqlock read across CMap and page)
//
//   1. m1 = the KeyMeta, read by ConcurrentARC::TryVisit (CMap's seqlock
//      read of the slot, and a PromoteBuf promotion)
//   2. inside the visit: compare the stored key with the key asked for and
//      copy the value from page m1.page at m1.offset() (acquire loads)
//   3. the slot's seq again (TryVisit's second check): unchanged means the
//      slot still holds m1, i.e. m2 == m1 for the m2 a fresh probe would
//      read (any change to a slot's KeyMeta, or its erase, passes through
//      the slot's seqlock and bumps seq)
//   4. unchanged ? return the bytes (or a miss if the stored key differs) :
//      retry (after kOptimisticReads attempts, retry under the key lock)
//
// (Until issue 13, step 3 was a second full probe, Peek, comparing m2 with
// m1; the argument below is the same.)
//
// No step reads a hash from the page: the entry header holds only the
// payload's size and capacity (entry.h; H1 and H2 were there until
// 2026-11-25, and no reader ever compared them). Step 2's key comparison
// decides whose bytes these are, step 3 whether they are one image. The
// page walkers, which have no KeyMeta to start from, hash the stored key
// to find the slot (ForEachKeyedEntry) and then act only through that
// slot's KeyMeta, as before.
//
// Why 4 proves the bytes are m1's. A KeyMeta names one immutable byte image:
// every write of a key takes a version above the key's last one (see
// "Versions"), and a relocation moves the key to a new (page, generation, offset)
// (a page's offsets are handed out once per generation). So if anything
// overwrote the bytes we copied, it was (a) an in-place overwrite of this key,
// which changed the version, or (b) a write to the page after it was
// recycled, which required this key's KeyMeta to leave the page first. Every
// page store is a release and every page load an acquire (entry.h): when step
// 2 reads a byte stored by (a) or (b), the store's writer had already changed
// the slot (a: under its seqlock; b: the KeyMeta change happens before the
// recycle via Unpublish/FinishFreeze, which happens before the new writer's
// bump), so step 3, ordered after step 2's acquire load, sees a KeyMeta
// different from m1. Entries never leave the mapped block, so a stale read is
// in bounds. The KeyMeta includes the page generation because a key can be
// relocated back to the very same page and offset after a recycle.
//
// A writer pair (in-place overwrite, relocation) writes bytes inside the
// CMap's UpdateInPlace callback, i.e. between the slot's seq odd and even, so
// a reader's step 3 cannot return the old KeyMeta once it saw new bytes.
//
// ---------------------------------------------------------------------------
// Space (report §2.10): a Set reserves on the current page, then on a fresh
// page, then on the staging page. When all are full it reclaims in line
// (recycle dead pages, drain the sparsest page into the relocation page,
// else evict the sparsest page's keys: bounded work; kNoMemory when eviction
// is disabled). Eviction frees a page unless another thread still holds a
// live byte of it: every actor that moves a KeyMeta off a page unpublishes
// the entry just after the CMap change, so a thread preempted between the
// two keeps the page's live count up while no KeyMeta points into it. The
// writer then waits (yields and retries, counted as reclaim_waits) instead
// of failing: that thread never waits for anything a writer holds. The worker keeps a reserve of
// free pages so that the request path rarely gets there: it relocates the
// staging page's entries, drains pages with a quarter or more dead bytes,
// asks ARC for victims (ForceEvictOne) when no page is sparse enough, and
// reclaims expired keys.
//
// ---------------------------------------------------------------------------
// Pages out of service: how a larger key table is paid for (memory_plan.h)
//
// The page block is mapped once; a key table larger than the one the node
// started with is paid for by value pages taken out of service, so that
// fixed + key table(s) + spill buffers + pages in service * page_size stays
// within the node's share at every moment (RetiredPagesFor).
//
//   retire    RetirePages(n), under the reclaim mutex: the highest-numbered
//             free pages beyond the relocation reserve become RETIRED and
//             their memory is discarded (PagePool::RetireFreePages). If
//             none is free, ReclaimStep frees one first, exactly as for a
//             writer with no room (recycle, staging, drain, else spill or
//             evict the sparsest page), so the lock order is the writer's:
//             reclaim mutex -> (ARC SpinLock | CMap slot seq), no key lock
//             waited for. It stops early rather than wait for an operation
//             in flight, and never drops a key with eviction disabled.
//   unretire  UnretirePages(n): RETIRED -> EMPTY, pushed on the free list.
//
// A retired page is in no list and never open, so no writer, mover,
// walker or recycler can reach it; a writer holding a stale `current`
// index finds it not open and rotates (page_pool.h).
//
// The growth (GrowKeyTableStep, the worker's, at the end of each
// maintenance pass with no lock held), one state a pass:
//
//   idle     the rule (KeyTableGrowthTo, memory_plan.h): ARC holds its c
//            keys and evicted by key count since the last pass: grow to
//            the largest capacity up to 2c whose table leaves pages for
//            its keys at the pages per key in use now, beside the
//            worker's reserve (none if less than c/16 more) -> paying.
//            Else the shrink rule (KeyTableShrinkTo): fewer than c/2 keys
//            resident, and entries evicted for page room but none by key
//            count since the last pass: shrink to the split for the entry
//            size seen now (at least the resident keys and an eighth,
//            at least the starting table, at most 3/4 c) -> paying, as a
//            shrink. Not with eviction disabled (the shrink's trim could
//            drop a key admitted meanwhile).
//   paying   RetirePages for the growth's peak (KeyTableGrowthPeakBytes:
//            the new table and what of the old one is still in memory),
//            free pages first, then pages freed by the reclaimer (evicting
//            what the refill would), BEFORE ConcurrentARC::Grow maps the
//            new table -> moving; not all retired within
//            kMaxPayingPasses, or Grow refused -> give back what the
//            current table does not need -> idle.
//   moving   GrowStep(kGrowMovesPerPass); Sets move keys too. When
//            GrowStep says the growth is over (its old memory is released
//            by then, whichever thread finished it): count it, give back
//            the pages the grown table does not need, as far as what the
//            node maps now allows -> idle, which gives back the rest in
//            later passes.
//
// A shrink runs the same states: paying retires the pages for both tables
// whole (the old one stays in memory until ARC's trim and compaction are
// over; ConcurrentARC::Shrink), usually a page or two beyond what the old
// table already holds out of service; ConcurrentARC::Shrink lowers c at
// once; moving steps it (trim, compaction, copy) to its end; the pages the
// old table held out of service then come back (GiveBackUnneededPages),
// which is where the memory goes back to the value pages.
//
// ---------------------------------------------------------------------------
// Cold pages (ShardConfig::spill_cold_pages; report §2.4.1, §2.9.1-§2.9.3)
//
// Instead of asking ARC for victims, the reserve refill moves ARC's coldest
// keys to COLD pages in memory and lets whole COLD pages go:
//
//   mark      ConcurrentARC::ColdestKeys(kColdWindow): the keys ForceEvictOne
//             would take next, under ARC's SpinLock, nothing evicted. Those
//             not already on a COLD page are queued with the KeyMeta seen
//             at marking (cold_keys_, guarded by the reclaim mutex; this is
//             the report's TempCtrl = COLD, kept per node rather than per
//             page). The queue is dropped at the start of every maintenance
//             pass and re-marked when needed, so a mark is at most one pass
//             old.
//   migrate   a mover (above): reserve on the pool's COLD destination, then
//             MoveEntry, which changes only the location, only if the
//             KeyMeta still points at the marked entry, copying inside the
//             UpdateInPlace callback, and unpublishes the old entry after.
//             A key whose KeyMeta changed since marking (overwritten,
//             deleted, moved) is skipped; so is one that is already on a
//             COLD page. A key read since marking is not detected and is
//             moved anyway: harmless, a COLD page is ordinary memory (Gets
//             hit it and promote the key), §2.9.3 "unnecessary migrations".
//             The worker migrates kColdMigrateBatch keys per refill step;
//             every 16th Set of a thread (thread-local count, so no shared
//             line is written) while keys are queued try-locks the reclaim
//             mutex and migrates one key, or skips if it is busy
//             (cooperative migration, §2.9.2). Lock order is unchanged:
//             key lock (the Set's own) -> reclaim mutex (try) -> slot seq.
//   spill     when a refill step finds nothing sparse to drain, the fullest
//             sealed COLD page is frozen and written whole (SpillFrozen:
//             one PageBlob, keys indexed then erased under their key lock,
//             page EMPTY), or without a spill store evicted whole
//             (EvictFrozen). The COLD destination is sealed when full, or
//             early when nothing is left to migrate (the coldest keys all
//             sit on COLD pages) or no page is free to open another.
//   fallback  only when there is no COLD page at all and nothing could be
//             migrated: ForceEvictOne as without cold pages (cold_fallbacks).
//
// A drained COLD page's survivors go back to the COLD destination and every
// other drain's to the relocation page (HOT in this mode), so COLD pages
// hold only keys that ARC called cold. Re-heated keys on a COLD page are
// not moved back before its spill: they go to disk with it and come back on
// their next Get.
#ifndef FURRBALLS_ENGINE_FURRBALL_NODE_SHARD_H_
#define FURRBALLS_ENGINE_FURRBALL_NODE_SHARD_H_

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <memory_resource>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <absl/base/thread_annotations.h>
#include <absl/status/statusor.h>

#include "engine/arc/concurrent_arc.h"
#include "engine/common/error.h"
#include "engine/common/hash_pair.h"
#include "engine/common/raw_allocator.h"
#include "engine/common/parking_lock.h"
#include "engine/furrball/clock.h"
#include "engine/furrball/key_meta.h"
#include "engine/furrball/memory_plan.h"
#include "engine/furrball/node_stats.h"
#include "engine/furrball/operations.h"
#include "engine/furrball/options.h"
#include "engine/furrball/page_pool.h"
#include "engine/furrball/spill_index.h"
#include "engine/furrball/stats.h"
#include "engine/furrball/sync.h"
#include "engine/numatic/numatic.h"
#include "engine/spill/page_blob.h"

namespace furrballs {
namespace spill {
class SpillStore;
}  // namespace spill
namespace furrball_internal {

// A key write lock on its own cache line, so that two writers of different
// keys never bounce a line between them. A ParkingLock, not a SpinLock: it
// is held through a whole Set, which can wait for the reclaim mutex, yield
// in Reserve for up to reclaim_patience, or write a page to RocksDB, and a
// writer waiting behind that must sleep rather than spin.
struct alignas(kCacheLineSize) KeyLock {
  ParkingLock lock;
};

class NodeShard;

struct ShardConfig {
  int node = 0;          // node id (Numatic)
  int node_index = 0;    // 0..node_count-1
  uint32_t page_count = 0;
  uint32_t page_size = 0;
  uint32_t max_keys = 0;
  bool eviction_enabled = true;
  // How long a writer that found no room keeps waiting for other threads'
  // operations in flight to release pages before it answers kNoMemory (see
  // NodeShard::Reserve). Only a thread stalled that long mid-operation, or
  // an accounting bug, can make a writer reach it.
  std::chrono::milliseconds reclaim_patience{2000};
  const Clock* clock = nullptr;
  // The home shard of any key (NodeRouter::HomeIndex), which may be
  // another node's: it holds the key's write lock (TTL reclamation
  // try-locks it) and the counter the key's versions come from (see
  // "Versions").
  NodeShard& (*home_of)(void* context, const HashPair& h) = nullptr;
  void* home_context = nullptr;
  // The spill tier (docs/spill.md); nullptr = off, pages are dropped when
  // memory runs out. Outlives the shard.
  spill::SpillStore* spill_store = nullptr;
  // FurrBallOptions::spill_reload_whole_page, and its default.
  bool spill_reload_whole_page = FurrBallOptions{}.spill_reload_whole_page;
  // FurrBallOptions::spill_cold_pages (see "Cold pages" above), and its
  // default. Works with or without a spill store.
  bool spill_cold_pages = FurrBallOptions{}.spill_cold_pages;
  // The node's memory plan, for the key table's growth ("Pages out of
  // service" above). The default plan (key_ceiling 0) never grows.
  MemoryPlan memory_plan;
  // The hash every key this shard stores was given (FurrBall::Hash): the
  // page walkers recompute an entry's HashPair from its stored key with it,
  // since the entry header keeps none (entry.h).
  KeyHasher hasher;
};

class NodeShard {
 public:
  // Allocates the page block and every structure on `config.node`.
  // Call it on a thread pinned to the node (the node's NodeJob), so that
  // first-touch placement agrees with the binding on simulated topologies.
  static absl::StatusOr<std::unique_ptr<NodeShard, void (*)(NodeShard*)>>
  Create(const ShardConfig& config, const Numatic* numatic);

  // The deleter of the pointer Create returns: destroys the shard and
  // returns its memory to the node's resource.
  static void Destroy(NodeShard* shard);

  NodeShard(const NodeShard&) = delete;
  NodeShard& operator=(const NodeShard&) = delete;

  int node() const { return config_.node; }
  int node_index() const { return config_.node_index; }

  // The write lock of a key whose home is this node.
  ParkingLock& KeyLockFor(const HashPair& h) {
    return key_locks_[h.h2 & key_lock_mask_].lock;
  }

  // ---- Request path ------------------------------------------------------

  // Copies the value of a live key into *value. `requester` is the calling
  // thread's node (for hit locality). `key_lock` is taken only if the
  // optimistic reads keep losing to writers. A search over several shards
  // passes count_miss = false and counts its one miss with CountMiss. With
  // read_disk = false a key found only in the spill index is answered with
  // on_disk (FurrBall::GetFromMemory) and not counted.
  // `key` is the key whose hash is `h`: a hit is checked against the key
  // stored with the value (entry.h), so another key with the same hash is a
  // miss. `wanted` says which entry kinds count as the key (KindMatches:
  // kValue for a client's key, which also finds a chunked head; kChunk for
  // a chunk's internal key, whose reads count neither as hits nor as
  // misses); *kind gets the kind of a hit. `hit_node`, when not -1, is the
  // node a hit counts for instead of `requester`: a broadcast race probes
  // on this node's own worker (requester = this node: a local read, no
  // delay) for a caller on `hit_node`, whose hit it is (key_locator.h).
  GetResult Get(const HashPair& h, std::string_view key, std::string* value,
                int requester, ParkingLock& key_lock, bool count_miss = true,
                bool read_disk = true, EntryKind wanted = EntryKind::kValue,
                EntryKind* kind = nullptr, int hit_node = -1);
  // Whether the shard holds the key (live or expired); for search routing.
  bool Holds(const HashPair& h) const;
  // FurrBall::PrefetchGet's step `step` for a key of this shard: steps 0 and
  // 1 the key table's lines (CMap::Prefetch), step 2 the start of the key's
  // entry in its page, found by a lookup that steps 0 and 1 made cheap.
  void PrefetchGet(const HashPair& h, int step) const {
    if (step < 2) {
      arc_->Prefetch(h, step);
    } else if (const std::optional<KeyMeta> m = arc_->Peek(h)) {
      __builtin_prefetch(pool_.EntryAt(m->page, m->offset()));
    }
  }

  // REQUIRES: the key's write lock is held.
  // Stores `key` with the value. The key identifies the entry by `h` alone
  // (a Set replaces whatever entry has the hash); conditions (if-absent,
  // compare-and-set) treat a resident entry of another key as absent.
  // `kind` is what the entry holds (entry.h). If the entry this write
  // replaced in memory was a chunked head, its value goes to
  // *replaced_head (when given), so that the caller can delete its chunks.
  SetResult Set(const HashPair& h, std::string_view key,
                std::string_view value, const WriteOptions& options,
                EntryKind kind = EntryKind::kValue,
                std::string* replaced_head = nullptr);
  // Removes the key's entry; with if_version != 0 only if its version is
  // that one (else deleted = false). A chunked head it removed from memory
  // goes to *replaced_head as in Set.
  DeleteResult Delete(const HashPair& h, uint64_t if_version = 0,
                      std::string* replaced_head = nullptr);
  Error Touch(const HashPair& h, uint64_t ttl_ms);

  // ---- Keys following their readers (key_mover.h) ----------------------

  // Counts one sampled read of resident key `h` in its locality counters
  // (migrate_policy.h): by a thread on this node (local) or on another.
  // True if the key should now move to that reader's node. Lock-free: one
  // more probe, and a seqlock write of the slot unless the counters would
  // not change (or a writer holds the slot: the sample is dropped).
  bool RecordRead(const HashPair& h, bool local);
  // REQUIRES: the key's write lock.
  // Copies the portable form (entry.h: kind, key, value) and KeyMeta of
  // `h` if it is resident, unexpired and a client's plain value; false
  // otherwise (chunked heads and chunks stay where they are: key_mover.h).
  bool CopyForMove(const HashPair& h, std::string* payload, KeyMeta* meta);
  // REQUIRES: the key's write lock; `h` is not resident here.
  // Inserts a moved copy with meta's version and deadline and the counters
  // SimpleMigratePolicy::AfterMove gives it; counted as a migration in.
  Error InsertMoved(const HashPair& h, std::string_view payload,
                    const KeyMeta& meta);
  // REQUIRES: the key's write lock.
  // Erases the source copy of a moved key (retrying while a mover or a
  // counter holds its slot: under the key lock they are bounded) and counts
  // a migration out. False if it was gone already (evicted meanwhile).
  bool EraseMoved(const HashPair& h);

  // Counts a miss of a search that found the key on no node.
  void CountMiss() { stats_.Add(Counter::kMisses); }
  // Counts one of the search's own events (key_locator.h) on this node.
  void Count(Counter c) { stats_.Add(c); }
  // Hands the spill batch to the node's spill writer if ARC victims filled
  // a page of it: a writer whose insert made ARC evict calls it once it
  // holds no lock, so that a full key table does not outrun the batch
  // writes. Never writes to disk itself; waits only while the writer is
  // kMaxSealedBatches behind (see "Spill writer" at FlushVictimBatch).
  void FlushVictimBatchIfFull();

  // ---- Spill tier --------------------------------------------------------

  // Graceful shutdown: writes every page that holds live keys to the spill
  // store and indexes them there. REQUIRES: no request and no maintenance
  // runs (the workers have stopped).
  void SpillAllForShutdown();
  // The keys whose only copy is in the spill store, for the manifest.
  std::vector<std::pair<HashPair, SpilledKey>> SpilledKeys() const;
  // Warm restart: indexes keys of the previous run's pages and makes this
  // node's versions continue above `max_version`. REQUIRES: before any
  // request.
  void RestoreSpilled(const std::vector<std::pair<HashPair, SpilledKey>>& keys,
                      uint64_t max_version);
  uint64_t next_version() const {
    return next_version_.value.load(std::memory_order_relaxed);
  }

  // ---- Maintenance (the node's worker) -----------------------------------

  // One maintenance pass: PromoteBuf drain, recycling, staging relocation,
  // reserve refill (drain/evict), TTL reclamation, a step of the key
  // table's growth. Bounded work. Returns whether the node is active: it
  // served a request since the previous pass, or a growth or the reserve
  // refill has work left (the worker then keeps the interval; an idle node
  // is maintained less often, node_job.h).
  bool Maintain();

  // ---- Pages out of service (they pay for a larger key table) -----------

  // Takes up to `n` value pages out of service (RETIRED, page_pool.h), the
  // highest-numbered free pages first, their memory given back to the
  // kernel. When no page beyond the relocation reserve is free it makes
  // one free first, with the in-line reclaimer's steps (recycle, drain the
  // sparsest page, else spill or evict it). Returns how many it retired:
  // fewer than `n` when what is left to free is held by another thread's
  // operation in flight (try again later), or when eviction is disabled
  // and no page can be freed without losing a key. Takes reclaim_mu_.
  uint32_t RetirePages(uint32_t n);
  // Puts up to `n` retired pages back in service, free. Takes reclaim_mu_.
  uint32_t UnretirePages(uint32_t n);

  // ---- Introspection -----------------------------------------------------

  NodeStatsSnapshot Snapshot() const;
  // Bytes of the whole page block, mapped whether pages are in service or
  // retired.
  uint64_t page_bytes() const {
    return uint64_t{config_.page_count} * config_.page_size;
  }
  // Bytes of the pages in service: what values may occupy now.
  uint64_t page_bytes_in_service() const {
    return uint64_t{pool_.pages_in_service()} * config_.page_size;
  }
  // Bytes of the key tables mapped but given back: retired tables, and
  // while growing the old table's and ARC's pages behind the migration
  // cursors (ConcurrentARC::released_bytes): mapped, not held.
  uint64_t key_table_released_bytes() const { return arc_->released_bytes(); }
  const PagePool& pool() const { return pool_; }
  PagePool& mutable_pool_for_testing() { return pool_; }

  // Tests, cold-page mode: one compactor round whatever the memory pressure
  // (marks if nothing is queued, then migrates up to `max_moves` keys).
  // Returns the number moved.
  int CompactColdKeysForTesting(int max_moves);
  // Tests (LocateEntryForTesting): the address of resident key h's entry,
  // nullptr if h is not resident here.
  const uint8_t* EntryForTesting(const HashPair& h) const {
    const std::optional<KeyMeta> m = arc_->Peek(h);
    return m.has_value() ? pool_.EntryAt(m->page, m->offset()) : nullptr;
  }
  // Tests: "" if every page's live word equals the capacities and count of
  // the entries some KeyMeta points at, and every KeyMeta points at an
  // entry of its key; else what is wrong. REQUIRES: no operation in flight.
  std::string CheckPageAccountingForTesting() const;

 private:
  using Arc = ConcurrentARC<KeyMeta>;
  // Optimistic Get attempts before falling back to the key lock.
  static constexpr int kOptimisticReads = 8;
  // Versions an overwrite that reached the counter reserves (see
  // "Versions"): the key's next kVersionStride - 1 overwrites then only
  // read the counter's line.
  static constexpr uint64_t kVersionStride = 16;
  // Cold pages: how deep into ARC's LRU ends one marking looks (about two
  // pages of 1 KiB values at 256 KiB pages), and how many keys the worker
  // moves per refill step.
  static constexpr uint32_t kColdWindow = 512;
  static constexpr int kColdMigrateBatch = 64;

  // Builds everything but the ARC, which needs the shard's address for its
  // eviction callback; Create adds it.
  NodeShard(const ShardConfig& config, const Numatic* numatic,
            NumaNodeMemoryResource* resource, NumaBlock block);
  ~NodeShard();

  uint64_t NowMs() const { return config_.clock->NowMs(); }
  // The key's home shard and its write lock (ShardConfig::home_of).
  NodeShard& HomeOf(const HashPair& h) const {
    return config_.home_of(config_.home_context, h);
  }
  ParkingLock& HomeKeyLock(const HashPair& h) const {
    return HomeOf(h).KeyLockFor(h);
  }
  // The version of a write of `h` (see "Versions" above). `current` is the
  // key's resident version on this node, 0 if it has none; `superseded`
  // earlier versions are consumed just before the returned one.
  // REQUIRES: the key's write lock is held.
  uint64_t NextVersion(const HashPair& h, uint64_t current,
                       uint32_t superseded);

  // Set without the cooperative migration.
  SetResult SetValue(const HashPair& h, std::string_view key,
                     std::string_view value, const WriteOptions& options,
                     EntryKind kind, std::string* replaced_head);
  // The header (size, capacity, key size, kind) of the entry `m` names. REQUIRES: `m`
  // still names it (the caller is inside the slot's seqlock write, or
  // removed `m` and has not unpublished it yet), so it cannot change.
  EntryHeader HeaderOf(const KeyMeta& m) const {
    return ReadEntryHeader(pool_.EntryAt(m.page, m.offset()));
  }
  // The same for a KeyMeta that may be stale (a reader's): false if the
  // bytes there cannot be an entry's header (entry.h,
  // ReadEntryHeaderWithin); the caller then re-validates `m` and retries.
  bool HeaderWithin(const KeyMeta& m, EntryHeader* out) const {
    return ReadEntryHeaderWithin(pool_.EntryAt(m.page, m.offset()), m.offset(),
                                 pool_.page_size(), out);
  }
  // The HashPair of the entry at `offset` of frozen `page` with header
  // `header`: its stored key's hash (config_.hasher; entry.h keeps none).
  // nullopt for an abandoned reservation, which holds no key. `key` is
  // scratch space for the key's copy.
  std::optional<HashPair> StoredHash(uint32_t page, uint32_t offset,
                                     const EntryHeader& header,
                                     std::string* key) const {
    if (!PayloadKey(pool_.EntryAt(page, offset), header, key)) {
      return std::nullopt;
    }
    return config_.hasher.Hash(*key);
  }
  // Calls fn(offset, header, hash) for each entry of frozen `page` that
  // holds a key, in address order, until fn returns false (the page walk
  // of the drain, eviction, spill and TTL reclamation); `hash` is
  // StoredHash's.
  template <typename Fn>
  void ForEachKeyedEntry(uint32_t page, uint64_t frozen, Fn&& fn) const {
    std::string key;
    pool_.ForEachEntry(page, frozen,
                       [&](uint32_t offset, const EntryHeader& header) {
                         const std::optional<HashPair> h =
                             StoredHash(page, offset, header, &key);
                         return !h.has_value() || fn(offset, header, *h);
                       });
  }
  // If the entry `m` names is a chunked head, copies its value into *out
  // (when out is given). REQUIRES: `m` still names the entry (the caller is
  // inside the slot's seqlock write, or erased `m` and has not unpublished
  // it yet), so its bytes cannot change.
  void CopyIfChunkedHead(const KeyMeta& m, std::string* out) const;
  // Whether resident entry `m` of `h` stores `key`; nullopt if the KeyMeta
  // changed while it was read (the caller looks again).
  std::optional<bool> ResidentKeyIs(const HashPair& h, const KeyMeta& m,
                                    std::string_view key) const;

  // Finds `capacity` bytes for a write, reclaiming in line if it must.
  Error Reserve(uint32_t capacity, Reservation* out);
  // What one in-line reclaim step achieved.
  enum class Reclaim {
    kProgress,  // something was freed (here or by another thread): look again
    kWait,      // what is left to free is held by an operation in flight on
                // another thread, which finishes without waiting for us
    kNoMemory,  // full, and eviction is disabled
  };
  // One in-line reclaim step for a writer that found no room for
  // `capacity` bytes.
  Reclaim ReclaimForWriter(uint32_t capacity);
  // One step towards a free page: recycle dead pages, relocate staging,
  // drain the sparsest page if an eighth of it is dead, else (eviction on)
  // spill or evict it; the last resort seals the open pages.
  Reclaim ReclaimStep() ABSL_EXCLUSIVE_LOCKS_REQUIRED(reclaim_mu_);

  // REQUIRES: reclaim_mu_ held.
  // Moves the live entries of frozen page `page` to the relocation page.
  // True if the page was emptied and recycled.
  bool DrainFrozen(uint32_t page, uint64_t frozen_state)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(reclaim_mu_);
  bool DrainSparsest(uint64_t max_live_bytes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(reclaim_mu_);
  bool RelocateStaging() ABSL_EXCLUSIVE_LOCKS_REQUIRED(reclaim_mu_);
  // Evicts the page PagePool::EvictionCandidate names; true if it was
  // recycled.
  bool EvictOldSparsePage() ABSL_EXCLUSIVE_LOCKS_REQUIRED(reclaim_mu_);
  // Erases every live key of frozen page `page`; true if it was recycled.
  bool EvictFrozen(uint32_t page, uint64_t frozen_state)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(reclaim_mu_);
  // The mover: moves the entry of `h` at (page, offset, generation) into
  // reservation `r` (see the header comment), or, if the key no longer
  // points there or grew past r.capacity, leaves `r` as a dead entry. Ends
  // the write on r.page either way. True if moved; counted under `counter`.
  bool MoveEntry(const HashPair& h, uint32_t page, uint32_t offset,
                 uint32_t generation, const Reservation& r, Counter counter)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(reclaim_mu_);
  // Asks ARC for kEvictBatch victims (spilled to the victim batch when the
  // spill tier is on). False if ARC had none.
  bool ForceEvictBatch() ABSL_EXCLUSIVE_LOCKS_REQUIRED(reclaim_mu_);

  // ---- Cold pages (see the header comment) ----
  enum class Migration { kMoved, kSkipped, kNoRoom };
  // Queues ARC's coldest keys that are not on a COLD page yet.
  void MarkColdKeys() ABSL_EXCLUSIVE_LOCKS_REQUIRED(reclaim_mu_);
  // Moves the queue's coldest key to the COLD destination unless it changed
  // since marking; pops it unless there was no room.
  Migration MigrateNextColdKey(bool cooperative)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(reclaim_mu_);
  // The reserve refill's pressured step in cold-page mode.
  bool ColdStep() ABSL_EXCLUSIVE_LOCKS_REQUIRED(reclaim_mu_);
  // Spills (or evicts) the fullest sealed COLD page; true if recycled.
  bool SpillColdPage() ABSL_EXCLUSIVE_LOCKS_REQUIRED(reclaim_mu_);
  // A Set's share of the migration (every 16th Set of a thread).
  void MigrateCooperatively();
  bool OnColdPage(const KeyMeta& m) const {
    return pool_.TierOf(m.page) == PageTier::kCold;
  }
  // Free pages the worker keeps for writers' bursts.
  uint32_t RefillTarget() const;
  // Key tables this node's finished growths left behind (memory_plan.h,
  // RetiredKeyTableBytes).
  uint32_t RetiredKeyTables() const;
  // One step towards the free-page reserve: recycle, drain or evict. False
  // when the reserve is full or nothing more can be done this pass.
  bool RefillStep() ABSL_EXCLUSIVE_LOCKS_REQUIRED(reclaim_mu_);
  void ReclaimExpired() ABSL_EXCLUSIVE_LOCKS_REQUIRED(reclaim_mu_);

  // ---- Key table growth (the worker's; see "Pages out of service") ----
  // One step: decide (KeyTableGrowthTo), retire the pages for the peak,
  // Grow, move keys, give back what the grown table does not need.
  // REQUIRES: no lock held (Grow maps memory, RetirePages takes the
  // reclaim mutex).
  void GrowKeyTableStep();
  // One pass's share of a shrink (kGrowMovesPerPass moves): its trim evicts
  // for page room, so its victims count as such and, with the spill tier,
  // go to the spill batch as the reserve refill's do, drained every
  // kVictimSlots evictions (a victim that finds no free slot is dropped).
  // True once the shrink is over. REQUIRES: no lock held.
  bool ShrinkStep();
  // Gives back the retired pages the key table as it is now does not need.
  void GiveBackUnneededPages();
  // Calls the test hook key_table_step, if set.
  void KeyTableStepForTesting() const;
  // Moves per pass while the table grows: a pass holds ARC's lock for
  // about this many key moves at a time (GrowStep's bound).
  static constexpr size_t kGrowMovesPerPass = 4096;
  // Passes a growth waits for its pages (writers' operations in flight
  // can hold the last ones) before it gives up and returns them.
  static constexpr int kMaxPayingPasses = 64;
  // Erases the expired entry at (page, offset, generation) if its key lock
  // is free and it is still that entry and expired, counting an expiration.
  // True if erased. Reclaimers (holding reclaim_mu_) and Gets call it.
  bool ReclaimIfExpired(const HashPair& h, uint32_t page, uint32_t offset,
                        uint32_t generation, uint64_t now);

  // Erases `h` (any thread, no key lock needed) and accounts the erased
  // entry under `reason`. True if a KeyMeta was erased.
  bool EraseAndAccount(const HashPair& h, Counter reason);
  // Accounts an entry whose KeyMeta just left its slot.
  void AccountRemoved(const KeyMeta& m);

  // ConcurrentARC's eviction callback (runs under the ARC SpinLock): with
  // the spill tier, parks the victim in a transit slot; else drops it. `h`
  // is ARC's name for the victim, its table key (h1 == h2).
  void OnEvict(const HashPair& h, const KeyMeta& m);

  // ---- ARC victims in transit (see "ARC victims" above) ----
  static constexpr uint32_t kSlotFree = 0;
  static constexpr uint32_t kSlotPending = 1;   // claimed, not yet indexed
  static constexpr uint32_t kSlotDraining = 2;  // being copied and indexed
  struct alignas(kCacheLineSize) VictimSlot {
    std::atomic<uint32_t> state{kSlotFree};
    // The victim's h2, all ARC names it by (ConcurrentARC, "Keys ARC
    // names"); the drain recovers h1 from the key in its entry. Atomic
    // because a settler reads it while a claimer may rewrite a free slot;
    // the state's release/acquire orders everything else.
    std::atomic<uint64_t> h2{0};
    KeyMeta meta;
    bool from_worker = false;  // ForceEvictOne's victim: always batched
    Counter reason = Counter::kEvictionsKeys;  // if it is dropped
  };
  // One ForceEvictBatch round's worth; a writer's insert evicts one or two.
  static constexpr size_t kVictimSlots = 64;
  // Copies the victim of a pending slot into the spill batch and indexes it
  // (or drops it), then frees the slot. False if it was not pending.
  bool DrainVictimSlot(VictimSlot& slot);
  // Drains every pending slot: the evicting thread, after its ARC call.
  void DrainVictims();
  // Makes sure no victim of `h` evicted before now is still in transit
  // (drains it, or waits while another thread does). True if there was one.
  bool SettleVictim(const HashPair& h);

  // Get without the spill tier and without hit/miss counting.
  GetResult GetResident(const HashPair& h, std::string_view key,
                        std::string* value, ParkingLock& key_lock,
                        OperationClock& clock, EntryKind wanted,
                        EntryKind* kind);
  // Spills the sparsest sealed page (worker); true if a page was freed.
  bool SpillSparsestPage() ABSL_EXCLUSIVE_LOCKS_REQUIRED(reclaim_mu_);
  // Writes frozen page `page` as one PageBlob and moves its live keys to the
  // spill index; recycles the page if that emptied it (returns true).
  bool SpillFrozen(uint32_t page, uint64_t frozen_state)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(reclaim_mu_);
  // Reads spilled page `page_id` back and re-inserts every key whose index
  // entry still names it. Takes each key's lock in turn, never more than
  // one, and no lock during the read.
  // Returns `wanted`'s portable form (entry.h, into *wanted_value) if its
  // entry was still the one this page holds, else not found.
  GetResult ReloadPage(uint64_t page_id, const HashPair& wanted,
                       const SpilledKey& wanted_entry,
                       std::string* wanted_value);
  // Inserts an entry's portable form (entry.h) with the version, deadline
  // and locality counters it had: a reloaded key, or one moving in from
  // another node (InsertMoved). kStorageCorrupt if the bytes are no
  // portable form. REQUIRES: its key lock; it is not resident.
  Error InsertReloaded(const HashPair& h, std::string_view portable,
                       uint64_t version, uint64_t expiry_ms,
                       uint8_t locality = 0);
  // Deletes the blobs of pages none of whose keys are indexed any more.
  void DeleteDeadSpillPages();
  // Drops a slice of stale spill index entries (expired, or of pages the
  // store removed for its budget). REQUIRES: reclaim_mu_ (the sweep cursor).
  void SweepSpillIndex() ABSL_EXCLUSIVE_LOCKS_REQUIRED(reclaim_mu_);
  // Copies an ARC victim into the spill batch and indexes it there
  // (DrainVictimSlot, with no SpinLock held).
  void AddVictimLocked(const HashPair& h, const KeyMeta& m)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(batch_mu_);
  // Spill writer. A batch that holds a page of values (or any, with force)
  // is sealed into one PageBlob and queued (sealed_) for the node's spill
  // writer thread, which writes the queue's oldest with no lock held and
  // only then removes it, so that a reload of one of its keys reads it from
  // the queue until RocksDB has it. At most kMaxSealedBatches are queued:
  // past that the sealing thread waits on batch_cv_ until the writer has
  // written one (backpressure; dropping victims instead would lose keys
  // whenever the disk falls behind, and a Set is no place to fail for it).
  // With force it also waits until the queue is empty (shutdown: every
  // victim is on disk before the manifest names it).
  void FlushVictimBatch(bool force);
  // The spill writer thread's loop; returns once writer_stop_ is set and
  // the queue is empty.
  void RunSpillWriter();
  // Writes one sealed batch (spill writer thread, no lock held).
  void WriteSealedBatch(uint64_t page_id, const std::string& bytes);
  // Whether `page_id` is the batch being assembled or a sealed one.
  bool IsUnwrittenBatchLocked(uint64_t page_id) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(batch_mu_);

  const ShardConfig config_;
  const Numatic* const numatic_;
  NumaNodeMemoryResource* const resource_;
  const NumaBlock block_;
  std::unique_ptr<Arc> arc_;  // set by Create, then immutable
  PagePool pool_;
  NodeStats stats_;
  // MemoryPlan::key_locks of them, a power of two (mask indexing).
  std::pmr::vector<KeyLock> key_locks_;
  const uint64_t key_lock_mask_;

  struct alignas(kCacheLineSize) VersionCounter {
    std::atomic<uint64_t> value;
  };
  // The counter of the keys whose home is this node, from 1 up (see
  // "Versions"). Versions stay below 2^56 (kVersionLimit): KeyMeta keeps
  // its locality counters in the version word's top byte (key_meta.h).
  // 2^56 versions last 228 years at 10^7 writes/s of one version each, and
  // 27 years in the worst pattern, each key inserted, overwritten once and
  // deleted (1 + kVersionStride versions for the two writes).
  VersionCounter next_version_;

  // Serializes reclaimers: the worker's maintenance and writers that ran
  // out of space.
  Mutex reclaim_mu_;
  // TTL reclamation cursor and whether any TTL was ever set on this node.
  uint32_t ttl_cursor_ ABSL_GUARDED_BY(reclaim_mu_) = 0;
  // The last in-line reclaim sealed the open pages (ReclaimForWriter): if
  // that did not help either, the next one gives up.
  bool sealed_for_reclaim_ ABSL_GUARDED_BY(reclaim_mu_) = false;
  std::atomic<bool> has_ttl_keys_{false};
  // The largest entry footprint ever reserved on this node (Reserve raises
  // it): bounds the room a drain can leave unused at the end of a
  // relocation page (DrainSparsest).
  std::atomic<uint32_t> largest_entry_{0};
  // Eviction disabled: keys are admitted while resident keys < ARC's c.
  std::atomic<int64_t> resident_keys_{0};
  // Keys whose only copy is in the spill store; null when spill is off.
  std::unique_ptr<SpillIndex> spill_index_;
  SpillIndex::SweepCursor sweep_cursor_ ABSL_GUARDED_BY(reclaim_mu_);
  // ARC victims on their way to disk: a page image assembled in memory and
  // written whole (FlushVictimBatch). Its keys are already indexed under
  // batch_page_id_; reloads read it from here until it is written.
  Mutex batch_mu_;
  std::unique_ptr<spill::PageBlobBuilder> batch_ ABSL_GUARDED_BY(batch_mu_);
  uint64_t batch_page_id_ ABSL_GUARDED_BY(batch_mu_) = 0;
  // Sealed batches, oldest first, until the spill writer has written them
  // (the front one is being written, with no lock held); reloads of their
  // keys read them from here.
  struct SealedBatch {
    uint64_t page_id = 0;
    std::shared_ptr<const std::string> bytes;
  };
  static constexpr size_t kMaxSealedBatches = 2;
  std::deque<SealedBatch> sealed_ ABSL_GUARDED_BY(batch_mu_);
  // Signalled when sealed_ gains or loses a batch, and at stop.
  CondVar batch_cv_;
  bool writer_stop_ ABSL_GUARDED_BY(batch_mu_) = false;
  // Runs RunSpillWriter while the spill tier is on; joined by ~NodeShard.
  std::thread spill_writer_;
  // The batch holds a page of values (a hint read without batch_mu_).
  std::atomic<bool> batch_full_{false};
  // ARC victims between ARC's critical section and the spill index, and
  // how many slots are not free (a hint: relaxed; see SettleVictim for the
  // ordering that makes a zero trustworthy where it matters).
  std::array<VictimSlot, kVictimSlots> victims_;
  std::atomic<uint32_t> victims_pending_{0};

  // Cold pages: the marked keys, coldest last (migration pops the back),
  // with the KeyMeta seen when marked; `cold_pending_` mirrors its size for
  // the Set path's lock-free check (relaxed: a stale count only delays or
  // wastes one try-lock).
  struct ColdKey {
    HashPair hash;  // ARC's name for it (ColdestKeys): its table key
    KeyMeta meta;
  };
  std::pmr::vector<ColdKey> cold_keys_ ABSL_GUARDED_BY(reclaim_mu_);

  // Key table growth, touched only by the Maintain caller (the worker).
  enum class Growth : uint8_t {
    kIdle,    // looking at the rule once a pass
    kPaying,  // retiring the pages for growth_to_'s peak
    kMoving,  // ARC grows; GrowStep each pass until done
  };
  Growth growth_ = Growth::kIdle;
  bool shrinking_ = false;  // the resize under way is a shrink
  // Requests counted when the previous Maintain pass ended (the worker's).
  uint64_t requests_at_last_pass_ = 0;
  uint32_t growth_from_ = 0;
  uint32_t growth_to_ = 0;
  int paying_passes_ = 0;
  // kKeyTableFull at the last look: evictions by key count since then.
  uint64_t key_evictions_seen_ = 0;
  // kEvictionsCapacity + kSpilledKeys at the last look: keys that left
  // memory for page room since (evicted, or spilled with the spill tier).
  uint64_t page_evictions_seen_ = 0;
  std::vector<HashPair> coldest_scratch_ ABSL_GUARDED_BY(reclaim_mu_);
  std::atomic<uint32_t> cold_pending_{0};
};

}  // namespace furrball_internal
}  // namespace furrballs

#endif  // FURRBALLS_ENGINE_FURRBALL_NODE_SHARD_H_
