// engine/furrball/page_pool.h: one node's value pages (report §2.2, §2.4,
// §2.10, §3.1): a physical block cut into pages, a CAS bump allocator per
// page, page tiers, live/dead accounting, the staging page and recycling.
//
// Thread safety: thread-safe. The request-path operations (Reserve*,
// EndWrite, Publish, Unpublish, EntryAt) may be called by any number of
// threads. The maintenance operations (those documented "REQUIRES: the
// caller is the node's only reclaimer") must be serialized by the caller;
// NodeShard holds its reclaim mutex for them. They run concurrently with the
// request path.
//
// The pool never allocates after construction: page metadata and the free
// list are sized once (PMR containers on the node's memory resource, §3.2).
//
// Page protocol
//
// Each page has one 64-bit state word, so that every decision that must see
// a consistent (tier, open, in-flight writers, bump pointer) is one atomic:
//
//   bits  0..31  used     bytes reserved by the bump allocator
//   bits 32..55  pending  reservations whose writer has not yet called
//                         EndWrite (entry being written or published)
//   bits 56..59  tier     PageTier
//   bit  60      open     the bump allocator accepts reservations
//
// and a 64-bit live word: live entry bytes (the sum of the capacities of the
// entries that some KeyMeta points at) in the low half, live entry count in
// the high half.
//
// States and transitions (the tier names are the report's, §2.4.1):
//
//   EMPTY                in the free list; used = pending = live = 0
//   EMPTY  -> HOT|COLD|STAGING, open   Open(): store, release. Only the
//                        thread that popped the page from the free list (or
//                        the reclaimer for the staging page) does this, so
//                        no one else can observe the page in between.
//   open   -> open       TryBump(): CAS used += n, pending += 1; acquire, so
//                        the writer's stores into the page happen after the
//                        recycle that emptied it.
//   open   -> sealed     Seal(): fetch_and(~open), acq_rel. After it no new
//                        reservation starts; in-flight ones still finish.
//   any    -> pending-1  EndWrite(): fetch_sub, release. Publishes the
//                        writer's entry bytes and its live-word update to
//                        whoever later reads pending == 0 with acquire.
//   sealed, pending == 0, tier != EMPTY/FREEZE -> FREEZE
//                        TryFreeze(): CAS, acquire. In FREEZE no one can
//                        reserve (not open) and no one is writing (pending
//                        was 0), so the live word can only go down.
//   FREEZE -> EMPTY      Recycle(): only if live == 0 (acquire load, pairs
//                        with the release of every Unpublish, so every CMap
//                        change that moved an entry off this page happens
//                        before the recycle). generation += 1, state stored
//                        EMPTY (release), page pushed on the free list.
//   FREEZE -> previous   Thaw(): the page still had live entries.
//   EMPTY  -> RETIRED    RetireFreePages(): the reclaimer takes a free page
//                        off the free list (under free_lock_, so no writer
//                        can pop it meanwhile), stores RETIRED (relaxed:
//                        nobody acts on a page that is in no list and not
//                        open) and releases its memory (RawAllocator::
//                        ReleaseMappedPages, madvise(MADV_DONTNEED)): the
//                        RSS falls, the bytes read zero, the mapping and
//                        its NUMA policy stay.
//                        A RETIRED page is out of service: never reserved,
//                        frozen, walked or counted as free; its memory pays
//                        for something else the budget holds (a larger key
//                        table while it grows, NodeShard::RetirePages).
//   RETIRED -> EMPTY     UnretirePages(): the reclaimer stores EMPTY
//                        (release) and pushes it on the free list.
//
// Publish (fetch_add live, relaxed) is done by a writer that holds a
// reservation on the page (pending > 0), before its EndWrite; Unpublish
// (fetch_sub live, release) by whoever removed the last KeyMeta pointing at
// an entry (overwrite, delete, eviction, relocation, TTL reclamation), after
// the CMap change. For one entry the two can come in either order (a mover
// or evictor may take the KeyMeta off an entry whose writer has not
// published yet): the live word is modular, so the pair nets out, and while
// the writer's pending count is up nobody uses the word for a decision
// (TryFreeze, SparsestSealedPage, EvictionCandidate and FullestSealedPage
// skip such pages).
// Hence: a page with a KeyMeta pointing into it has
// live > 0 or pending > 0, so it is never recycled under a reader's feet;
// a reader holding a stale KeyMeta may copy bytes of a recycled page, but
// its re-validation then fails (the KeyMeta changed before the recycle).
//
// A page can be walked entry by entry (entry.h) whenever it is sealed and
// pending == 0 (acquire): every reservation then has a complete header.
//
// Page roles: `current` is the HOT page that Sets bump into; the
// staging page (fixed: the pool's last page, as in §2.10.2) is the overflow
// Sets use when the current page is full and no page is free; the
// relocation destination is an open page owned by the reclaimer that
// receives relocated entries (§2.9.1: survivors move to COLD pages).
//
// With cold pages (the pool's `cold_pages`, FurrBallOptions::
// spill_cold_pages) the tiers mean what §2.4.1 says, and the pool keeps them
// apart:
//
//   HOT      current pages and, now, relocation destinations: a drain's
//            survivors are whatever was live, not known to be cold.
//   COLD     the cold destination, a second reclaimer-owned open page
//            (ReserveForColdMigration) that receives only ARC's cold keys
//            and the survivors of drained COLD pages; sealed when full, then
//            spilled whole by the node (FullestSealedPage(kCold)).
//   STAGING  as before.
//
// No Set ever reserves on a COLD page: writers bump only into `current`
// (always opened HOT) and staging, and in this mode the writer's bump checks
// the tier in the same CAS that reserves (TryBump's `tier` argument). That
// matters because `current` can be stale: a sealed current page may be
// recycled by the reclaimer and reopened as the cold destination before a
// writer rotates; the tier in the state word makes that writer's CAS fail
// and rotate instead of writing a hot value onto a COLD page. Without cold
// pages the pool behaves as it always did (relocation pages are COLD, the
// bump does not look at the tier).
#ifndef FURRBALLS_ENGINE_FURRBALL_PAGE_POOL_H_
#define FURRBALLS_ENGINE_FURRBALL_PAGE_POOL_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory_resource>
#include <optional>
#include <vector>

#include <absl/base/thread_annotations.h>

#include "engine/common/raw_allocator.h"
#include "engine/common/spin_lock.h"
#include "engine/furrball/entry.h"

namespace furrballs {
namespace furrball_internal {

// Values follow the report (§2.4.1, §2.10.2: Staging = 5); 4 is unused.
// kRetired is ours (not the report's): a page out of service, see above.
enum class PageTier : uint8_t {
  kHot = 0,
  kCold = 1,
  kEmpty = 2,
  kFreeze = 3,
  kStaging = 5,
  kRetired = 6,
};

inline constexpr uint32_t kNoPage = UINT32_MAX;

// Free pages that Sets may not take: the reclaimer needs one page to
// relocate into, or a cache full of half-dead pages could never compact.
inline constexpr uint32_t kRelocationReserve = 1;

// Page sizes the pool accepts. The lower bound keeps the per-page metadata
// (one cache line) under 0.1%. The upper bound is what an entry's header
// word can describe (entry.h): an entry as large as the page, its payload
// and its key field in one 64-bit word. It was 64 MiB until 2026-11-25, when
// the key size moved into the header (8 bytes less for a 24-byte key with a
// 64-byte value); 32 MiB pages still give a node 2 TiB (key_meta.h, 2^16
// pages), and the memory plan uses 2 MiB pages up to 128 GiB a node.
inline constexpr size_t kMinPageSize = size_t{64} << 10;
inline constexpr size_t kMaxPageSize = size_t{32} << 20;
static_assert(kMaxPageSize <= kMaxEntryCapacity,
              "an entry's header holds a footprint as large as a page");
static_assert(kMaxPageSize - kEntryHeaderBytes <= kMaxEntryPayloadBytes,
              "an entry's header holds a payload as large as a page less "
              "the header");

// The state word, see the top of this file.
struct PageState {
  static constexpr uint64_t kUsedMask = 0xffffffffull;
  static constexpr int kPendingShift = 32;
  static constexpr uint64_t kPendingOne = uint64_t{1} << kPendingShift;
  static constexpr uint64_t kPendingMask = 0xffffffull << kPendingShift;
  static constexpr int kTierShift = 56;
  static constexpr uint64_t kTierMask = uint64_t{0xf} << kTierShift;
  static constexpr uint64_t kOpen = uint64_t{1} << 60;

  static uint32_t Used(uint64_t w) { return static_cast<uint32_t>(w); }
  static uint32_t Pending(uint64_t w) {
    return static_cast<uint32_t>((w & kPendingMask) >> kPendingShift);
  }
  static PageTier Tier(uint64_t w) {
    return static_cast<PageTier>((w & kTierMask) >> kTierShift);
  }
  static bool IsOpen(uint64_t w) { return (w & kOpen) != 0; }
  static uint64_t Make(PageTier tier, bool open, uint32_t used) {
    return (uint64_t{static_cast<uint8_t>(tier)} << kTierShift) |
           (open ? kOpen : 0) | used;
  }
};
static_assert(kMaxPageSize <= PageState::kUsedMask,
              "used must fit the state word's 32-bit field");

// Per-page metadata. One cache line each: the current page's line is the
// only one request-path writers share, and neighbours must not false-share
// with it.
struct alignas(kCacheLineSize) Page {
  std::atomic<uint64_t> state{PageState::Make(PageTier::kEmpty, false, 0)};
  std::atomic<uint64_t> live{0};  // bytes (low 32) | entries (high 32)
  std::atomic<uint32_t> generation{0};
  // The pool's open count when the page was last opened (PagePool::Open;
  // relaxed: an eviction's hint of the page's age, modulo 2^32).
  std::atomic<uint32_t> opened{0};
  uint8_t* data = nullptr;  // set at construction, then immutable
};
static_assert(sizeof(Page) == kCacheLineSize,
              "one page's metadata per cache line (see Page)");

// A successful reservation: `capacity` bytes at `offset` of page `page`.
struct Reservation {
  uint32_t page = kNoPage;
  uint32_t offset = 0;
  uint32_t generation = 0;
  uint32_t capacity = 0;
};

// Where a reservation came from.
enum class ReserveSource : uint8_t { kCurrent, kFreshPage, kStaging };

// What the tiers hold right now, for statistics.
struct PoolCensus {
  uint64_t pages_hot = 0;
  uint64_t pages_cold = 0;
  uint64_t pages_empty = 0;
  uint64_t pages_freeze = 0;
  uint64_t pages_staging = 0;
  uint64_t pages_retired = 0;
  uint64_t used_bytes = 0;  // reserved bytes on non-empty pages
  uint64_t live_bytes = 0;  // capacities of live entries
  uint64_t live_entries = 0;
  uint64_t staging_used_bytes = 0;
};

class PagePool {
 public:
  // Cuts `data` (page_count * page_size bytes, page aligned, owned by the
  // caller and outliving the pool) into pages. Page metadata and the free
  // list come from `resource`. Page 0 becomes the current page and the last
  // page the staging page; the rest are free.
  // REQUIRES: page_size in [kMinPageSize, kMaxPageSize] and a multiple of 8;
  // page_count >= kMinPages.
  // `cold_pages`: the tiers of cold-page mode (see the top of this file).
  static constexpr uint32_t kMinPages = 4;
  PagePool(uint8_t* data, uint32_t page_count, uint32_t page_size,
           std::pmr::memory_resource* resource, bool cold_pages = false);

  PagePool(const PagePool&) = delete;
  PagePool& operator=(const PagePool&) = delete;

  uint32_t page_count() const { return page_count_; }
  uint32_t page_size() const { return page_size_; }
  uint32_t staging_page() const { return page_count_ - 1; }
  uint32_t current_page() const {
    return current_.load(std::memory_order_acquire);
  }
  // Bytes of metadata this pool allocated from its resource.
  size_t metadata_bytes() const;

  uint8_t* EntryAt(uint32_t page, uint32_t offset) const {
    return pages_[page].data + offset;
  }
  const Page& page(uint32_t i) const { return pages_[i]; }

  // ---- Request path --------------------------------------------------------

  // Reserves `capacity` bytes on the current page, rotating to a free page
  // when the current one is full. False when no free page is left beyond
  // the relocation reserve (the caller then tries staging or reclaims). `*tail_waste` receives the
  // unused bytes of a page this call sealed (padding accounting).
  bool ReserveOnCurrent(uint32_t capacity, Reservation* out,
                        ReserveSource* source, uint64_t* tail_waste);
  // Reserves on the staging page (§2.10.2). False when it is full or sealed.
  bool ReserveOnStaging(uint32_t capacity, Reservation* out);

  // The reservation's writer is done with the page (see protocol).
  void EndWrite(uint32_t page) {
    pages_[page].state.fetch_sub(PageState::kPendingOne,
                                 std::memory_order_release);
  }
  // An entry of `capacity` bytes on `page` became live (a KeyMeta points at
  // it). REQUIRES: the caller holds a reservation on `page`.
  void Publish(uint32_t page, uint32_t capacity) {
    pages_[page].live.fetch_add(LiveDelta(capacity),
                                std::memory_order_relaxed);
  }
  // The last KeyMeta pointing at an entry of `capacity` bytes on `page` was
  // changed or erased.
  void Unpublish(uint32_t page, uint32_t capacity) {
    pages_[page].live.fetch_sub(LiveDelta(capacity),
                                std::memory_order_release);
  }

  // ---- Reclaimer (REQUIRES: the caller is the node's only reclaimer) -------

  uint32_t free_pages() const {
    return free_count_.load(std::memory_order_acquire);
  }
  // Pages out of service (RETIRED), and the rest.
  uint32_t retired_pages() const {
    return retired_count_.load(std::memory_order_relaxed);
  }
  uint32_t pages_in_service() const { return page_count_ - retired_pages(); }

  // Takes up to `n` free pages out of service, the highest-numbered first
  // (so retired pages gather at the top of the block), leaving at least
  // `keep` pages free, and releases their memory (see RETIRED above).
  // Returns how many it retired. REQUIRES: the pool's memory is a private
  // anonymous mapping (Numatic's), whose pages madvise can give back.
  uint32_t RetireFreePages(uint32_t n, uint32_t keep);
  // Puts up to `n` retired pages back in service, free, the lowest-numbered
  // first. Returns how many.
  uint32_t UnretirePages(uint32_t n);

  // Recycles every page that is sealed, has no writer and no live entry.
  // Returns how many pages went to the free list.
  uint32_t RecycleDeadPages();

  // Freezes `page` for exclusive walking if it is sealed with no writer in
  // flight. While frozen, only Unpublish touches it. False if not possible.
  bool TryFreeze(uint32_t page, uint64_t* state_before);
  // Ends a freeze: recycles the page if nothing on it is live (returns true),
  // otherwise restores `state_before`.
  bool FinishFreeze(uint32_t page, uint64_t state_before);

  // Seals the staging page so it can be drained; false if already sealed.
  bool SealStaging();
  // Re-opens the staging page after it was recycled (it never enters the
  // free list: it keeps its designation, §2.10.3).
  void ReopenStaging();

  // Seals the current page and the relocation page so that the reclaimer
  // may drain or evict them: the last resort of a pool so small that every
  // page is full and open (current, relocation, staging) or free only as
  // the relocation reserve. Sets *tail_waste to the tail bytes wasted and
  // returns whether any page was still open (false: nothing changed). A
  // sealed current page stays current until a writer rotates; if it is
  // recycled first, rotation copes (see ReserveOnCurrent).
  bool SealOpenPagesForReclaim(uint64_t* tail_waste);

  // Reserves on the relocation destination, opening a new COLD page from
  // the free list when the current one is full. False when neither works.
  bool ReserveForRelocation(uint32_t capacity, Reservation* out);
  uint32_t relocation_room() const;
  // Bytes the staging page can still take (0 while sealed).
  uint32_t staging_room() const;

  // Cold-page mode: reserves on the cold destination, opening a new COLD
  // page from the free list when it is full. A migration (`for_drain`
  // false) never takes the relocation reserve, so that a drain always has
  // somewhere to go; a drain of a COLD page may, like any drain, because it
  // frees the page it empties. False when neither works.
  bool ReserveForColdMigration(uint32_t capacity, bool for_drain,
                               Reservation* out);
  // Seals the cold destination if it holds anything, so that it can be
  // spilled before it is full; *tail_waste gets its unused tail. False if
  // there was no such page.
  bool SealColdPage(uint64_t* tail_waste);

  // The sealed, walkable (pending == 0), non-empty page with the fewest live
  // bytes, excluding the current, staging and relocation pages; kNoPage if
  // none. Its live bytes go to *live_bytes.
  uint32_t SparsestSealedPage(uint64_t* live_bytes) const;
  // The page a writer with no room evicts whole: of the pages
  // SparsestSealedPage chooses from whose live bytes are within an eighth
  // of a page of the sparsest's, the one opened longest ago; kNoPage if
  // none. Its live bytes go to *live_bytes. Pages of equal fill are
  // evicted oldest first, so a value's chunks, written together, go
  // together, and recent entries stay (docs/memory_bench.md, "Smaller
  // pages at middle budgets": picking by live bytes alone evicted pages of
  // any age, and 256 KiB pages at 64 MiB then held no whole 1 MiB value).
  uint32_t EvictionCandidate(uint64_t* live_bytes) const;
  // The sealed, walkable page of tier `tier` with the most live bytes;
  // kNoPage if none has any. Its live bytes go to *live_bytes.
  uint32_t FullestSealedPage(PageTier tier, uint64_t* live_bytes) const;
  // The page's tier now (relaxed: a hint; the reclaimer, which alone changes
  // tiers other than by Open of a popped page, gets the exact answer).
  PageTier TierOf(uint32_t page) const {
    return PageState::Tier(pages_[page].state.load(std::memory_order_relaxed));
  }

  // Calls fn(offset, header) for each entry of a frozen page, in address
  // order, until fn returns false.
  template <typename Fn>
  void ForEachEntry(uint32_t page, uint64_t frozen_state, Fn&& fn) const {
    const uint32_t used = PageState::Used(frozen_state);
    uint32_t offset = 0;
    while (offset < used) {
      const EntryHeader h = ReadEntryHeader(pages_[page].data + offset);
      if (!fn(offset, h)) return;
      offset += h.capacity;
    }
  }

  PoolCensus Census() const;

 private:
  static uint64_t LiveDelta(uint32_t capacity) {
    return (uint64_t{1} << 32) | capacity;
  }

  // Reserves on `page` if it is open (and, when `tier` is given, of that
  // tier: checked in the reserving CAS).
  bool TryBump(uint32_t page, uint32_t capacity, Reservation* out,
               std::optional<PageTier> tier = std::nullopt);
  // The tier a writer's bump must find, if the pool checks it.
  std::optional<PageTier> WriterTier(PageTier tier) const {
    return cold_pages_ ? std::optional<PageTier>(tier) : std::nullopt;
  }
  // Reserves on the reclaimer-owned destination *dest, replacing it by a
  // page of `tier` popped from the free list (if more than `keep` are free)
  // when it is full.
  bool ReserveOnDestination(uint32_t* dest, PageTier tier, uint32_t keep,
                            uint32_t capacity, Reservation* out);
  void Open(uint32_t page, PageTier tier);
  // The unused tail of the sealed page.
  uint64_t Seal(uint32_t page);
  // Pops a free page if more than `keep` remain.
  bool PopFree(uint32_t* page, uint32_t keep);
  void PushFree(uint32_t page);
  void Recycle(uint32_t page);

  // Whether page i is one SparsestSealedPage chooses from; its live bytes
  // go to *live_bytes.
  bool SealedWithLiveBytes(uint32_t i, uint64_t* live_bytes) const;

  const uint32_t page_count_;
  const uint32_t page_size_;
  std::pmr::vector<Page> pages_;
  // Pages opened so far (Page::opened), modulo 2^32.
  std::atomic<uint32_t> open_count_{0};

  // The page Sets bump into. Swapped only under rotate_lock_ so that many
  // writers finding it full at once open one fresh page, not one each.
  std::atomic<uint32_t> current_{0};
  SpinLock rotate_lock_;

  // Free (EMPTY) pages, a stack. Touched once per page fill, never per
  // entry, so a SpinLock is cheap enough.
  SpinLock free_lock_;
  std::pmr::vector<uint32_t> free_ ABSL_GUARDED_BY(free_lock_);
  std::atomic<uint32_t> free_count_{0};
  // RETIRED pages; written only by the reclaimer, read by anyone (relaxed:
  // statistics and the reclaimer's own decisions).
  std::atomic<uint32_t> retired_count_{0};

  const bool cold_pages_;
  // Tier of relocation destinations: COLD, or HOT in cold-page mode.
  const PageTier relocation_tier_;
  // The reclaimer's open relocation and (cold-page mode) cold destination
  // pages; only the reclaimer reads or writes these two.
  uint32_t relocation_page_ = kNoPage;
  uint32_t cold_page_ = kNoPage;
};

}  // namespace furrball_internal
}  // namespace furrballs

#endif  // FURRBALLS_ENGINE_FURRBALL_PAGE_POOL_H_
