// The engine at the limits of its entry format (entry.h): pages of
// kMaxPageSize, the largest a header word describes, and keys of
// kMaxPayloadKeyBytes, the largest its key field holds, through a real
// FurrBall: whole and chunked values round-trip at the largest page, and
// the longest keys survive the reclaimer (relocation, eviction), at 2 MiB
// pages: filling a budget of the largest pages over and over took minutes
// under ThreadSanitizer, which tracks every word of page it sees accessed
// atomically. furrball_limits_spill_test adds the spill tier.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/furrball/chunked_value.h"
#include "engine/furrball/chunked_value_testing.h"
#include "engine/furrball/entry.h"
#include "engine/furrball/furrball.h"
#include "engine/furrball/furrball_limits_testing.h"
#include "engine/furrball/page_pool.h"

namespace furrballs {
namespace furrball_internal {
namespace {

TEST(FurrBallLimitsTest, TheLargestKeyAtTheLargestPageRoundTrips) {
  std::unique_ptr<FurrBall> ball = MustOpen(LongKeyPages(8));
  ASSERT_NE(ball, nullptr);
  ASSERT_EQ(ball->memory_plan().page_size, kMaxPageSize)
      << ball->memory_plan().Summary();
  const size_t whole = LargestWholeValue();
  ASSERT_EQ(EntryFootprint(PayloadSize(kMaxPayloadKeyBytes, whole)),
            MaxWholeEntryBytes(kMaxPageSize));

  std::string got;
  const std::string whole_value = Stamped(whole, 1);
  ASSERT_EQ(ball->Set(LongestKey(0), whole_value).error, Error::kOk);
  EXPECT_EQ(LiveKeys(*ball), 1) << "one entry, not chunked";
  ASSERT_TRUE(ball->Get(LongestKey(0), &got).found);
  EXPECT_TRUE(got == whole_value);
  // One more byte is chunked: a head under the longest key and one chunk
  // (a chunk's key is 28 bytes, so the value fits one).
  const std::string chunked_value = Stamped(whole + 1, 2);
  ASSERT_EQ(ball->Set(LongestKey(1), chunked_value).error, Error::kOk);
  EXPECT_EQ(LiveKeys(*ball), 3) << "key 0, key 1's head and its chunk";
  ASSERT_TRUE(ball->Get(LongestKey(1), &got).found);
  EXPECT_TRUE(got == chunked_value);
  // Keys that differ in one byte are different keys.
  std::string near = LongestKey(0);
  near[kMaxPayloadKeyBytes / 2] ^= 1;
  EXPECT_FALSE(ball->Get(near, &got).found);
  // A key one byte past the limit is refused, never truncated.
  EXPECT_EQ(ball->Set(LongestKey(0) + "x", "v").error, Error::kKeyTooLarge);
}

// The page size of the reclaimer tests (see the top of the file).
constexpr uint32_t kChurnPage = 2 << 20;

// Writes the largest whole entries under the longest keys, each write of a
// key a little larger than its last (kSteps steps, then back: an entry
// keeps its capacity when it shrinks in place), so that an overwrite needs
// a new entry; reads the key back after each Set. Check: every value found
// is the last one written under its key.
class Churner {
 public:
  Churner(FurrBall& ball, int keys)
      : ball_(ball),
        whole_(LargestWholeValue(ball.memory_plan().page_size)),
        last_(keys, -1) {}

  // Writes key k; returns the bytes written.
  size_t Write(int k) {
    const int step = ++writes_of_[k] % kSteps;
    const size_t size = whole_ - 512 * (kSteps - step);
    EXPECT_EQ(ball_.Set(LongestKey(k), Stamped(size, round_)).error,
              Error::kOk)
        << round_;
    last_[k] = round_++;
    Check(k);
    return size;
  }

  void Check(int k) {
    if (!ball_.Get(LongestKey(k), &got_).found) return;
    ++hits_;
    const std::optional<uint64_t> stamp = StampOf(got_);
    EXPECT_TRUE(stamp.has_value()) << "key " << k << " came back mixed";
    EXPECT_EQ(stamp.value_or(0), static_cast<uint64_t>(last_[k])) << k;
  }

  void CheckAll() {
    for (int k = 0; k < static_cast<int>(last_.size()); ++k) Check(k);
  }
  int hits() const { return hits_; }

 private:
  static constexpr int kSteps = 32;
  FurrBall& ball_;
  const size_t whole_;
  std::vector<int> last_;
  std::map<int, int> writes_of_;
  std::string got_;
  int round_ = 0;
  int hits_ = 0;
};

uint64_t Sum(const FurrBall& ball, uint64_t NodeStatsSnapshot::*field) {
  uint64_t n = 0;
  for (const NodeStatsSnapshot& s : ball.Stats()) n += s.*field;
  return n;
}

// The reclaimer walks pages of the largest whole entries under the longest
// keys (hashing each key) and moves them: keys that fill most of the
// budget, then every other one overwritten, leave every page half dead, so
// that room for more writes comes from draining pages; the moved entries
// must come through intact.
TEST(FurrBallLimitsTest, TheReclaimerRelocatesEntriesOfTheLongestKeys) {
  std::unique_ptr<FurrBall> ball = MustOpen(LongKeyPages(16, kChurnPage));
  ASSERT_NE(ball, nullptr);
  ASSERT_EQ(ball->memory_plan().page_size, kChurnPage);
  const uint64_t budget = ball->memory_plan().value_bytes();
  const int keys =
      static_cast<int>(budget * 3 / 4 / LargestWholeValue(kChurnPage));
  Churner churn(*ball, keys);
  for (int k = 0; k < keys; ++k) churn.Write(k);
  for (uint64_t written = 0, i = 0; written < 2 * budget; ++i) {
    written += churn.Write(static_cast<int>(2 * i % keys));
  }
  churn.CheckAll();
  EXPECT_GT(Sum(*ball, &NodeStatsSnapshot::relocations), 0u);
}

// ... and evicts them: keys worth twice the budget.
TEST(FurrBallLimitsTest, TheReclaimerEvictsEntriesOfTheLongestKeys) {
  std::unique_ptr<FurrBall> ball = MustOpen(LongKeyPages(12, kChurnPage));
  ASSERT_NE(ball, nullptr);
  ASSERT_EQ(ball->memory_plan().page_size, kChurnPage);
  const uint64_t budget = ball->memory_plan().value_bytes();
  const int keys =
      static_cast<int>(2 * budget / LargestWholeValue(kChurnPage));
  Churner churn(*ball, keys);
  for (uint64_t written = 0, i = 0; written < 2 * budget; ++i) {
    written += churn.Write(static_cast<int>(i % keys));
  }
  churn.CheckAll();
  EXPECT_GT(churn.hits(), 0);
  EXPECT_GT(Sum(*ball, &NodeStatsSnapshot::evictions_capacity) +
                Sum(*ball, &NodeStatsSnapshot::evictions_keys) +
                Sum(*ball, &NodeStatsSnapshot::page_evictions),
            0u);
}

}  // namespace
}  // namespace furrball_internal
}  // namespace furrballs
