// bench/engine/ycsb_runner_test.cc: a tiny cell end to end against peers, and
// the result line and median plumbing the driver relies on.
#include "bench/engine/ycsb_runner.h"

#include <gtest/gtest.h>

#include "bench/engine/furrball_backend.h"
#include "bench/engine/peer_backends.h"
#include "bench/engine/ycsb_report.h"

namespace furrballs::bench {
namespace {

CellSpec TinySpec(char workload, double working_set) {
  CellSpec spec;
  spec.workload = *ParseWorkload(std::string(1, workload));
  spec.value_bytes = 64;
  spec.threads = 2;
  spec.working_set_factor = working_set;
  // Small enough to evict at 3x the working set; the page size follows the
  // budget (memory_plan.h: 64 KiB pages here).
  spec.memory_budget_bytes = size_t{12} << 20;
  spec.ops_per_thread = 20000;
  return spec;
}

TEST(RunCellTest, UnboundedMapAlwaysHitsAndReturnsTheRightValues) {
  for (char w : {'A', 'C', 'F'}) {
    const CellSpec spec = TinySpec(w, 3.0);
    absl::StatusOr<CellResult> r = RunCell(spec, &MakeAbslMutexBackend);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->records, spec.RecordCount());
    EXPECT_EQ(r->ops, 40000u);
    EXPECT_EQ(r->read_hits, r->reads) << w;
    EXPECT_EQ(r->bad_values, 0u) << w;
    EXPECT_EQ(r->refused_sets, 0u) << w;
    EXPECT_EQ(r->live_value_bytes, r->records * 64) << w;
    if (w == 'C') {
      EXPECT_EQ(r->sets, 0u);
    }
    EXPECT_GT(r->ops_per_second, 0);
  }
}

TEST(RunCellTest, BoundedCacheMissesAtThreeTimesTheBudgetAndReadsThrough) {
  for (BackendFactory factory : {&MakeRocksDbLruBackend, &MakeRocksDbHyperClockBackend}) {
    const CellSpec spec = TinySpec('C', 3.0);
    absl::StatusOr<CellResult> r = RunCell(spec, factory);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_LT(r->read_hits, r->reads);
    EXPECT_GT(r->read_hits, 0u);
    // Read-only workload: every set is the read-through fill of a miss.
    EXPECT_EQ(r->sets, r->reads - r->read_hits);
    EXPECT_EQ(r->bad_values, 0u);
    EXPECT_LE(r->live_value_bytes, spec.memory_budget_bytes);
  }
}

TEST(RunCellTest, HyperClockUpdatesAreVisible) {
  // F writes back what it read; a stale value would still carry the right
  // key number, so this checks that updates through Erase + Insert do not
  // lose entries or corrupt values.
  const CellSpec spec = TinySpec('F', 0.5);
  absl::StatusOr<CellResult> r = RunCell(spec, &MakeRocksDbHyperClockBackend);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->bad_values, 0u);
  EXPECT_GT(r->HitRatio(), 0.95);
}

// The harness's contract with the FurrBall backend: values come back intact
// and live bytes stay within the budget. Hit ratios and refused writes are
// the engine's business and go to the report, not here.
TEST(RunCellTest, FurrBallServesEveryWorkloadWithCorrectValues) {
  for (char w : {'A', 'B', 'C', 'F'}) {
    for (double working_set : {0.5, 3.0}) {
      CellSpec spec = TinySpec(w, working_set);
      spec.value_bytes = 1024;  // fewer records: a fast test
      absl::StatusOr<CellResult> r = RunCell(spec, &MakeFurrBallBackend);
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_EQ(r->bad_values, 0u) << w << " " << working_set;
      EXPECT_GT(r->read_hits, 0u) << w << " " << working_set;
      EXPECT_LE(r->live_value_bytes, spec.memory_budget_bytes);
      EXPECT_FALSE(r->note.empty());
    }
  }
}

TEST(CellResultTest, SerializeParseRoundTrip) {
  CellResult r;
  r.records = 12;
  r.ops_per_second = 1234567.5;
  r.get_p99_ns = 4100;
  r.rss_growth_bytes = -4096;
  r.bad_values = 3;
  absl::StatusOr<CellResult> back = CellResult::Parse(r.Serialize());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->records, 12u);
  EXPECT_DOUBLE_EQ(back->ops_per_second, 1234567.5);
  EXPECT_EQ(back->get_p99_ns, 4100u);
  EXPECT_EQ(back->rss_growth_bytes, -4096);
  EXPECT_EQ(back->bad_values, 3u);
  EXPECT_FALSE(CellResult::Parse("records=1").ok());
}

TEST(MedianResultTest, PerFieldMedians) {
  std::vector<CellResult> rs(3);
  rs[0].ops_per_second = 3;
  rs[1].ops_per_second = 1;
  rs[2].ops_per_second = 2;
  rs[0].get_p50_ns = 70;
  rs[1].get_p50_ns = 90;
  rs[2].get_p50_ns = 80;
  const CellResult m = MedianResult(rs);
  EXPECT_DOUBLE_EQ(m.ops_per_second, 2);
  EXPECT_EQ(m.get_p50_ns, 80u);
  rs.pop_back();
  EXPECT_DOUBLE_EQ(MedianResult(rs).ops_per_second, 2);  // mean of 1 and 3
}

}  // namespace
}  // namespace furrballs::bench
