// Tests of the topology ablation's cells: the threads really are their
// nodes' threads (the engine counts their hits as local or remote as the
// placement says), the cross-node share reaches the engine, and the counts
// of every landed row add up. No timing is checked.
#include "bench/topology/ablation.h"

#include <gtest/gtest.h>

namespace furrballs::bench {
namespace {

AblationCellSpec Tiny(std::string_view row, int nodes, KeyChoice keys) {
  AblationCellSpec spec;
  spec.config = FindAblationConfig(row);
  spec.nodes = nodes;
  spec.keys = keys;
  spec.keys_per_thread = 200;
  spec.ops_per_thread = 2000;
  spec.warmup_ops_per_thread = 0;
  spec.remote_delay_ns = 70;
  return spec;
}

AblationResult MustRun(const AblationCellSpec& spec) {
  absl::StatusOr<AblationResult> r = RunAblationCell(spec);
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return {};
  EXPECT_TRUE(r->CheckCounts().ok()) << r->CheckCounts();
  EXPECT_EQ(r->misses, 0u) << "every key was loaded and nothing evicted";
  EXPECT_GT(r->gets, 0u);
  return *r;
}

TEST(AblationTest, ThreadLocalPlacementReadsOnlyLocalKeys) {
  AblationCellSpec spec = Tiny("thread_local", 2, KeyChoice::kPlacement);
  spec.cross_share = 0;
  const AblationResult r = MustRun(spec);
  EXPECT_EQ(r.hits_remote, 0u);
  EXPECT_EQ(r.LocalHitShare(), 1.0);
}

TEST(AblationTest, TheCrossShareReachesTheEngine) {
  AblationCellSpec spec = Tiny("thread_local", 4, KeyChoice::kPlacement);
  spec.cross_share = 1;
  const AblationResult r = MustRun(spec);
  EXPECT_EQ(r.hits_local, 0u) << "every read was of another node's key";
}

TEST(AblationTest, RoundRobinSpreadsAThreadsKeys) {
  AblationCellSpec spec = Tiny("round_robin", 2, KeyChoice::kPlacement);
  spec.cross_share = 0;
  const AblationResult r = MustRun(spec);
  // A thread's keys alternate between the two nodes, so about half of its
  // reads are local (the plan is seeded, so this is not a flaky bound).
  EXPECT_GT(r.LocalHitShare(), 0.35);
  EXPECT_LT(r.LocalHitShare(), 0.65);
}

TEST(AblationTest, MigrationMovesRoundRobinKeysToTheirReaders) {
  AblationCellSpec spec = Tiny("round_robin_migrate", 2, KeyChoice::kPlacement);
  spec.cross_share = 0;
  // ~200 reads of each key in the warm-up, one in 16 sampled: a key on the
  // other node collects the 8 remote samples that move it.
  spec.warmup_ops_per_thread = 40000;
  const AblationResult r = MustRun(spec);
  EXPECT_GT(r.migrations_warmup, 100u) << "about half of 400 keys were remote";
  // Without migration round-robin serves about half of these reads locally
  // (RoundRobinSpreadsAThreadsKeys).
  EXPECT_GT(r.LocalHitShare(), 0.8);
}

TEST(AblationTest, EveryLandedRowAddsUp) {
  for (const AblationConfig& row : AblationConfigs()) {
    if (row.apply == nullptr) continue;
    for (int nodes : {2, 4}) {
      for (KeyChoice keys : {KeyChoice::kPlacement, KeyChoice::kUniform}) {
        SCOPED_TRACE(testing::Message() << row.name << " " << nodes);
        const AblationResult r = MustRun(Tiny(row.name, nodes, keys));
        EXPECT_EQ(r.gets + r.sets, 2000u * nodes);
      }
    }
  }
}

TEST(AblationTest, ARowNotLandedIsRefusedNotRunAsAnother) {
  for (const AblationConfig& row : AblationConfigs()) {
    if (row.apply != nullptr) continue;
    EXPECT_FALSE(row.needs.empty()) << row.name;
    AblationCellSpec spec = Tiny(row.name, 2, KeyChoice::kUniform);
    EXPECT_FALSE(RunAblationCell(spec).ok()) << row.name;
  }
}

}  // namespace
}  // namespace furrballs::bench
