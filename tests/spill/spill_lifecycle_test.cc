// The spill index does not outlive what it indexes (issue 7, §2.9.7): keys
// whose pages the disk budget removed, and spilled keys whose TTL ran out,
// leave the index without anybody asking for them, through the node
// worker's sweep (engine/furrball/spill_index.h). Without the sweep both
// would stay indexed until a Get or a write met them, so a cache whose keys
// churn would grow its index without bound.
//
// The workers work asynchronously; the tests poll the statistics (yield,
// never sleep) with a generous bound.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "engine/furrball/clock.h"
#include "engine/furrball/furrball.h"
#include "tests/spill/spill_test_util.h"

namespace furrballs {
namespace {

namespace fs = std::filesystem;
using spill_testing::SmallSpillCache;
using spill_testing::SpillTotals;
using spill_testing::WaitFor;

constexpr size_t kValueBytes = 1000;
constexpr int kKeys = 6000;  // about 3x the memory of SmallSpillCache

std::string Key(int i) { return "life-key" + std::to_string(i); }
std::string Value(int i) {
  std::string v = "v" + std::to_string(i) + ":";
  while (v.size() < kValueBytes) v += char('a' + (v.size() * 5 + i) % 26);
  return v;
}

class SpillLifecycleTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = spill_testing::FreshTestDir(); }

  // Writes every key, letting the workers keep free pages (they spill).
  void WriteAll(FurrBall& ball, uint64_t ttl_ms) {
    WriteOptions w;
    w.ttl_ms = ttl_ms;
    for (int i = 0; i < kKeys; ++i) {
      ASSERT_EQ(ball.Set(Key(i), Value(i), w).error, Error::kOk) << i;
      if (i % 16 == 15) {
        WaitFor("the workers never freed pages",
                [&] { return SpillTotals(ball).pages_empty >= 4; });
      }
    }
  }

  ManualClock clock_;
  fs::path dir_;
};

TEST_F(SpillLifecycleTest, KeysOfPagesRemovedForTheDiskBudgetLeaveTheIndex) {
  FurrBallOptions o = SmallSpillCache(dir_, &clock_);
  o.spill_disk_budget_bytes = 256 << 10;  // about 250 values on disk
  absl::StatusOr<std::unique_ptr<FurrBall>> opened = FurrBall::Open(o);
  ASSERT_TRUE(opened.ok()) << opened.status();
  FurrBall& ball = **opened;
  WriteAll(ball, /*ttl_ms=*/0);
  // What the disk can hold, plus a victim batch per node still in memory
  // and a page's worth of slack per node for removals not yet swept.
  const uint64_t bound =
      o.spill_disk_budget_bytes / kValueBytes + 2 * 3 * (o.page_size_bytes / kValueBytes);
  WaitFor("keys of removed pages stayed in the index",
          [&] { return SpillTotals(ball).spill_keys_indexed <= bound; });
  const NodeStatsSnapshot t = SpillTotals(ball);
  std::printf("pages written %llu, disk bytes %llu, keys indexed %llu (bound %llu)\n",
              (unsigned long long)t.spill_pages_written, (unsigned long long)t.spill_disk_bytes,
              (unsigned long long)t.spill_keys_indexed, (unsigned long long)bound);
  EXPECT_GT(t.spill_pages_written, 20u) << "the test must push pages past the budget";
  EXPECT_LE(t.spill_disk_bytes, o.spill_disk_budget_bytes);
  // Whatever is still there is right.
  std::string v;
  int found = 0;
  for (int i = 0; i < kKeys; ++i) {
    if (!ball.Get(Key(i), &v).found) continue;
    ++found;
    ASSERT_EQ(v, Value(i)) << i;
  }
  EXPECT_GT(found, 0);
}

TEST_F(SpillLifecycleTest, ExpiredSpilledKeysLeaveTheIndexUnasked) {
  absl::StatusOr<std::unique_ptr<FurrBall>> opened = FurrBall::Open(SmallSpillCache(dir_, &clock_));
  ASSERT_TRUE(opened.ok()) << opened.status();
  FurrBall& ball = **opened;
  WriteAll(ball, /*ttl_ms=*/60'000);
  const NodeStatsSnapshot spilled = SpillTotals(ball);
  ASSERT_GT(spilled.spill_keys_indexed, 1000u) << "the test must spill keys with a TTL";
  clock_.AdvanceMs(120'000);
  WaitFor("expired spilled keys stayed in the index",
          [&] { return SpillTotals(ball).spill_keys_indexed == 0; });
  const NodeStatsSnapshot t = SpillTotals(ball);
  std::printf("indexed %llu -> %llu; ttl expirations %llu -> %llu\n",
              (unsigned long long)spilled.spill_keys_indexed, (unsigned long long)t.spill_keys_indexed,
              (unsigned long long)spilled.ttl_expirations,
              (unsigned long long)t.ttl_expirations);
  EXPECT_GE(t.ttl_expirations - spilled.ttl_expirations, spilled.spill_keys_indexed);
  std::string v;
  for (int i = 0; i < kKeys; i += 7) {
    ASSERT_FALSE(ball.Get(Key(i), &v).found) << "expired key " << i << " served";
  }
}

// A key table full long before the pages: ARC's own evictions (a writer's
// insert evicts) go to the spill tier too, and their keys come back.
TEST_F(SpillLifecycleTest, KeysEvictedForAFullKeyTableAreSpilledNotDropped) {
  FurrBallOptions o = SmallSpillCache(dir_, &clock_);
  o.max_keys_per_node = 200;  // 400 keys in memory; the pages hold 2,000
  absl::StatusOr<std::unique_ptr<FurrBall>> opened = FurrBall::Open(o);
  ASSERT_TRUE(opened.ok()) << opened.status();
  FurrBall& ball = **opened;
  constexpr int kMany = 1500;
  for (int i = 0; i < kMany; ++i) {
    ASSERT_EQ(ball.Set(Key(i), Value(i)).error, Error::kOk) << i;
  }
  WaitFor("the batches were never written", [&] {
    return SpillTotals(ball).spill_keys_indexed >= kMany - 400 - 2 * 64;
  });
  uint64_t dropped = 0;
  for (const NodeStatsSnapshot& s : ball.Stats()) dropped += s.evictions_keys;
  std::string v;
  int found = 0;
  for (int i = 0; i < kMany; ++i) {
    if (!ball.Get(Key(i), &v).found) continue;
    ASSERT_EQ(v, Value(i)) << i;
    ++found;
  }
  const NodeStatsSnapshot t = SpillTotals(ball);
  std::printf("keys %d, found %d, dropped for the key table %llu, indexed %llu, "
              "pages written %llu\n",
              kMany, found, (unsigned long long)dropped,
              (unsigned long long)t.spill_keys_indexed,
              (unsigned long long)t.spill_pages_written);
  // Memory holds 400 keys; most of the rest must come back from disk (a
  // writer drops a victim only when the batch is busy or two pages long).
  EXPECT_GT(found, kMany * 9 / 10);
}

}  // namespace
}  // namespace furrballs
