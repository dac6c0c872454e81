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

namespace furrballs {
namespace {

namespace fs = std::filesystem;

constexpr size_t kValueBytes = 1000;
constexpr int kKeys = 6000;  // about 3x the memory of Options()

std::string Key(int i) { return "life-key" + std::to_string(i); }
std::string Value(int i) {
  std::string v = "v" + std::to_string(i) + ":";
  while (v.size() < kValueBytes) v += char('a' + (v.size() * 5 + i) % 26);
  return v;
}

struct Totals {
  uint64_t indexed = 0;
  uint64_t pages_written = 0;
  uint64_t pages_empty = 0;
  uint64_t ttl_expirations = 0;
  uint64_t disk_bytes = 0;
};

Totals Total(const FurrBall& ball) {
  Totals t;
  for (const NodeStatsSnapshot& s : ball.Stats()) {
    t.indexed += s.spill_keys_indexed;
    t.pages_written += s.spill_pages_written;
    t.pages_empty += s.pages_empty;
    t.ttl_expirations += s.ttl_expirations;
    t.disk_bytes += s.spill_disk_bytes;
  }
  return t;
}

class SpillLifecycleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
  }

  FurrBallOptions Options() {
    FurrBallOptions o;
    o.node_count = 2;
    o.simulate_topology = true;
    o.memory_budget_bytes = 2 << 20;  // 16 pages of 64 KiB per node
    o.page_size_bytes = 64 << 10;
    o.max_value_bytes = 16 << 10;
    o.maintenance_interval = std::chrono::milliseconds(1);
    o.clock = &clock_;
    o.spill_dir = dir_.string();
    return o;
  }

  // Writes every key, letting the workers keep free pages (they spill).
  void WriteAll(FurrBall& ball, uint64_t ttl_ms) {
    WriteOptions w;
    w.ttl_ms = ttl_ms;
    for (int i = 0; i < kKeys; ++i) {
      ASSERT_EQ(ball.Set(Key(i), Value(i), w).error, Error::kOk) << i;
      if (i % 16 == 15) {
        WaitFor("the workers never freed pages",
                [&] { return Total(ball).pages_empty >= 4; });
      }
    }
  }

  template <typename Pred>
  static void WaitFor(const char* what, Pred done) {
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!done()) {
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << what;
      std::this_thread::yield();
    }
  }

  ManualClock clock_;
  fs::path dir_;
};

TEST_F(SpillLifecycleTest, KeysOfPagesRemovedForTheDiskBudgetLeaveTheIndex) {
  FurrBallOptions o = Options();
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
          [&] { return Total(ball).indexed <= bound; });
  const Totals t = Total(ball);
  std::printf("pages written %llu, disk bytes %llu, keys indexed %llu (bound %llu)\n",
              (unsigned long long)t.pages_written, (unsigned long long)t.disk_bytes,
              (unsigned long long)t.indexed, (unsigned long long)bound);
  EXPECT_GT(t.pages_written, 20u) << "the test must push pages past the budget";
  EXPECT_LE(t.disk_bytes, o.spill_disk_budget_bytes);
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
  absl::StatusOr<std::unique_ptr<FurrBall>> opened = FurrBall::Open(Options());
  ASSERT_TRUE(opened.ok()) << opened.status();
  FurrBall& ball = **opened;
  WriteAll(ball, /*ttl_ms=*/60'000);
  const Totals spilled = Total(ball);
  ASSERT_GT(spilled.indexed, 1000u) << "the test must spill keys with a TTL";
  clock_.AdvanceMs(120'000);
  WaitFor("expired spilled keys stayed in the index",
          [&] { return Total(ball).indexed == 0; });
  const Totals t = Total(ball);
  std::printf("indexed %llu -> %llu; ttl expirations %llu -> %llu\n",
              (unsigned long long)spilled.indexed, (unsigned long long)t.indexed,
              (unsigned long long)spilled.ttl_expirations,
              (unsigned long long)t.ttl_expirations);
  EXPECT_GE(t.ttl_expirations - spilled.ttl_expirations, spilled.indexed);
  std::string v;
  for (int i = 0; i < kKeys; i += 7) {
    ASSERT_FALSE(ball.Get(Key(i), &v).found) << "expired key " << i << " served";
  }
}

}  // namespace
}  // namespace furrballs
