// SpillIndex: entries, per-page counts, and the stale-entry sweep (expired
// entries and entries of pages the store removed) that keeps the index from
// holding keys nobody asks for again.
#include "engine/furrball/spill_index.h"

#include <algorithm>
#include <cstdint>
#include <set>
#include <vector>

#include <gtest/gtest.h>

namespace furrballs {
namespace furrball_internal {
namespace {

HashPair H(uint64_t i) { return HashPair{i * 0x9e3779b97f4a7c15ULL, i + 1}; }

// Runs FindStale slices until it has seen every entry at least once (a full
// turn of the cursor plus one slice) and returns the stale keys' numbers.
std::set<uint64_t> SweepAll(SpillIndex& index, uint64_t now, size_t slice,
                            size_t keys) {
  SpillIndex::SweepCursor cursor;
  std::set<uint64_t> stale;
  for (size_t round = 0; round < 4 * (keys / slice + 16 + 1); ++round) {
    for (const auto& [h, key] : index.FindStale(now, slice, &cursor)) {
      stale.insert(h.h2 - 1);
    }
  }
  return stale;
}

TEST(SpillIndexTest, AddTakeAndPageCounts) {
  SpillIndex index;
  index.Add(H(1), SpilledKey{10, 1, 0});
  index.Add(H(2), SpilledKey{10, 2, 0});
  index.Add(H(3), SpilledKey{11, 3, 0});
  EXPECT_EQ(index.size(), 3u);
  EXPECT_TRUE(index.HasKeys(10));
  SpilledKey k;
  ASSERT_TRUE(index.Lookup(H(2), &k));
  EXPECT_EQ(k, (SpilledKey{10, 2, 0}));
  EXPECT_FALSE(index.TakeIf(H(2), SpilledKey{10, 1, 0}));  // not that entry
  EXPECT_TRUE(index.TakeIf(H(2), SpilledKey{10, 2, 0}));
  EXPECT_TRUE(index.Take(H(1)));
  EXPECT_FALSE(index.HasKeys(10));
  EXPECT_EQ(index.TakeDeadPages(), std::vector<uint64_t>{10});
  // Replacing an entry moves its key to the new page.
  index.Add(H(3), SpilledKey{12, 4, 0});
  EXPECT_FALSE(index.HasKeys(11));
  EXPECT_TRUE(index.HasKeys(12));
  EXPECT_EQ(index.size(), 1u);
  // TakeIfOlder removes only an entry older than the given version.
  EXPECT_FALSE(index.TakeIfOlder(H(3), 4));
  EXPECT_FALSE(index.TakeIfOlder(H(9), 100));  // no entry
  EXPECT_TRUE(index.TakeIfOlder(H(3), 5));
  EXPECT_EQ(index.size(), 0u);
  EXPECT_FALSE(index.HasKeys(12));
}

TEST(SpillIndexTest, SweepFindsNothingWhenNothingCanBeStale) {
  SpillIndex index;
  for (uint64_t i = 0; i < 1000; ++i) index.Add(H(i), SpilledKey{i / 100, i, 0});
  SpillIndex::SweepCursor cursor;
  EXPECT_TRUE(index.FindStale(/*now_ms=*/1'000'000, 5000, &cursor).empty());
}

TEST(SpillIndexTest, SweepFindsEveryExpiredEntryAndOnlyThose) {
  SpillIndex index;
  constexpr uint64_t kKeys = 3000;
  for (uint64_t i = 0; i < kKeys; ++i) {
    // A third never expire, a third expire at 100, a third at 200.
    index.Add(H(i), SpilledKey{i / 64, i, i % 3 == 0 ? 0 : 100 * (i % 3)});
  }
  std::set<uint64_t> want;
  for (uint64_t i = 0; i < kKeys; ++i) {
    if (i % 3 == 1) want.insert(i);
  }
  EXPECT_EQ(SweepAll(index, /*now=*/150, /*slice=*/97, kKeys), want);
  // Touch: an expiry removed by SetExpiry no longer counts.
  for (uint64_t i : want) ASSERT_TRUE(index.SetExpiry(H(i), 0));
  EXPECT_TRUE(SweepAll(index, 150, 97, kKeys).empty());
  // Once every expiry is gone the sweep returns at once.
  for (uint64_t i = 0; i < kKeys; ++i) {
    if (i % 3 == 2) {
      ASSERT_TRUE(index.SetExpiry(H(i), 0));
    }
  }
  SpillIndex::SweepCursor cursor;
  EXPECT_TRUE(index.FindStale(1'000'000, kKeys, &cursor).empty());
}

TEST(SpillIndexTest, SweepFindsEntriesOfGonePagesUntilTheyAreTaken) {
  SpillIndex index;
  constexpr uint64_t kKeys = 2000;
  for (uint64_t i = 0; i < kKeys; ++i) index.Add(H(i), SpilledKey{i % 20, i, 0});
  // Pages 3 and 7 were removed for the budget; page 99 never had keys.
  index.MarkPagesGone({3, 7, 99});
  std::set<uint64_t> want;
  for (uint64_t i = 0; i < kKeys; ++i) {
    if (i % 20 == 3 || i % 20 == 7) want.insert(i);
  }
  EXPECT_EQ(SweepAll(index, 0, 50, kKeys), want);
  // A key rewritten (re-spilled to a live page) is no longer stale.
  index.Add(H(3), SpilledKey{5, 100000, 0});
  want.erase(3);
  EXPECT_EQ(SweepAll(index, 0, 50, kKeys), want);
  // Taking them empties the pages, which are then neither gone nor alive.
  for (uint64_t i : want) {
    ASSERT_TRUE(index.TakeIf(H(i), SpilledKey{i % 20, i, 0}));
  }
  EXPECT_FALSE(index.HasKeys(3));
  EXPECT_FALSE(index.HasKeys(7));
  EXPECT_TRUE(SweepAll(index, 0, 50, kKeys).empty());
  std::vector<uint64_t> dead = index.TakeDeadPages();
  std::sort(dead.begin(), dead.end());
  EXPECT_EQ(dead, (std::vector<uint64_t>{3, 7}));
  // A page marked gone after its last key left is not remembered.
  index.MarkPagesGone({3});
  index.Add(H(kKeys), SpilledKey{3, 1, 0});  // (the engine never reuses ids)
  EXPECT_TRUE(SweepAll(index, 0, 50, kKeys + 1).empty());
}

}  // namespace
}  // namespace furrball_internal
}  // namespace furrballs
