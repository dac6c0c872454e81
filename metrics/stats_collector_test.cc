// StatsCollector: the families it builds from fixed snapshots (per-node
// series for every node, the extra labels, derived values), the request
// histogram's shape, and the naming conventions every family follows.
#include "metrics/stats_collector.h"

#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "metrics/build_info.h"

namespace furrballs::metrics {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

std::vector<NodeStatsSnapshot> FourNodes() {
  std::vector<NodeStatsSnapshot> nodes(4);
  for (int n = 0; n < 4; ++n) {
    NodeStatsSnapshot& s = nodes[n];
    s.node = n;
    s.hits_local = 100 + n;
    s.hits_remote = 10 + n;
    s.migrations_in = 3 + n;
    s.migrations_out = 2;
    s.misses = 20 + n;
    s.sets = 30 + n;
    s.deletes = 3;
    s.touches = 2;
    s.ttl_expirations = 1;
    s.evictions_capacity = 7;
    s.evictions_keys = 1;
    s.live_keys = 50;
    s.live_bytes = 1000;
    s.dead_bytes = 24 + n;
    s.memory_limit_bytes = 64 << 20;
    s.pages_hot = 2;
    s.pages_cold = 1;
    s.pages_empty = 28;
    s.pages_freeze = 0;
    s.pages_staging = 1;
    s.pages_retired = 3;
    s.key_table_capacity = 5000 + n;
    s.key_table_growths = 2;
    s.key_table_shrinks = 1;
    s.staging_used_bytes = 512;
    s.in_place_sets = 4;
    s.staging_sets = 5;
    s.page_evictions = 6;
    s.padding_bytes = 40 + n;
    s.pages_recycled = 9;
    s.location_hits = 60 + n;
    s.location_misses = 11;
    s.location_stale = 2;
    s.races = 13;
    s.race_wins = 12 + n;
    s.race_fallbacks = 1;
  }
  return nodes;
}

std::vector<WorkerCounts> FourWorkers() {
  std::vector<WorkerCounts> workers(4);
  for (int n = 0; n < 4; ++n) {
    workers[n].node = n;
    workers[n].batches = 5 + n;
    workers[n].ops = 50 + n;
    workers[n].merged_writes = n;
    workers[n].deadline_expired = 1;
    workers[n].rejected_queue_full = 2;
    workers[n].queue_depth = 3;
  }
  return workers;
}

constexpr size_t kCodes = 17;
constexpr size_t kOps = 3;
constexpr size_t kBuckets = 5;  // four bounds and +Inf

// Three ops, 17 codes: two Gets of 3 µs and 30 µs with OK, one of 3 ms with
// NOT_FOUND (5), one Set of 2 s with RESOURCE_EXHAUSTED (8), no Stats.
RequestCounts SomeRequests() {
  RequestCounts counts;
  counts.code_names = {"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT",
                       "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS",
                       "PERMISSION_DENIED", "RESOURCE_EXHAUSTED",
                       "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE",
                       "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
                       "UNAUTHENTICATED"};
  counts.latency_bounds_ns = {5'000, 50'000, 5'000'000, 1'000'000'000};
  for (const char* name : {"get", "set", "stats"}) {
    RequestCounts::Op op;
    op.name = name;
    op.by_code.assign(kCodes, 0);
    op.latency_buckets.assign(kBuckets, 0);
    counts.ops.push_back(std::move(op));
  }
  RequestCounts::Op& get = counts.ops[0];
  get.by_code[0] = 2;
  get.by_code[5] = 1;
  get.latency_buckets = {1, 1, 1, 0, 0};
  get.latency_sum_ns = 3'000 + 30'000 + 3'000'000;
  RequestCounts::Op& set = counts.ops[1];
  set.by_code[8] = 1;
  set.latency_buckets = {0, 0, 0, 0, 1};
  set.latency_sum_ns = 2'000'000'000;
  return counts;
}

class StatsCollectorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    StatsSources sources;
    sources.engine = [] { return FourNodes(); };
    sources.dispatch = [] { return FourWorkers(); };
    sources.requests = [] { return SomeRequests(); };
    for (MetricFamily& f : StatsCollector(sources).Collect()) {
      const std::string name = f.name;
      families_.emplace(name, std::move(f));
    }
  }

  const MetricFamily& Family(const std::string& name) {
    auto it = families_.find(name);
    EXPECT_NE(it, families_.end()) << name;
    static const MetricFamily kEmpty;
    return it == families_.end() ? kEmpty : it->second;
  }

  // The sample of `name` whose labels are exactly `labels`.
  const ClientMetric* Sample(const std::string& name,
                             const std::map<std::string, std::string>& labels) {
    for (const ClientMetric& m : Family(name).metric) {
      std::map<std::string, std::string> have;
      for (const auto& l : m.label) have[l.name] = l.value;
      if (have == labels) return &m;
    }
    ADD_FAILURE() << "no sample of " << name << " with those labels";
    return nullptr;
  }

  double Value(const std::string& name,
               const std::map<std::string, std::string>& labels) {
    const ClientMetric* m = Sample(name, labels);
    if (m == nullptr) return NAN;
    return Family(name).type == MetricType::Counter ? m->counter.value
                                                    : m->gauge.value;
  }

  std::map<std::string, MetricFamily> families_;
};

TEST_F(StatsCollectorTest, EngineFamiliesHaveASeriesPerNodeAndLabel) {
  for (int n = 0; n < 4; ++n) {
    const std::string node = std::to_string(n);
    EXPECT_EQ(Value("furrballs_hits_total", {{"node", node}, {"locality", "local"}}),
              100 + n);
    EXPECT_EQ(Value("furrballs_hits_total", {{"node", node}, {"locality", "remote"}}),
              10 + n);
    EXPECT_EQ(Value("furrballs_misses_total", {{"node", node}}), 20 + n);
    EXPECT_EQ(Value("furrballs_migrations_total", {{"node", node}, {"direction", "in"}}),
              3 + n);
    EXPECT_EQ(Value("furrballs_migrations_total", {{"node", node}, {"direction", "out"}}),
              2);
    EXPECT_EQ(Value("furrballs_sets_total", {{"node", node}}), 30 + n);
    EXPECT_EQ(Value("furrballs_evictions_total", {{"node", node}, {"reason", "capacity"}}), 7);
    EXPECT_EQ(Value("furrballs_evictions_total", {{"node", node}, {"reason", "key_table"}}), 1);
    EXPECT_EQ(Value("furrballs_memory_used_bytes", {{"node", node}}), 1024 + n);
    EXPECT_EQ(Value("furrballs_dead_bytes", {{"node", node}}), 24 + n);
    EXPECT_EQ(Value("furrballs_memory_limit_bytes", {{"node", node}}), 64 << 20);
    EXPECT_EQ(Value("furrballs_pages", {{"node", node}, {"tier", "empty"}}), 28);
    EXPECT_EQ(Value("furrballs_pages", {{"node", node}, {"tier", "staging"}}), 1);
    EXPECT_EQ(Value("furrballs_pages", {{"node", node}, {"tier", "retired"}}), 3);
    EXPECT_EQ(Value("furrballs_key_table_capacity", {{"node", node}}), 5000 + n);
    EXPECT_EQ(Value("furrballs_key_table_growths_total", {{"node", node}}), 2);
    EXPECT_EQ(Value("furrballs_key_table_shrinks_total", {{"node", node}}), 1);
    EXPECT_EQ(Value("furrballs_staging_used_bytes", {{"node", node}}), 512);
    EXPECT_EQ(Value("furrballs_in_place_sets_total", {{"node", node}}), 4);
    EXPECT_EQ(Value("furrballs_staging_sets_total", {{"node", node}}), 5);
    EXPECT_EQ(Value("furrballs_page_evictions_total", {{"node", node}}), 6);
    EXPECT_EQ(Value("furrballs_padding_bytes_total", {{"node", node}}), 40 + n);
    EXPECT_EQ(Value("furrballs_pages_recycled_total", {{"node", node}}), 9);
    EXPECT_EQ(Value("furrballs_location_cache_lookups_total",
                    {{"node", node}, {"result", "hit"}}),
              60 + n);
    EXPECT_EQ(Value("furrballs_location_cache_lookups_total",
                    {{"node", node}, {"result", "miss"}}),
              11);
    EXPECT_EQ(Value("furrballs_location_cache_lookups_total",
                    {{"node", node}, {"result", "stale"}}),
              2);
    EXPECT_EQ(Value("furrballs_locate_races_total", {{"node", node}}), 13);
    EXPECT_EQ(Value("furrballs_locate_race_wins_total", {{"node", node}}),
              12 + n);
    EXPECT_EQ(Value("furrballs_locate_race_fallbacks_total", {{"node", node}}),
              1);
  }
  EXPECT_EQ(Family("furrballs_hits_total").metric.size(), 8u);
  EXPECT_EQ(Family("furrballs_pages").metric.size(), 24u);
  EXPECT_EQ(Family("furrballs_keys").type, MetricType::Gauge);
  EXPECT_EQ(Family("furrballs_expirations_total").type, MetricType::Counter);
}

// Dispatch series are labelled with the node's id, like the engine's: a
// process serving only node 1 has one worker, labelled "1" (not "0", its
// position).
TEST(StatsCollectorNodeIdTest, DispatchSeriesAreLabelledWithTheNodeId) {
  StatsSources sources;
  sources.dispatch = [] {
    std::vector<WorkerCounts> workers(1);
    workers[0].node = 1;
    workers[0].ops = 7;
    return workers;
  };
  sources.process = false;
  bool found = false;
  for (const MetricFamily& f : StatsCollector(sources).Collect()) {
    if (f.name != "furrballs_dispatch_ops_total") continue;
    ASSERT_EQ(f.metric.size(), 1u);
    ASSERT_EQ(f.metric[0].label.size(), 1u);
    EXPECT_EQ(f.metric[0].label[0].name, "node");
    EXPECT_EQ(f.metric[0].label[0].value, "1");
    EXPECT_EQ(f.metric[0].counter.value, 7);
    found = true;
  }
  EXPECT_TRUE(found);
}

TEST_F(StatsCollectorTest, DispatchFamiliesAreIndexedByNode) {
  for (int n = 0; n < 4; ++n) {
    const std::string node = std::to_string(n);
    EXPECT_EQ(Value("furrballs_dispatch_batches_total", {{"node", node}}), 5 + n);
    EXPECT_EQ(Value("furrballs_dispatch_ops_total", {{"node", node}}), 50 + n);
    EXPECT_EQ(Value("furrballs_dispatch_merged_writes_total", {{"node", node}}), n);
    EXPECT_EQ(Value("furrballs_dispatch_rejected_ops_total",
                    {{"node", node}, {"reason", "queue_full"}}), 2);
    EXPECT_EQ(Value("furrballs_dispatch_rejected_ops_total",
                    {{"node", node}, {"reason", "deadline_expired"}}), 1);
    EXPECT_EQ(Value("furrballs_dispatch_queue_depth", {{"node", node}}), 3);
  }
}

TEST_F(StatsCollectorTest, RequestsExportEveryOpAndCode) {
  EXPECT_EQ(Family("furrballs_requests_total").metric.size(),
            kOps * kCodes);
  EXPECT_EQ(Value("furrballs_requests_total", {{"op", "get"}, {"code", "OK"}}), 2);
  EXPECT_EQ(Value("furrballs_requests_total", {{"op", "get"}, {"code", "NOT_FOUND"}}), 1);
  EXPECT_EQ(Value("furrballs_requests_total",
                  {{"op", "set"}, {"code", "RESOURCE_EXHAUSTED"}}), 1);
  EXPECT_EQ(Value("furrballs_requests_total", {{"op", "stats"}, {"code", "OK"}}), 0);
}

TEST_F(StatsCollectorTest, LatencyHistogramIsCumulativeInSeconds) {
  const MetricFamily& f = Family("furrballs_request_duration_seconds");
  EXPECT_EQ(f.type, MetricType::Histogram);
  EXPECT_EQ(f.metric.size(), kOps);

  const ClientMetric* get = Sample("furrballs_request_duration_seconds", {{"op", "get"}});
  ASSERT_NE(get, nullptr);
  const auto& h = get->histogram;
  ASSERT_EQ(h.bucket.size(), kBuckets);
  EXPECT_DOUBLE_EQ(h.bucket.front().upper_bound, 5e-6);
  EXPECT_TRUE(std::isinf(h.bucket.back().upper_bound));
  for (size_t b = 1; b < h.bucket.size(); ++b) {
    EXPECT_GT(h.bucket[b].upper_bound, h.bucket[b - 1].upper_bound);
    EXPECT_GE(h.bucket[b].cumulative_count, h.bucket[b - 1].cumulative_count);
  }
  EXPECT_EQ(h.bucket[0].cumulative_count, 1u);  // 3 µs
  EXPECT_EQ(h.bucket[1].cumulative_count, 2u);  // + 30 µs (<= 50 µs)
  EXPECT_EQ(h.bucket.back().cumulative_count, 3u);
  EXPECT_EQ(h.sample_count, 3u);
  EXPECT_NEAR(h.sample_sum, 0.003033, 1e-12);

  const ClientMetric* set = Sample("furrballs_request_duration_seconds", {{"op", "set"}});
  ASSERT_NE(set, nullptr);
  // 2 s is above the last bound: only +Inf holds it.
  EXPECT_EQ(set->histogram.bucket[kBuckets - 2].cumulative_count, 0u);
  EXPECT_EQ(set->histogram.bucket.back().cumulative_count, 1u);
}

TEST_F(StatsCollectorTest, BuildInfoAndProcessFamilies) {
  const ClientMetric* info = Sample(
      "furrballs_build_info",
      {{"version", "0.1.0"}, {"git_commit", std::string(BuildGitCommit())}});
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->gauge.value, 1);
  EXPECT_GT(Value("process_resident_memory_bytes", {}), 0);
  EXPECT_GT(Value("process_open_fds", {}), 0);
  EXPECT_GT(Value("process_start_time_seconds", {}), 0);
  EXPECT_EQ(Family("process_cpu_seconds_total").type, MetricType::Counter);
}

// What promtool's linter checks, plus this project's rules: a prefix, help
// text, `_total` on counters and only on counters, unique names, and only
// the documented low-cardinality labels.
TEST_F(StatsCollectorTest, NamesFollowConventions) {
  const std::set<std::string> allowed_labels = {
      "node",     "op",        "code",   "tier",    "reason",
      "locality", "direction", "result", "version", "git_commit"};
  for (const auto& [name, f] : families_) {
    SCOPED_TRACE(name);
    EXPECT_TRUE(name.rfind("furrballs_", 0) == 0 || name.rfind("process_", 0) == 0);
    EXPECT_FALSE(f.help.empty());
    const bool total = name.size() > 6 && name.substr(name.size() - 6) == "_total";
    EXPECT_EQ(total, f.type == MetricType::Counter);
    for (const ClientMetric& m : f.metric) {
      for (const auto& l : m.label) EXPECT_EQ(allowed_labels.count(l.name), 1u) << l.name;
    }
  }
}

TEST(StatsCollectorSourcesTest, NullSourcesLeaveTheirFamiliesOut) {
  StatsSources none;
  none.process = false;
  const std::vector<MetricFamily> families = StatsCollector(none).Collect();
  ASSERT_EQ(families.size(), 1u);
  EXPECT_EQ(families[0].name, "furrballs_build_info");
}

}  // namespace
}  // namespace furrballs::metrics
