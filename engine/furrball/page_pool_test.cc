#include "engine/furrball/page_pool.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <memory_resource>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "engine/furrball/entry.h"

namespace furrballs {
namespace furrball_internal {
namespace {

constexpr uint32_t kPageSize = 64 << 10;

// Page memory for a pool; the pool itself does not own it.
struct Block {
  explicit Block(uint32_t pages)
      : bytes(size_t{pages} * kPageSize),
        data(static_cast<uint8_t*>(std::aligned_alloc(4096, bytes))) {}
  ~Block() { std::free(data); }
  size_t bytes;
  uint8_t* data;
};

TEST(PagePoolTest, StartsWithCurrentStagingAndFreePages) {
  Block block(8);
  PagePool pool(block.data, 8, kPageSize, std::pmr::new_delete_resource());
  EXPECT_EQ(pool.current_page(), 0u);
  EXPECT_EQ(pool.staging_page(), 7u);
  EXPECT_EQ(pool.free_pages(), 6u);
  const PoolCensus c = pool.Census();
  EXPECT_EQ(c.pages_hot, 1u);
  EXPECT_EQ(c.pages_staging, 1u);
  EXPECT_EQ(c.pages_empty, 6u);
}

TEST(PagePoolTest, BumpsSequentiallyAndRotatesWhenFull) {
  Block block(4);
  PagePool pool(block.data, 4, kPageSize, std::pmr::new_delete_resource());
  Reservation r;
  ReserveSource src;
  uint64_t waste = 0;
  ASSERT_TRUE(pool.ReserveOnCurrent(1000, &r, &src, &waste));
  EXPECT_EQ(r.page, 0u);
  EXPECT_EQ(r.offset, 0u);
  EXPECT_EQ(src, ReserveSource::kCurrent);
  pool.EndWrite(r.page);
  ASSERT_TRUE(pool.ReserveOnCurrent(1000, &r, &src, &waste));
  EXPECT_EQ(r.offset, 1000u);
  pool.EndWrite(r.page);
  // Does not fit in the rest of page 0: a fresh page, page 0 sealed with
  // its tail counted as waste.
  ASSERT_TRUE(pool.ReserveOnCurrent(kPageSize - 1000, &r, &src, &waste));
  EXPECT_EQ(src, ReserveSource::kFreshPage);
  EXPECT_NE(r.page, 0u);
  EXPECT_EQ(r.offset, 0u);
  EXPECT_EQ(waste, kPageSize - 2000u);
  EXPECT_FALSE(PageState::IsOpen(pool.page(0).state.load()));
  pool.EndWrite(r.page);
}

TEST(PagePoolTest, FallsBackToStagingWhenNoPageIsFree) {
  Block block(4);
  PagePool pool(block.data, 4, kPageSize, std::pmr::new_delete_resource());
  Reservation r;
  ReserveSource src;
  uint64_t waste;
  // Pages 0 and 1 fill up; page 2 is the relocation reserve, which Sets may
  // not take; page 3 is staging.
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(pool.ReserveOnCurrent(kPageSize, &r, &src, &waste));
    pool.EndWrite(r.page);
  }
  EXPECT_FALSE(pool.ReserveOnCurrent(8, &r, &src, &waste));
  EXPECT_EQ(pool.free_pages(), kRelocationReserve);
  Reservation reloc;
  ASSERT_TRUE(pool.ReserveForRelocation(8, &reloc)) << "the reserve is the "
                                                       "reclaimer's";
  pool.EndWrite(reloc.page);
  ASSERT_TRUE(pool.ReserveOnStaging(64, &r));
  EXPECT_EQ(r.page, pool.staging_page());
  pool.EndWrite(r.page);
}

TEST(PagePoolTest, RecyclesOnlyWhenSealedIdleAndDead) {
  Block block(4);
  PagePool pool(block.data, 4, kPageSize, std::pmr::new_delete_resource());
  Reservation r;
  ReserveSource src;
  uint64_t waste;
  ASSERT_TRUE(pool.ReserveOnCurrent(kPageSize, &r, &src, &waste));
  const uint32_t first = r.page;
  WriteDeadEntry(pool.EntryAt(r.page, r.offset), r.capacity);
  pool.Publish(r.page, r.capacity);
  // Open page with a writer in flight and a live entry: never recycled.
  EXPECT_EQ(pool.RecycleDeadPages(), 0u);
  pool.EndWrite(r.page);
  // Rotate so `first` is sealed.
  Reservation r2;
  ASSERT_TRUE(pool.ReserveOnCurrent(64, &r2, &src, &waste));
  pool.EndWrite(r2.page);
  EXPECT_EQ(pool.RecycleDeadPages(), 0u) << "still one live entry";
  const uint32_t gen = pool.page(first).generation.load();
  pool.Unpublish(first, r.capacity);
  EXPECT_EQ(pool.RecycleDeadPages(), 1u);
  EXPECT_EQ(pool.page(first).generation.load(), gen + 1);
  EXPECT_EQ(PageState::Tier(pool.page(first).state.load()), PageTier::kEmpty);
}

TEST(PagePoolTest, StagingDrainRecyclesAndReopensStaging) {
  Block block(4);
  PagePool pool(block.data, 4, kPageSize, std::pmr::new_delete_resource());
  std::vector<Reservation> rs;
  for (int i = 0; i < 3; ++i) {
    Reservation r;
    ASSERT_TRUE(
        pool.ReserveOnStaging(EntryFootprint(PayloadSize(1, 10)), &r));
    WriteKeyedEntry(pool.EntryAt(r.page, r.offset), "k", "0123456789",
                    r.capacity);
    pool.Publish(r.page, r.capacity);
    rs.push_back(r);
  }
  // A writer is still in flight: the page cannot be frozen.
  ASSERT_TRUE(pool.SealStaging());
  uint64_t before;
  EXPECT_FALSE(pool.TryFreeze(pool.staging_page(), &before));
  for (const Reservation& r : rs) pool.EndWrite(r.page);
  ASSERT_TRUE(pool.TryFreeze(pool.staging_page(), &before));
  std::vector<uint32_t> seen;
  pool.ForEachEntry(pool.staging_page(), before,
                    [&](uint32_t offset, const EntryHeader& h) {
                      seen.push_back(offset);
                      EXPECT_EQ(h.size, 11u);
                      return true;
                    });
  const uint32_t cap = EntryFootprint(PayloadSize(1, 10));
  EXPECT_EQ(seen, (std::vector<uint32_t>{0, cap, 2 * cap}));
  EXPECT_FALSE(pool.FinishFreeze(pool.staging_page(), before))
      << "entries are still live";
  for (const Reservation& r : rs) pool.Unpublish(r.page, r.capacity);
  ASSERT_TRUE(pool.TryFreeze(pool.staging_page(), &before));
  EXPECT_TRUE(pool.FinishFreeze(pool.staging_page(), before));
  const uint64_t w = pool.page(pool.staging_page()).state.load();
  EXPECT_EQ(PageState::Tier(w), PageTier::kStaging);
  EXPECT_TRUE(PageState::IsOpen(w));
  EXPECT_EQ(PageState::Used(w), 0u);
  EXPECT_EQ(pool.free_pages(), 2u) << "staging never enters the free list";
}

TEST(PagePoolTest, RelocationPageComesFromFreeListAndIsCold) {
  Block block(4);
  PagePool pool(block.data, 4, kPageSize, std::pmr::new_delete_resource());
  EXPECT_EQ(pool.relocation_room(), 0u);
  Reservation r;
  ASSERT_TRUE(pool.ReserveForRelocation(128, &r));
  EXPECT_EQ(PageState::Tier(pool.page(r.page).state.load()), PageTier::kCold);
  EXPECT_EQ(pool.relocation_room(), kPageSize - 128);
  pool.EndWrite(r.page);
}

// Cold-page mode: relocation pages are HOT, migrations go to a separate
// COLD page, and a writer never reserves on a COLD page, even when its
// `current` is stale: the sealed current page was recycled and reopened as
// the cold destination before any writer rotated.
TEST(PagePoolTest, ColdModeKeepsTiersApartAndWritersOffColdPages) {
  Block block(6);
  PagePool pool(block.data, 6, kPageSize, std::pmr::new_delete_resource(),
                /*cold_pages=*/true);
  Reservation r;
  ASSERT_TRUE(pool.ReserveForRelocation(128, &r));
  EXPECT_EQ(pool.TierOf(r.page), PageTier::kHot);
  pool.EndWrite(r.page);

  uint64_t waste = 0;
  ASSERT_TRUE(pool.SealOpenPagesForReclaim(&waste));  // current page 0 too
  const uint32_t stale = pool.current_page();
  uint64_t frozen;
  ASSERT_TRUE(pool.TryFreeze(stale, &frozen));
  ASSERT_TRUE(pool.FinishFreeze(stale, frozen));  // nothing live: recycled
  ASSERT_TRUE(pool.ReserveForColdMigration(256, /*for_drain=*/false, &r));
  ASSERT_EQ(r.page, stale) << "the recycled page is popped first";
  EXPECT_EQ(pool.TierOf(r.page), PageTier::kCold);
  pool.EndWrite(r.page);
  ASSERT_EQ(pool.current_page(), stale);

  ReserveSource src;
  ASSERT_TRUE(pool.ReserveOnCurrent(64, &r, &src, &waste));
  EXPECT_NE(r.page, stale) << "a Set landed on the COLD page";
  EXPECT_EQ(pool.TierOf(r.page), PageTier::kHot);
  pool.EndWrite(r.page);

  // (The rotating writer sealed its stale page, i.e. that COLD page; the
  // next migration opens another.) Sealed early, a COLD page with live
  // bytes is the fullest sealed COLD page; one without is never chosen.
  uint64_t live = 0;
  EXPECT_EQ(pool.FullestSealedPage(PageTier::kCold, &live), kNoPage);
  ASSERT_TRUE(pool.ReserveForColdMigration(512, /*for_drain=*/false, &r));
  const uint32_t cold = r.page;
  EXPECT_EQ(pool.TierOf(cold), PageTier::kCold);
  pool.Publish(cold, 512);
  pool.EndWrite(cold);
  ASSERT_TRUE(pool.SealColdPage(&waste));
  EXPECT_EQ(pool.FullestSealedPage(PageTier::kCold, &live), cold);
  EXPECT_EQ(live, 512u);
  EXPECT_FALSE(pool.SealColdPage(&waste)) << "no open COLD page left";
}

TEST(PagePoolTest, SparsestSealedPageIgnoresOpenPages) {
  Block block(6);
  PagePool pool(block.data, 6, kPageSize, std::pmr::new_delete_resource());
  uint64_t live;
  EXPECT_EQ(pool.SparsestSealedPage(&live), kNoPage);
  Reservation r;
  ReserveSource src;
  uint64_t waste;
  // Two full pages with 3 and 1 live entries.
  for (int page = 0; page < 2; ++page) {
    for (int i = 0; i < 4; ++i) {
      ASSERT_TRUE(
          pool.ReserveOnCurrent(kPageSize / 4, &r, &src, &waste));
      WriteDeadEntry(pool.EntryAt(r.page, r.offset), r.capacity);
      if (i < (page == 0 ? 3 : 1)) pool.Publish(r.page, r.capacity);
      pool.EndWrite(r.page);
    }
  }
  const uint32_t second = r.page;
  ASSERT_TRUE(pool.ReserveOnCurrent(64, &r, &src, &waste));  // seals page 2
  pool.EndWrite(r.page);
  EXPECT_EQ(pool.SparsestSealedPage(&live), second);
  EXPECT_EQ(live, kPageSize / 4);
}

// Fills the current page with four entries of a quarter page, the first
// `live` of them published; returns the page (still open until the next
// reservation rotates it).
uint32_t FillCurrentPage(PagePool& pool, int live, uint64_t first_key) {
  Reservation r;
  ReserveSource src;
  uint64_t waste;
  for (int i = 0; i < 4; ++i) {
    EXPECT_TRUE(pool.ReserveOnCurrent(kPageSize / 4, &r, &src, &waste));
    WriteDeadEntry(pool.EntryAt(r.page, r.offset), r.capacity);
    if (i < live) pool.Publish(r.page, r.capacity);
    pool.EndWrite(r.page);
  }
  return r.page;
}

// A writer with no room evicts whole pages oldest first among the sparsest
// (within an eighth of a page): a page recycled and refilled is the newest
// whatever its index. SparsestSealedPage, which chose before, takes the
// lowest index among equals: the newest page here. With 256 KiB pages at
// 64 MiB that choice left no 1 MiB value whole (its 33 chunks spread over
// pages of every age; docs/memory_bench.md, "Smaller pages at middle
// budgets").
TEST(PagePoolTest, EvictionTakesTheOldestOfTheSparsestPages) {
  Block block(8);
  PagePool pool(block.data, 8, kPageSize, std::pmr::new_delete_resource());
  const uint32_t first = FillCurrentPage(pool, 4, 0);
  const uint32_t second = FillCurrentPage(pool, 4, 10);
  const uint32_t third = FillCurrentPage(pool, 4, 20);
  // Empty the first page and fill it again: it becomes the newest.
  for (int i = 0; i < 4; ++i) pool.Unpublish(first, kPageSize / 4);
  ASSERT_EQ(pool.RecycleDeadPages(), 1u);
  // The free list is a stack: the recycled page is the next one opened.
  ASSERT_EQ(FillCurrentPage(pool, 4, 30), first);
  FillCurrentPage(pool, 4, 40);  // seals the refilled page
  uint64_t live = 0;
  ASSERT_EQ(pool.SparsestSealedPage(&live), first) << "ties: lowest index";
  EXPECT_EQ(pool.EvictionCandidate(&live), second);
  EXPECT_EQ(live, kPageSize);
  // A page sparser by more than an eighth of a page goes first, however
  // new: eviction still frees the most room for the live bytes it drops.
  for (int i = 0; i < 2; ++i) pool.Unpublish(first, kPageSize / 4);
  EXPECT_EQ(pool.EvictionCandidate(&live), first);
  EXPECT_EQ(live, kPageSize / 2);
  // Within an eighth, age decides.
  pool.Unpublish(third, kPageSize / 16);
  pool.Unpublish(second, kPageSize / 16);
  for (int i = 0; i < 2; ++i) pool.Publish(first, kPageSize / 4);
  EXPECT_EQ(pool.EvictionCandidate(&live), second);
  EXPECT_EQ(live, kPageSize - kPageSize / 16);
}

// Many threads bump the same pages; every reservation must be disjoint and
// every entry must read back intact after all writers finished.
// Resident 4 KiB pages of pool page `page`, from mincore(2).
size_t ResidentBytes(const Block& block, uint32_t page) {
  constexpr size_t kOsPage = 4096;
  std::vector<unsigned char> resident(kPageSize / kOsPage);
  if (mincore(block.data + size_t{page} * kPageSize, kPageSize,
              resident.data()) != 0) {
    return SIZE_MAX;
  }
  return kOsPage * static_cast<size_t>(std::count_if(
                       resident.begin(), resident.end(),
                       [](unsigned char r) { return (r & 1) != 0; }));
}

// Retired pages are out of service: the highest-numbered free pages go,
// their memory leaves the RSS, nothing reserves on, freezes or recycles
// them, the relocation reserve is kept, and UnretirePages gives them back
// (the lowest first).
TEST(PagePoolTest, RetiredPagesAreOutOfServiceUntilUnretired) {
  Block block(8);
  PagePool pool(block.data, 8, kPageSize, std::pmr::new_delete_resource());
  // Free pages 1..6 hold bytes of an earlier life, as recycled pages do.
  std::memset(block.data + kPageSize, 0x5a, 6 * size_t{kPageSize});
  ASSERT_EQ(ResidentBytes(block, 6), kPageSize);

  ASSERT_EQ(pool.RetireFreePages(2, kRelocationReserve), 2u);
  EXPECT_EQ(pool.retired_pages(), 2u);
  EXPECT_EQ(pool.pages_in_service(), 6u);
  EXPECT_EQ(pool.free_pages(), 4u);
  EXPECT_EQ(pool.TierOf(5), PageTier::kRetired);
  EXPECT_EQ(pool.TierOf(6), PageTier::kRetired);
  EXPECT_EQ(ResidentBytes(block, 5), 0u);
  EXPECT_EQ(ResidentBytes(block, 6), 0u);
  EXPECT_EQ(ResidentBytes(block, 4), kPageSize) << "only retired pages go";
  EXPECT_EQ(block.data[5 * size_t{kPageSize}], 0);
  PoolCensus census = pool.Census();
  EXPECT_EQ(census.pages_retired, 2u);
  EXPECT_EQ(census.pages_empty, 4u);
  uint64_t before;
  EXPECT_FALSE(pool.TryFreeze(5, &before));

  // Sets fill every page in service but the relocation reserve, and never
  // a retired one.
  std::set<uint32_t> used;
  Reservation r;
  ReserveSource src;
  uint64_t waste;
  while (pool.ReserveOnCurrent(kPageSize, &r, &src, &waste)) {
    used.insert(r.page);
    pool.EndWrite(r.page);
  }
  EXPECT_EQ(used, (std::set<uint32_t>{0, 1, 2, 3}));
  EXPECT_EQ(pool.free_pages(), kRelocationReserve);
  EXPECT_EQ(pool.RetireFreePages(1, kRelocationReserve), 0u)
      << "the relocation reserve is kept";
  uint64_t live;
  EXPECT_NE(pool.SparsestSealedPage(&live), 5u);
  // Sealed dead pages 0..2 recycle; the retired ones stay retired.
  EXPECT_EQ(pool.RecycleDeadPages(), 3u);
  EXPECT_EQ(pool.TierOf(5), PageTier::kRetired);
  EXPECT_EQ(pool.Census().pages_retired, 2u);

  // Free now: 0, 1, 2 and the reserve 4. The highest go first.
  ASSERT_EQ(pool.RetireFreePages(2, kRelocationReserve), 2u);
  EXPECT_EQ(pool.TierOf(4), PageTier::kRetired);
  EXPECT_EQ(pool.TierOf(2), PageTier::kRetired);
  EXPECT_EQ(pool.retired_pages(), 4u);

  ASSERT_EQ(pool.UnretirePages(1), 1u);
  EXPECT_EQ(pool.TierOf(2), PageTier::kEmpty) << "the lowest comes back first";
  EXPECT_EQ(pool.free_pages(), 3u);
  EXPECT_EQ(pool.UnretirePages(10), 3u);
  EXPECT_EQ(pool.retired_pages(), 0u);
  EXPECT_EQ(pool.free_pages(), 6u);
  census = pool.Census();
  EXPECT_EQ(census.pages_retired, 0u);
  EXPECT_EQ(census.pages_empty, 6u);
  // A page given back is reserved on again, and its memory is usable.
  used.clear();
  while (pool.ReserveOnCurrent(kPageSize, &r, &src, &waste)) {
    WriteDeadEntry(pool.EntryAt(r.page, r.offset), r.capacity);
    used.insert(r.page);
    pool.EndWrite(r.page);
  }
  EXPECT_TRUE(used.count(5) == 1 && used.count(6) == 1);
}

TEST(PagePoolTest, ConcurrentReservationsNeverOverlap) {
  constexpr uint32_t kPages = 64;
  Block block(kPages);
  PagePool pool(block.data, kPages, kPageSize,
                std::pmr::new_delete_resource());
  constexpr int kThreads = 4;
  constexpr int kPerThread = 3000;
  std::vector<std::vector<Reservation>> got(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const uint64_t id = uint64_t(t) * kPerThread + i;
        const std::string value(id % 300, char('A' + t));
        const uint32_t cap = EntryFootprint(PayloadSize(1, value.size()));
        Reservation r;
        ReserveSource src;
        uint64_t waste;
        if (!pool.ReserveOnCurrent(cap, &r, &src, &waste)) {
          ASSERT_TRUE(pool.ReserveOnStaging(cap, &r)) << "out of test pages";
        }
        WriteKeyedEntry(pool.EntryAt(r.page, r.offset), "k", value, cap);
        pool.Publish(r.page, cap);
        pool.EndWrite(r.page);
        got[t].push_back(r);
      }
    });
  }
  for (std::thread& th : threads) th.join();
  std::set<std::pair<uint32_t, uint32_t>> seen;
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kPerThread; ++i) {
      const Reservation& r = got[t][i];
      const uint64_t id = uint64_t(t) * kPerThread + i;
      EXPECT_TRUE(seen.insert({r.page, r.offset}).second);
      const EntryHeader h = ReadEntryHeader(pool.EntryAt(r.page, r.offset));
      ASSERT_EQ(h.capacity, EntryFootprint(PayloadSize(1, id % 300)));
      std::string out(h.value_size(), '\0');
      CopyPayloadRange(pool.EntryAt(r.page, r.offset), h.key_size, out.size(),
                       out.data());
      ASSERT_EQ(out, std::string(id % 300, char('A' + t)));
    }
  }
  const PoolCensus c = pool.Census();
  EXPECT_EQ(c.live_entries, uint64_t{kThreads} * kPerThread);
}

}  // namespace
}  // namespace furrball_internal
}  // namespace furrballs
