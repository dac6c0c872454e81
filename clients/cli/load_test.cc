// Tests of the load generator's arithmetic and of a run against an endpoint
// that refuses connections (every operation fails, and is counted as such).
#include "clients/cli/load.h"

#include <vector>

#include <gtest/gtest.h>

namespace furrballs::cli {
namespace {

TEST(PercentileTest, NearestRank) {
  std::vector<uint64_t> v;
  for (uint64_t i = 1; i <= 100; ++i) v.push_back(i);
  EXPECT_EQ(Percentile(v, 0.50), 50u);
  EXPECT_EQ(Percentile(v, 0.99), 99u);
  EXPECT_EQ(Percentile(v, 1.0), 100u);
  EXPECT_EQ(Percentile(v, 0.001), 1u);
  EXPECT_EQ(Percentile({}, 0.5), 0u);
  EXPECT_EQ(Percentile({7}, 0.99), 7u);
}

TEST(LoadTest, EveryOperationRunsOnceAndFailuresAreCounted) {
  // Port 1 on loopback: nothing listens, so every call fails with
  // UNAVAILABLE (at once: connection refused, or the endpoint's down mark).
  auto cluster = client::ClusterClient::FromEndpoints({"127.0.0.1:1"});
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  LoadOptions o;
  o.ops = 200;
  o.concurrency = 3;
  o.keys = 10;
  o.get_ratio = 0.5;
  o.call.timeout = std::chrono::milliseconds(2000);
  LoadReport r = RunLoad(**cluster, o, nullptr);
  EXPECT_EQ(r.ops, 200u);
  EXPECT_EQ(r.gets + r.sets, 200u);
  EXPECT_GT(r.gets, 0u);
  EXPECT_GT(r.sets, 0u);
  EXPECT_EQ(r.errors, 200u);
  EXPECT_EQ(r.errors_by_code[absl::StatusCode::kUnavailable], 200u);
  EXPECT_FALSE(r.first_error.empty());
  EXPECT_GE(r.max_us, r.p99_us);
  EXPECT_GE(r.p99_us, r.p50_us);
  const std::string text = FormatReport(r);
  EXPECT_NE(text.find("ops/s"), std::string::npos);
  EXPECT_NE(text.find("UNAVAILABLE: 200"), std::string::npos);
}

}  // namespace
}  // namespace furrballs::cli
