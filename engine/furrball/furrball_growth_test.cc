// The key table grows, paid with pages (docs/engine.md, "The key table
// grows, paid with pages"): a cache planned for 1 KiB entries and filled
// with 64-byte values grows its nodes' key tables while their pages have
// room, ends holding more keys than it started with, and stays within its
// budget at every step of every growth (the engine's own accounting, at a
// test hook the worker calls after each step, and the RSS). Sets and Gets
// run concurrently with the growth and read only whole, own values.
//
// Nothing sleeps: the loops end on the engine's counters, with a bound on
// the operations they may take.
#include <atomic>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "engine/furrball/entry.h"
#include "engine/furrball/furrball.h"
#include "engine/furrball/furrball_testing.h"
#include "engine/common/proc_status_testing.h"

namespace furrballs {
namespace {

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;  // RSS means nothing with shadow memory
#else
constexpr bool kSanitized = false;
#endif

constexpr uint64_t kBudget = uint64_t{8} << 20;
constexpr size_t kValueBytes = 64;

std::string Key(uint64_t i) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "user%020" PRIu64, i);
  return buf;
}

// A 64-byte value that names its key.
std::string Value(uint64_t i) {
  std::string v(kValueBytes, static_cast<char>('a' + i % 26));
  std::memcpy(v.data(), &i, sizeof(i));
  return v;
}

bool IsValueOf(const std::string& v, uint64_t i) { return v == Value(i); }

// What the hook sees at each growth step.
struct Watch {
  const FurrBall* ball = nullptr;
  uint64_t rss_before = 0;
  // The key table's capacity after the last finished growth, and the
  // growths finished: a capacity beyond it is a growth in flight.
  uint64_t settled_capacity = 0;
  uint64_t growths = 0;
  std::atomic<uint64_t> steps{0};
  std::atomic<uint64_t> over_budget{0};  // steps whose accounting exceeded
  std::atomic<uint64_t> worst_bytes{0};  // held at worst
  std::atomic<uint64_t> worst_rss{0};
};
Watch* g_watch = nullptr;

void RaiseTo(std::atomic<uint64_t>& max, uint64_t v) {
  uint64_t seen = max.load();
  while (v > seen && !max.compare_exchange_weak(seen, v)) {
  }
}

// The budget holds if what the cache holds fits: MetadataBytes (everything
// mapped but the page blocks and what was given back: retired tables, and
// the old table's pages behind a growth's cursors) plus the page bytes in
// service. During a growth the new table is mapped whole but enters memory
// as keys land in it while the old one is given back, and the plan
// (KeyTableGrowthPeakBytes) counts the new one whole and the old one at a
// quarter: three quarters of the old one are mapped but not held. The hook
// runs after each retire, Grow and give-back and after every migration
// pass; one node, so the statistics are that node's.
void OnKeyTableStep(int /*node*/) {
  Watch& w = *g_watch;
  uint64_t held = w.ball->MetadataBytes();
  const NodeStatsSnapshot s = w.ball->Stats()[0];
  held += s.memory_limit_bytes;
  if (s.key_table_growths != w.growths) {
    w.growths = s.key_table_growths;
    w.settled_capacity = s.key_table_capacity;
  } else if (s.key_table_capacity != w.settled_capacity) {
    held -= KeyTableBytes(w.settled_capacity) * 3 / 4;
  }
  w.steps.fetch_add(1);
  if (held > kBudget) w.over_budget.fetch_add(1);
  RaiseTo(w.worst_bytes, held);
  RaiseTo(w.worst_rss, VmRssBytes());
}

FurrBallOptions SmallStart(int nodes) {
  FurrBallOptions o;
  o.memory_budget_bytes = kBudget;
  o.node_count = nodes;
  o.simulate_topology = true;
  o.expected_entry_bytes = 1024 + 24;  // planned for 1 KiB values
  o.maintenance_interval = std::chrono::milliseconds(1);
  return o;
}

NodeStatsSnapshot Sum(const FurrBall& ball) {
  NodeStatsSnapshot t;
  for (const NodeStatsSnapshot& s : ball.Stats()) {
    t.live_keys += s.live_keys;
    t.key_table_capacity += s.key_table_capacity;
    t.key_table_growths += s.key_table_growths;
    t.pages_retired += s.pages_retired;
    t.evictions_keys += s.evictions_keys;
  }
  return t;
}

TEST(FurrBallGrowthTest, SmallValuesGrowTheKeyTableWithinTheBudget) {
  Watch watch;
  g_watch = &watch;
  EngineTestHooks hooks;
  hooks.key_table_step = &OnKeyTableStep;
  watch.rss_before = VmRssBytes();
  absl::StatusOr<std::unique_ptr<FurrBall>> opened =
      FurrBall::Open(SmallStart(1));
  ASSERT_TRUE(opened.ok()) << opened.status();
  FurrBall& ball = **opened;
  watch.ball = &ball;
  watch.settled_capacity = ball.memory_plan().max_keys;
  SetEngineTestHooksForTesting(&hooks);
  const MemoryPlan& plan = ball.memory_plan();
  SCOPED_TRACE(plan.Summary());
  ASSERT_GT(plan.key_ceiling, 4 * plan.max_keys);

  // Insert distinct keys until the table has grown twice and the keys
  // held passed the starting count, or a bound of many budgets' worth.
  const uint64_t bound = 40 * plan.max_keys;
  uint64_t n = 0;
  while (n < bound) {
    for (int i = 0; i < 1000; ++i, ++n) {
      ASSERT_EQ(ball.Set(Key(n), Value(n)).error, Error::kOk) << n;
    }
    const NodeStatsSnapshot s = Sum(ball);
    if (s.key_table_growths >= 2 && s.live_keys > 2 * plan.max_keys) break;
  }
  SetEngineTestHooksForTesting(nullptr);
  const NodeStatsSnapshot s = Sum(ball);
  std::printf("start %u keys, ceiling %u; after %" PRIu64
              " Sets: capacity %" PRIu64 ", %" PRIu64 " growths, %" PRIu64
              " keys held, %" PRIu64 " pages retired; %" PRIu64
              " steps, worst %.2f MiB of %.0f, RSS +%.2f MiB\n",
              plan.max_keys, plan.key_ceiling, n, s.key_table_capacity,
              s.key_table_growths, s.live_keys, s.pages_retired,
              watch.steps.load(), watch.worst_bytes.load() / 1048576.0,
              kBudget / 1048576.0,
              (watch.worst_rss.load() - watch.rss_before) / 1048576.0);
  EXPECT_GE(s.key_table_growths, 2u);
  EXPECT_GT(s.key_table_capacity, 2 * uint64_t{plan.max_keys});
  EXPECT_GT(s.live_keys, 2 * uint64_t{plan.max_keys})
      << "more keys held than the table started with";
  EXPECT_GT(watch.steps.load(), 0u);
  EXPECT_EQ(watch.over_budget.load(), 0u)
      << "worst " << watch.worst_bytes.load() << " of " << kBudget;
  // The newest keys read back as their own values.
  std::string v;
  uint64_t hits = 0;
  for (uint64_t i = n - std::min<uint64_t>(n, 2000); i < n; ++i) {
    if (ball.Get(Key(i), &v).found) {
      ++hits;
      ASSERT_TRUE(IsValueOf(v, i)) << i;
    }
  }
  EXPECT_GT(hits, 1000u);
  if (!kSanitized) {
    // 4 MiB for the test's own pages and threads, as the oversubscription
    // test's slack, scaled to the budget.
    EXPECT_LE(watch.worst_rss.load() - watch.rss_before,
              kBudget + (uint64_t{4} << 20));
  }
}

// Small entries end at the split of the share between key table and pages
// that holds the most keys (issue 13, goal 3): a 64 MiB node planned for
// 1 KiB entries, filled with 24-byte keys and 64-byte values until the
// resident count stops growing, holds at least 86% of the keys the best
// split holds at all: the largest k whose key table, k entries, the fixed
// structures and the two pages the worker keeps free fit the share. The
// rest is what whole 2 MiB pages, the open pages and dead bytes cost. The
// table stopped at 230,400 keys (83%) while a growth's peak had to be paid
// with free pages only: 5 of its 20 pages were free, 2 of them kept,
// short of the 5 a sixteenth more keys needed.
TEST(FurrBallGrowthTest, SmallEntriesEndAtTheSplitThatHoldsTheMostKeys) {
  FurrBallOptions o;
  o.memory_budget_bytes = uint64_t{64} << 20;
  o.node_count = 1;
  o.simulate_topology = true;
  o.expected_entry_bytes = 1024 + 24;
  absl::StatusOr<std::unique_ptr<FurrBall>> opened = FurrBall::Open(o);
  ASSERT_TRUE(opened.ok()) << opened.status();
  FurrBall& ball = **opened;
  const MemoryPlan& plan = ball.memory_plan();
  SCOPED_TRACE(plan.Summary());
  constexpr size_t kKeyBytes = 24;
  ASSERT_EQ(Key(0).size(), kKeyBytes);
  const uint64_t entry = furrball_internal::EntryFootprint(
      furrball_internal::PayloadSize(kKeyBytes, kValueBytes));
  const uint64_t room = plan.node_budget_bytes - plan.fixed_bytes -
                        2 * uint64_t{plan.page_size};
  uint64_t best = 0;
  for (uint64_t step = uint64_t{1} << 24; step > 0; step /= 2) {
    if (KeyTableBytes(best + step) + (best + step) * entry <= room) {
      best += step;
    }
  }
  // Budget-sized batches until one adds less than 0.5% (the fill test's
  // rule, bench/memory/fill_rule.h), at most 8.
  const uint64_t batch = o.memory_budget_bytes / (kKeyBytes + kValueBytes);
  uint64_t n = 0, held = 0;
  for (int b = 0; b < 8; ++b) {
    for (uint64_t i = 0; i < batch; ++i, ++n) {
      ASSERT_EQ(ball.Set(Key(n), Value(n)).error, Error::kOk) << n;
    }
    const uint64_t now = Sum(ball).live_keys;
    if (now < held + held / 200) break;
    held = now;
  }
  const NodeStatsSnapshot s = Sum(ball);
  std::printf("best split %" PRIu64 " keys of %" PRIu64
              " B; after %" PRIu64 " Sets: %" PRIu64 " keys held (%.1f%%), "
              "table %" PRIu64 " after %" PRIu64 " growths, %" PRIu64
              " pages retired\n",
              best, entry, n, s.live_keys, 100.0 * s.live_keys / best,
              s.key_table_capacity, s.key_table_growths, s.pages_retired);
  EXPECT_GE(s.live_keys * 100, best * 86);
  EXPECT_LE(s.live_keys, best);
}

// Growth under concurrent writers and readers of self-checking values, on
// two nodes: no read returns another key's value or a torn one, and the
// tables grow meanwhile.
TEST(FurrBallGrowthTest, GrowthUnderConcurrentSetsAndGets) {
  absl::StatusOr<std::unique_ptr<FurrBall>> opened =
      FurrBall::Open(SmallStart(2));
  ASSERT_TRUE(opened.ok()) << opened.status();
  FurrBall& ball = **opened;
  const MemoryPlan& plan = ball.memory_plan();
  constexpr int kThreads = 4;
  // Until the tables have grown twice (a condition on the engine's
  // counters, looked at every 1024 operations), within a bound.
  const uint64_t max_ops = 100 * uint64_t{plan.max_keys};
  std::atomic<uint64_t> wrong{0}, hits{0}, next{0};
  std::atomic<bool> grown{false};
  auto worker = [&](int t) {
    std::mt19937_64 rng(t + 7);
    std::string v;
    for (uint64_t op = 0; op < max_ops / kThreads && !grown.load(); ++op) {
      if (t == 0 && op % 1024 == 0 && Sum(ball).key_table_growths >= 2) {
        grown.store(true);
      }
      if (t % 2 == 0 || op % 4 == 0) {
        const uint64_t k = next.fetch_add(1, std::memory_order_relaxed);
        if (ball.Set(Key(k), Value(k)).error != Error::kOk) wrong.fetch_add(1);
      } else {
        const uint64_t written = next.load(std::memory_order_relaxed);
        if (written == 0) continue;
        // Mostly recent keys, which the table still holds.
        const uint64_t back = rng() % std::min<uint64_t>(written, 4096);
        const uint64_t k = written - 1 - back;
        if (ball.Get(Key(k), &v).found) {
          hits.fetch_add(1, std::memory_order_relaxed);
          if (!IsValueOf(v, k)) wrong.fetch_add(1);
        }
      }
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(worker, t);
  for (std::thread& th : threads) th.join();
  const NodeStatsSnapshot s = Sum(ball);
  EXPECT_EQ(wrong.load(), 0u);
  EXPECT_TRUE(grown.load()) << s.key_table_growths << " growths";
  // The readers may have had little of the CPU; the grown tables hold the
  // newest keys, each its own value.
  std::string v;
  const uint64_t written = next.load();
  for (uint64_t k = written - std::min<uint64_t>(written, 1000); k < written;
       ++k) {
    if (ball.Get(Key(k), &v).found) {
      hits.fetch_add(1);
      ASSERT_TRUE(IsValueOf(v, k)) << k;
    }
  }
  EXPECT_GT(hits.load(), 500u);
  EXPECT_GT(s.key_table_capacity, 2 * uint64_t{plan.max_keys});
}

}  // namespace
}  // namespace furrballs
