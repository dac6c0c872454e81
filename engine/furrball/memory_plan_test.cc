#include "engine/furrball/memory_plan.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "engine/arc/arc_flat_list.h"
#include "engine/furrball/furrball.h"
#include "engine/furrball/key_meta.h"
#include "engine/furrball/page_pool.h"
#include "engine/numatic/error_status.h"
#include "engine/numatic/numatic.h"

namespace furrballs {
namespace {

using furrball_internal::kMaxPageSize;
using furrball_internal::PagePool;

constexpr uint64_t kMiB = uint64_t{1} << 20;

FurrBallOptions Options(uint64_t budget_mib, int nodes) {
  FurrBallOptions o;
  o.memory_budget_bytes = budget_mib * kMiB;
  o.node_count = nodes;
  o.simulate_topology = true;
  o.max_value_bytes = 32 << 10;
  return o;
}

TEST(MemoryPlanTest, EveryPartFitsTheNodesShare) {
  for (uint64_t mib : {2, 4, 8, 64, 256, 4096}) {
    for (int nodes : {1, 2, 4}) {
      for (bool spill : {false, true}) {
        FurrBallOptions o = Options(mib, nodes);
        if (spill) o.spill_dir = "/unused";
        absl::StatusOr<MemoryPlan> plan = PlanMemory(o, nodes);
        if (!plan.ok()) {
          // Only budgets too small for a node's minimum may fail.
          EXPECT_LT(mib / nodes, 8u) << plan.status();
          EXPECT_NE(plan.status().message().find("raise the budget"),
                    std::string::npos)
              << plan.status();
          continue;
        }
        SCOPED_TRACE(plan->Summary());
        EXPECT_LE(plan->total_bytes(), o.memory_budget_bytes / nodes);
        EXPECT_GE(plan->page_count, 4u);
        EXPECT_GE(plan->max_keys, 64u);
        // Nearly all of the share is used: at most a page and a key's
        // worth is left over (plus the binary search's granularity).
        EXPECT_GE(plan->total_bytes() + plan->page_size + 4096,
                  o.memory_budget_bytes / nodes);
        EXPECT_EQ(plan->spill_buffer_bytes != 0, spill);
      }
    }
  }
}

TEST(MemoryPlanTest, KeySlotsFollowTheExpectedEntrySize) {
  FurrBallOptions small = Options(64, 1);
  small.expected_entry_bytes = 88;
  FurrBallOptions large = Options(64, 1);
  large.expected_entry_bytes = 1024 + 24;
  absl::StatusOr<MemoryPlan> a = PlanMemory(small, 1);
  absl::StatusOr<MemoryPlan> b = PlanMemory(large, 1);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_GT(a->max_keys, 4 * b->max_keys);
  // Either way, metadata and entries of the expected size fill the budget.
  for (const MemoryPlan* p : {&*a, &*b}) {
    EXPECT_GT(p->value_bytes(), p->total_bytes() / 4) << p->Summary();
  }
}

// A node whose share would derive more key slots than 32 bits (or ARC)
// can index gets the largest table there is, never a count cast down to a
// small one (issue 15: the derived capacity was cast to 32 bits unchecked;
// 2^32 + 2^20 slots became 2^20). A pure planning check: nothing is mapped.
// 2 TiB, the most a node can have (2^16 pages of 32 MiB: key_meta.h,
// page_pool.h), still derives tens of billions of slots.
TEST(MemoryPlanTest, ADerivedKeyTableIsCappedNotTruncated) {
  FurrBallOptions o = Options(uint64_t{1} << 21, 1);  // 2 TiB on one node
  o.expected_entry_bytes = 16;
  absl::StatusOr<MemoryPlan> plan = PlanMemory(o, 1);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->page_size, kMaxPageSize);
  EXPECT_EQ(plan->max_keys, std::min<uint64_t>(ArcFlatLists<>::kMaxCapacity,
                                               UINT32_MAX / 2))
      << plan->Summary();
  EXPECT_LE(plan->total_bytes(), o.memory_budget_bytes);
}

// Issue 13 goal 4: the page size follows the budget, whatever the largest
// value (values too large for a page's share are chunked), and small
// budgets get enough pages for the reclaimer to compact.
TEST(MemoryPlanTest, PageSizeFollowsTheBudgetNotTheLargestValue) {
  struct Case {
    uint64_t mib;
    int nodes;
  };
  for (const Case& c : {Case{4, 1}, Case{8, 2}, Case{6, 1}, Case{6, 2}}) {
    FurrBallOptions o = Options(c.mib, c.nodes);
    o.max_value_bytes = FurrBallOptions{}.max_value_bytes;  // 1 MiB
    absl::StatusOr<MemoryPlan> plan = PlanMemory(o, c.nodes);
    ASSERT_TRUE(plan.ok()) << c.mib << " MiB: " << plan.status();
    SCOPED_TRACE(plan->Summary());
    EXPECT_EQ(plan->page_size, 64u << 10);
    EXPECT_GE(plan->page_count, 24u);
    absl::StatusOr<std::unique_ptr<FurrBall>> ball = FurrBall::Open(o);
    ASSERT_TRUE(ball.ok()) << ball.status();
    EXPECT_EQ((*ball)->memory_plan().page_size, plan->page_size);
  }
  // A node gets 256 pages of the largest power of two up to 2 MiB (a 256th
  // of its share), never smaller than 64 KiB.
  struct Sized {
    uint64_t mib;
    int nodes;
    uint32_t page_kib;
  };
  for (const Sized& c : {Sized{8, 1, 64}, Sized{16, 4, 64}, Sized{32, 1, 128},
                         Sized{64, 1, 256}, Sized{100, 1, 256},
                         Sized{256, 2, 512}, Sized{256, 1, 1024},
                         Sized{512, 1, 2048}, Sized{4096, 1, 2048}}) {
    FurrBallOptions o = Options(c.mib, c.nodes);
    absl::StatusOr<MemoryPlan> plan = PlanMemory(o, c.nodes);
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_EQ(plan->page_size, c.page_kib << 10)
        << c.mib << " MiB on " << c.nodes;
  }
  FurrBallOptions o = Options(4, 1);
  o.page_size_bytes = 128 << 10;  // an explicit page size is kept
  o.max_value_bytes = 1 << 20;
  absl::StatusOr<MemoryPlan> plan = PlanMemory(o, 1);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->page_size, 128u << 10);
}

// The smallest budgets start with the smallest pages, or say why not.
TEST(MemoryPlanTest, ATinyBudgetStartsOrNamesWhatDoesNotFit) {
  FurrBallOptions o = Options(1, 1);
  o.max_value_bytes = 1 << 20;
  absl::StatusOr<MemoryPlan> plan = PlanMemory(o, 1);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->page_size, 64u << 10) << plan->Summary();
  EXPECT_GE(plan->page_count, 4u) << plan->Summary();

  o = Options(1, 4);  // 256 KiB a node: not even 4 pages of 64 KiB
  plan = PlanMemory(o, 4);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(ErrorOf(plan.status()), Error::kInvalidArgument);
  EXPECT_NE(plan.status().message().find("raise the budget"),
            std::string::npos)
      << plan.status();
  EXPECT_EQ(plan.status().message().find("smaller page size"),
            std::string::npos)
      << "the pages are already the smallest: " << plan.status();
  absl::StatusOr<std::unique_ptr<FurrBall>> ball = FurrBall::Open(o);
  ASSERT_FALSE(ball.ok());
  EXPECT_EQ(ball.status().message(), plan.status().message());
}

// A KeyMeta names its page in 16 bits (key_meta.h). An explicit page size
// that would need more pages than that is refused with the page size that
// would do; an automatic one grows instead. PlanMemory maps nothing, so the
// budgets can be large.
TEST(MemoryPlanTest, PagesPastWhatAKeyMetaNamesAreRefusedOrLarger) {
  const uint64_t limit_bytes = uint64_t{kMaxPagesPerNode} * (64 << 10);
  FurrBallOptions o = Options(limit_bytes / kMiB, 1);
  o.page_size_bytes = 64 << 10;
  // 4 GiB of 64 KiB pages: the key table takes its share, so the pages
  // stay below the limit.
  absl::StatusOr<MemoryPlan> plan = PlanMemory(o, 1);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_LE(plan->page_count, kMaxPagesPerNode);
  o.memory_budget_bytes = 2 * limit_bytes;
  plan = PlanMemory(o, 1);
  ASSERT_FALSE(plan.ok()) << plan->Summary();
  EXPECT_EQ(ErrorOf(plan.status()), Error::kInvalidArgument);
  EXPECT_NE(plan.status().message().find(
                "more than the 65536 a node can address: raise "
                "page_size_bytes (to 128 KiB or more), or leave it automatic"),
            std::string::npos)
      << plan.status();
  // Open says the same before it maps anything.
  absl::StatusOr<std::unique_ptr<FurrBall>> ball = FurrBall::Open(o);
  ASSERT_FALSE(ball.ok());
  EXPECT_EQ(ball.status().message(), plan.status().message());
  // The suggested page size plans, and so does the automatic one, which
  // keeps 2 MiB up to kMaxPagesPerNode of them and then doubles.
  o.page_size_bytes = 128 << 10;
  EXPECT_TRUE(PlanMemory(o, 1).ok());
  struct Case {
    uint64_t gib;
    uint32_t page_mib;
  };
  for (const Case c : {Case{64, 2}, Case{128, 2}, Case{129, 4}, Case{256, 4},
                       Case{1024, 16}, Case{2048, 32}}) {
    o = Options(c.gib << 10, 1);
    plan = PlanMemory(o, 1);
    ASSERT_TRUE(plan.ok()) << c.gib << " GiB: " << plan.status();
    EXPECT_LE(plan->page_count, kMaxPagesPerNode) << plan->Summary();
    EXPECT_EQ(plan->page_size, c.page_mib << 20) << plan->Summary();
  }
  // 4 TiB: no page size is enough. 64 MiB pages took it until the key size
  // moved into the entry header (2026-11-25), which describes pages of at
  // most 32 MiB (page_pool.h).
  o = Options(uint64_t{4096} << 10, 1);
  plan = PlanMemory(o, 1);
  ASSERT_FALSE(plan.ok()) << plan->Summary();
  EXPECT_NE(plan.status().message().find("use more nodes or a smaller budget"),
            std::string::npos)
      << plan.status();
}

// The budget at every step of a node that grows its key table as far as
// it can, paying with pages: before a growth the pages for its peak (old
// and new table) are out of service, after it only those the new table
// needs. Growth reaches well past the starting table and stays within the
// ceiling.
TEST(MemoryPlanTest, GrowthKeepsTheShareAtEveryStep) {
  for (uint64_t mib : {4, 8, 64, 256}) {
    for (int nodes : {1, 2}) {
      for (bool spill : {false, true}) {
        FurrBallOptions o = Options(mib, nodes);
        o.expected_entry_bytes = 1048;
        if (spill) o.spill_dir = "/unused";
        absl::StatusOr<MemoryPlan> plan = PlanMemory(o, nodes);
        ASSERT_TRUE(plan.ok()) << plan.status();
        SCOPED_TRACE(plan->Summary());
        const uint64_t share = plan->node_budget_bytes;
        auto total = [&](uint64_t key_table, uint32_t retired) {
          return plan->fixed_bytes + plan->spill_buffer_bytes + key_table +
                 uint64_t{plan->page_count - retired} * plan->page_size;
        };
        ASSERT_LE(total(KeyTableBytes(plan->max_keys), 0), share);
        EXPECT_GT(plan->key_ceiling, 4 * plan->max_keys);
        EXPECT_EQ(GrowthTarget(*plan, plan->max_keys,
                               EntryPages{plan->page_count, plan->max_keys},
                               0),
                  plan->max_keys)
            << "entries in every page leave nothing to pay with";
        uint32_t keys = plan->max_keys;
        uint32_t retired = 0;
        int growths = 0;
        for (;;) {
          // Entries that take no pages: the most the share allows.
          const uint32_t to = GrowthTarget(*plan, keys, EntryPages{}, 0);
          if (to == keys) break;
          ASSERT_GT(to, keys);
          ASSERT_LE(to, 2 * uint64_t{keys});
          ASSERT_LE(to, plan->key_ceiling);
          const uint64_t peak = KeyTableGrowthPeakBytes(keys, to);
          retired = std::max(retired, RetiredPagesFor(*plan, peak));
          ASSERT_LE(retired, plan->page_count - PagePool::kMinPages);
          ASSERT_LE(total(peak, retired), share) << keys << " -> " << to;
          const uint32_t after = RetiredPagesFor(*plan, KeyTableBytes(to));
          ASSERT_LE(after, retired) << "the peak needs the most";
          retired = after;
          ASSERT_LE(total(KeyTableBytes(to), retired), share);
          keys = to;
          ++growths;
        }
        EXPECT_GE(growths, 2);
        EXPECT_GT(keys, plan->key_ceiling / 4) << growths << " growths";
      }
    }
  }
}

// A key count given explicitly is the table's for good.
TEST(MemoryPlanTest, AGivenKeyCountNeverGrows) {
  FurrBallOptions o = Options(64, 1);
  o.max_keys_per_node = 10000;
  absl::StatusOr<MemoryPlan> plan = PlanMemory(o, 1);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->key_ceiling, 10000u);
  EXPECT_EQ(GrowthTarget(*plan, 10000, EntryPages{}, 0), 10000u);
  EXPECT_EQ(plan->Summary().find("grows"), std::string::npos);
}

// 64 MiB on one node, planned for 1 KiB values and 24-byte keys.
absl::StatusOr<MemoryPlan> PlanFor1KiBEntries() {
  FurrBallOptions o = Options(64, 1);
  o.expected_entry_bytes = 1048;
  return PlanMemory(o, 1);
}

// The pages in service once a table of `keys` slots has paid for itself.
uint32_t InServiceAfter(const MemoryPlan& plan, uint64_t keys) {
  return plan.page_count - RetiredPagesFor(plan, KeyTableBytes(keys));
}

// A growth goes as far as the grown table leaves pages for its keys at the
// pages per key seen, beside the kept free pages: one key more would not
// fit (or the doubling is reached). None when a sixteenth more keys would
// not fit.
TEST(MemoryPlanTest, GrowthIsWhatLeavesPagesForTheKeys) {
  const absl::StatusOr<MemoryPlan> plan = PlanFor1KiBEntries();
  ASSERT_TRUE(plan.ok()) << plan.status();
  SCOPED_TRACE(plan->Summary());
  const uint32_t c = plan->max_keys;
  EXPECT_NE(plan->Summary().find("grows to up to"), std::string::npos);
  EXPECT_EQ(GrowthTarget(*plan, c, EntryPages{}, 0), 2 * c)
      << "entries that take nothing: the doubling";
  const uint32_t keep = 2;
  auto pages_for = [](const EntryPages& e, uint64_t keys) {
    return (uint64_t{e.pages} * keys + e.keys - 1) / e.keys;
  };
  // 64-byte values: c keys in 2 of the pages.
  const EntryPages small{2, c};
  const uint32_t to = GrowthTarget(*plan, c, small, keep);
  ASSERT_GT(to, c);
  ASSERT_LE(to, 2 * c);
  EXPECT_GE(InServiceAfter(*plan, to), pages_for(small, to) + keep);
  if (to < 2 * c) {
    EXPECT_LT(InServiceAfter(*plan, to + 1), pages_for(small, to + 1) + keep);
  }
  // Entries that fill all but a few pages: a sixteenth more keys does not
  // fit beside the grown table.
  const uint32_t most_pages = InServiceAfter(*plan, c) - keep;
  const EntryPages large{most_pages, c};
  EXPECT_EQ(GrowthTarget(*plan, c, large, keep), c);
  // The pages per key seen decide: fewer keys in as many pages, less growth.
  const EntryPages larger{8, c};
  const EntryPages smaller{8, 2 * uint64_t{c}};
  EXPECT_LE(GrowthTarget(*plan, c, larger, keep),
            GrowthTarget(*plan, c, smaller, keep));
}

// The trigger: a full key table (ARC at c, evicting by key count) grows to
// GrowthTarget with the pages in service that are not free as the
// entries' pages; no growth when it is not full, past the ceiling, or when
// the pages are full.
TEST(MemoryPlanTest, AFullKeyTableWithFreePagesGrows) {
  const absl::StatusOr<MemoryPlan> plan = PlanFor1KiBEntries();
  ASSERT_TRUE(plan.ok()) << plan.status();
  SCOPED_TRACE(plan->Summary());
  const uint32_t c = plan->max_keys;
  KeyTableLoad load;
  load.capacity = c;
  load.resident_keys = c;
  load.evicted_for_keys = true;
  load.free_pages = plan->page_count * 3 / 4;  // small entries: pages free
  const uint32_t keep = 2;
  const uint32_t to = KeyTableGrowthTo(*plan, load, keep);
  EXPECT_GT(to, c);
  EXPECT_EQ(to, GrowthTarget(*plan, c,
                             EntryPages{plan->page_count - load.free_pages, c},
                             keep));

  KeyTableLoad not_evicting = load;
  not_evicting.evicted_for_keys = false;
  EXPECT_EQ(KeyTableGrowthTo(*plan, not_evicting, keep), c);
  KeyTableLoad not_full = load;
  not_full.resident_keys = c / 2;  // evictions of another kind
  EXPECT_EQ(KeyTableGrowthTo(*plan, not_full, keep), c);
  KeyTableLoad pages_full = load;
  pages_full.free_pages = keep;
  EXPECT_EQ(KeyTableGrowthTo(*plan, pages_full, keep), c);
  KeyTableLoad retired = load;  // retired pages are not the entries'
  retired.retired_pages = 4;
  retired.free_pages = plan->page_count * 3 / 4 - 4;
  EXPECT_EQ(KeyTableGrowthTo(*plan, retired, keep), to);
  KeyTableLoad at_ceiling = load;
  at_ceiling.capacity = plan->key_ceiling;
  at_ceiling.resident_keys = plan->key_ceiling;
  EXPECT_EQ(KeyTableGrowthTo(*plan, at_ceiling, keep), plan->key_ceiling);
}

// The shrink rule: a grown table (4 c) holding few keys of large entries,
// evicting for pages, shrinks to the split for that entry size, at least
// the resident keys and an eighth and at least the starting table; not
// when keys are what is evicted, nor when it is half full or more, nor
// below the table a node starts with, nor by less than a quarter.
TEST(MemoryPlanTest, AHalfEmptyKeyTableShortOfPagesShrinks) {
  const absl::StatusOr<MemoryPlan> plan = PlanFor1KiBEntries();
  ASSERT_TRUE(plan.ok()) << plan.status();
  SCOPED_TRACE(plan->Summary());
  const uint32_t c0 = plan->max_keys;
  const uint32_t keep = 2;
  KeyTableLoad load;
  load.capacity = 4 * c0;
  // Fewer than half of c resident, their entries filling the pages (about
  // 450 bytes each here): the split lies above the floor.
  load.resident_keys = 7 * uint64_t{c0} / 4;
  load.evicted_for_pages = true;
  load.free_pages = keep;
  load.retired_pages = plan->page_count / 4;  // the growths' pages
  load.retired_tables = 2;
  const uint32_t to = KeyTableShrinkTo(*plan, load, keep);
  EXPECT_LT(to, load.capacity);
  EXPECT_LE(uint64_t{to} * 4, uint64_t{load.capacity} * 3);
  EXPECT_GE(to, c0);
  EXPECT_GE(to, load.resident_keys + load.resident_keys / 8);
  // The split: the table `to` leaves the pages its keys would take.
  const uint32_t in_service = plan->page_count - load.retired_pages;
  const uint64_t used = in_service - load.free_pages;
  const auto pages_left = [&](uint64_t t) -> int64_t {
    const uint32_t retired = RetiredPagesFor(
        *plan, KeyTableBytes(t) + RetiredKeyTableBytes(load.retired_tables + 1));
    return int64_t{plan->page_count} - retired -
           static_cast<int64_t>((used * t + load.resident_keys - 1) /
                                    load.resident_keys +
                                keep);
  };
  EXPECT_GT(to, load.resident_keys + load.resident_keys / 8);
  EXPECT_GE(pages_left(to), 0) << "the table leaves its keys' pages";
  EXPECT_LT(pages_left(to + 1), 0) << "and is the largest that does";

  KeyTableLoad for_keys = load;
  for_keys.evicted_for_keys = true;
  EXPECT_EQ(KeyTableShrinkTo(*plan, for_keys, keep), load.capacity);
  KeyTableLoad not_for_pages = load;
  not_for_pages.evicted_for_pages = false;
  EXPECT_EQ(KeyTableShrinkTo(*plan, not_for_pages, keep), load.capacity);
  KeyTableLoad half_full = load;
  half_full.resident_keys = load.capacity / 2;
  EXPECT_EQ(KeyTableShrinkTo(*plan, half_full, keep), load.capacity);
  KeyTableLoad at_start = load;
  at_start.capacity = c0;
  at_start.resident_keys = c0 / 4;
  EXPECT_EQ(KeyTableShrinkTo(*plan, at_start, keep), c0);
  KeyTableLoad small_saving = load;  // the floor is above 3/4 of c
  small_saving.capacity = c0 + c0 / 5;
  small_saving.resident_keys = c0 / 4;
  EXPECT_EQ(KeyTableShrinkTo(*plan, small_saving, keep),
            small_saving.capacity);
}

// Hysteresis: after a growth to GrowthTarget for an entry size, the shrink
// rule at that entry size does not undo it, whatever the table's fill.
TEST(MemoryPlanTest, AGrowthIsNotUndoneAtTheSameEntrySize) {
  const absl::StatusOr<MemoryPlan> plan = PlanFor1KiBEntries();
  ASSERT_TRUE(plan.ok()) << plan.status();
  const uint32_t c = plan->max_keys;
  const uint32_t keep = 2;
  for (const uint32_t pages : {2u, 4u, 8u}) {
    const EntryPages small_entries{pages, c};
    const uint32_t grown = GrowthTarget(*plan, c, small_entries, keep);
    if (grown == c) continue;
    KeyTableLoad after;
    after.capacity = grown;
    after.evicted_for_pages = true;
    after.retired_tables = 1;
    after.retired_pages = RetiredPagesFor(
        *plan, KeyTableBytes(grown) + RetiredKeyTableBytes(1));
    // Keys at the same pages per key as when it grew, the table half full.
    after.resident_keys = grown / 2 - 1;
    const uint64_t used =
        (uint64_t{pages} * after.resident_keys + c - 1) / c;
    const uint32_t in_service = plan->page_count - after.retired_pages;
    after.free_pages =
        in_service - static_cast<uint32_t>(std::min<uint64_t>(used, in_service));
    EXPECT_EQ(KeyTableShrinkTo(*plan, after, keep), grown)
        << pages << " pages for " << c << " keys";
  }
}

TEST(MemoryPlanTest, ExplicitKeySlotsThatDoNotFitAreRefused) {
  FurrBallOptions o = Options(8, 1);
  o.max_keys_per_node = 10'000'000;
  absl::StatusOr<MemoryPlan> plan = PlanMemory(o, 1);
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("max_keys_per_node"),
            std::string::npos)
      << plan.status();
}

TEST(MemoryPlanTest, BudgetForPagesGivesExactlyThosePages) {
  for (int nodes : {1, 2, 4}) {
    for (bool spill : {false, true}) {
      FurrBallOptions o = Options(1, nodes);
      o.page_size_bytes = 64 << 10;
      o.max_keys_per_node = 1200 / nodes;
      if (spill) o.spill_dir = "/unused";
      o.memory_budget_bytes = MemoryBudgetForPages(o, nodes, 16);
      absl::StatusOr<MemoryPlan> plan = PlanMemory(o, nodes);
      ASSERT_TRUE(plan.ok()) << plan.status();
      EXPECT_EQ(plan->page_count, 16u) << plan->Summary();
      o.memory_budget_bytes -= nodes * uint64_t{4096};
      plan = PlanMemory(o, nodes);
      ASSERT_TRUE(plan.ok()) << plan.status();
      EXPECT_EQ(plan->page_count, 15u) << "the smallest such budget";
    }
  }
}

// The worker's free-page reserve is the relocation reserve plus one up to
// 256 pages, whatever the page size: a free page holds no data (at 64 MiB,
// 232 pages of 256 KiB, 1/32 of them kept 7 free, 2.7% of the budget and
// about 1,200 keys of 1 KiB). Larger nodes keep 1/128 of their pages.
TEST(MemoryPlanTest, TheFreePageReserveIsTwoPagesUpTo256) {
  for (uint64_t mib : {4, 8, 64, 128, 256}) {
    absl::StatusOr<MemoryPlan> plan = PlanMemory(Options(mib, 1), 1);
    ASSERT_TRUE(plan.ok()) << plan.status();
    SCOPED_TRACE(plan->Summary());
    EXPECT_LE(plan->page_count, 256u);
    EXPECT_EQ(FreePageReserve(plan->page_count, /*cold_pages=*/false),
              furrball_internal::kRelocationReserve + 1);
    EXPECT_EQ(FreePageReserve(plan->page_count, /*cold_pages=*/true),
              furrball_internal::kRelocationReserve + 2);
  }
  EXPECT_EQ(FreePageReserve(512, false), 4u);
  EXPECT_EQ(FreePageReserve(8192, false), 64u);
}

// The plan is what a cache really maps: value pages, key table, ARC and
// every fixed structure of each shard stay inside the budget.
TEST(MemoryPlanTest, AnOpenCacheMapsNoMoreThanItsBudget) {
  for (uint64_t mib : {8, 64}) {
    for (uint64_t entry : {88, 1048}) {
      FurrBallOptions o = Options(mib, 2);
      o.expected_entry_bytes = entry;
      const uint64_t mapped_before = Numatic::ProcessMappedBytes();
      absl::StatusOr<std::unique_ptr<FurrBall>> ball = FurrBall::Open(o);
      ASSERT_TRUE(ball.ok()) << ball.status();
      const MemoryPlan& plan = (*ball)->memory_plan();
      SCOPED_TRACE(plan.Summary());
      // Retired pages stay mapped but their memory is given back: they
      // are what pays for a key table larger than the starting one.
      uint64_t retired_bytes = 0;
      for (const NodeStatsSnapshot& s : (*ball)->Stats()) {
        retired_bytes += s.pages_retired * plan.page_size;
      }
      const uint64_t mapped = Numatic::ProcessMappedBytes() - mapped_before;
      EXPECT_LE(mapped - retired_bytes, o.memory_budget_bytes);
      EXPECT_LE((*ball)->MetadataBytes(), 2 * plan.metadata_bytes());

      EXPECT_GE(mapped, 2 * plan.value_bytes());
    }
  }
}

// The plan counts what a shard maps, not a rounded-up guess: an open cache
// maps at most its plan, and the plan exceeds it by no more than its
// allowance for the page rounding of the key table's arrays. Until
// 2026-11-24 the fixed structures were counted as 128 KiB plus 128 B a
// page, 48 KiB more than a 4 MiB node maps; the unused budget was most of
// a page there (docs/memory_bench.md, "Small budgets at 80%").
TEST(MemoryPlanTest, ThePlanIsWhatAShardMaps) {
  for (uint64_t mib : {4, 8, 64}) {
    for (int nodes : {1, 2}) {
      FurrBallOptions o = Options(mib * nodes, nodes);
      absl::StatusOr<std::unique_ptr<FurrBall>> ball = FurrBall::Open(o);
      ASSERT_TRUE(ball.ok()) << ball.status();
      const MemoryPlan& plan = (*ball)->memory_plan();
      SCOPED_TRACE(plan.Summary());
      const uint64_t mapped =
          (*ball)->MetadataBytes() + nodes * plan.value_bytes();
      const uint64_t planned = nodes * (plan.total_bytes());
      EXPECT_LE(mapped, planned);
      EXPECT_LE(planned - mapped, nodes * 5 * GetPageSize());
      // What the plan leaves of the share is less than a page with its
      // metadata.
      EXPECT_LT(plan.node_budget_bytes - plan.total_bytes(),
                plan.page_size + 2 * GetPageSize());
    }
  }
}

}  // namespace
}  // namespace furrballs
