// RequestStats: bucket edges, labels, exact totals from many threads (more
// than there are writer shards, so the shared overflow shard is exercised),
// slot reuse after threads exit, and snapshots taken while writers run (run
// under --config=tsan to check that reads are race-free).
#include "service/request_stats.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <latch>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace furrballs::service {
namespace {

using std::chrono::microseconds;
using std::chrono::nanoseconds;

uint64_t TotalRequests(const RequestStatsSnapshot& s, RequestOp op) {
  uint64_t total = 0;
  for (uint64_t n : s.requests[static_cast<int>(op)]) total += n;
  return total;
}

uint64_t TotalObservations(const RequestStatsSnapshot& s, RequestOp op) {
  uint64_t total = 0;
  for (uint64_t n : s.latency_buckets[static_cast<int>(op)]) total += n;
  return total;
}

TEST(LatencyBucketTest, BoundsAreInclusiveLikePrometheusLe) {
  EXPECT_EQ(LatencyBucketOf(0), 0);
  EXPECT_EQ(LatencyBucketOf(5'000), 0);
  EXPECT_EQ(LatencyBucketOf(5'001), 1);
  EXPECT_EQ(LatencyBucketOf(1'000'000), 7);  // 1 ms
  EXPECT_EQ(LatencyBucketOf(1'000'001), 8);
  EXPECT_EQ(LatencyBucketOf(1'000'000'000), 13);  // 1 s, the last bound
  EXPECT_EQ(LatencyBucketOf(1'000'000'001), kLatencyBucketCount - 1);  // +Inf
  EXPECT_EQ(LatencyBucketOf(UINT64_MAX), kLatencyBucketCount - 1);
  for (size_t i = 0; i < kLatencyBucketBoundsNs.size(); ++i) {
    EXPECT_EQ(LatencyBucketOf(kLatencyBucketBoundsNs[i]), static_cast<int>(i));
    if (i > 0) {
      EXPECT_LT(kLatencyBucketBoundsNs[i - 1], kLatencyBucketBoundsNs[i]);
    }
  }
}

TEST(RequestStatsNamesTest, LabelValues) {
  EXPECT_EQ(RequestOpName(RequestOp::kGet), "get");
  EXPECT_EQ(RequestOpName(RequestOp::kMultiSet), "multi_set");
  EXPECT_EQ(RequestOpName(RequestOp::kStats), "stats");
  EXPECT_EQ(RequestOpName(RequestOp::kBatch), "batch");
  EXPECT_EQ(StatusCodeName(0), "OK");
  EXPECT_EQ(StatusCodeName(3), "INVALID_ARGUMENT");
  EXPECT_EQ(StatusCodeName(8), "RESOURCE_EXHAUSTED");
  EXPECT_EQ(StatusCodeName(14), "UNAVAILABLE");
  EXPECT_EQ(StatusCodeName(16), "UNAUTHENTICATED");
  EXPECT_EQ(StatusCodeName(17), "UNKNOWN");
  EXPECT_EQ(StatusCodeName(-1), "UNKNOWN");
}

TEST(RequestStatsTest, RecordsOpCodeBucketAndSum) {
  RequestStats stats;
  stats.Record(RequestOp::kGet, 0, microseconds(3));
  stats.Record(RequestOp::kGet, 0, microseconds(40));
  stats.Record(RequestOp::kGet, 4, microseconds(2000));
  stats.Record(RequestOp::kSet, 3, microseconds(1));

  const RequestStatsSnapshot s = stats.Snapshot();
  const int get = static_cast<int>(RequestOp::kGet);
  const int set = static_cast<int>(RequestOp::kSet);
  EXPECT_EQ(s.requests[get][0], 2u);
  EXPECT_EQ(s.requests[get][4], 1u);
  EXPECT_EQ(s.requests[set][3], 1u);
  EXPECT_EQ(TotalRequests(s, RequestOp::kDelete), 0u);
  EXPECT_EQ(s.latency_buckets[get][0], 1u);  // 3 µs <= 5 µs
  EXPECT_EQ(s.latency_buckets[get][3], 1u);  // 40 µs <= 50 µs
  EXPECT_EQ(s.latency_buckets[get][8], 1u);  // 2 ms <= 2.5 ms
  EXPECT_EQ(s.latency_sum_ns[get], 2'043'000u);
  EXPECT_EQ(s.latency_sum_ns[set], 1'000u);
  EXPECT_EQ(TotalObservations(s, RequestOp::kGet), 3u);
}

TEST(RequestStatsTest, OutOfRangeCodeIsUnknownAndNegativeLatencyIsZero) {
  RequestStats stats;
  stats.Record(RequestOp::kTouch, 99, nanoseconds(-5));
  const RequestStatsSnapshot s = stats.Snapshot();
  const int touch = static_cast<int>(RequestOp::kTouch);
  EXPECT_EQ(s.requests[touch][2], 1u);  // UNKNOWN
  EXPECT_EQ(s.latency_buckets[touch][0], 1u);
  EXPECT_EQ(s.latency_sum_ns[touch], 0u);
}

TEST(RequestStatsTest, InstancesAreIndependent) {
  RequestStats a;
  RequestStats b;
  a.Record(RequestOp::kDelete, 0, microseconds(1));
  EXPECT_EQ(TotalRequests(a.Snapshot(), RequestOp::kDelete), 1u);
  EXPECT_EQ(TotalRequests(b.Snapshot(), RequestOp::kDelete), 0u);
}

// Twice as many threads as writer shards, all alive at once (the latch holds
// them until every one has recorded once and so claimed a slot or the
// overflow shard): owned and shared shards must both count exactly.
TEST(RequestStatsTest, MoreThreadsThanShardsCountExactly) {
  RequestStats stats;
  constexpr int kThreads = 2 * RequestStats::kWriterShards;
  constexpr int kPerThread = 2000;
  std::latch all_claimed(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&stats, &all_claimed, t] {
      const auto op = static_cast<RequestOp>(t % kRequestOpCount);
      stats.Record(op, t % kStatusCodeCount, microseconds(t));
      all_claimed.arrive_and_wait();
      for (int i = 1; i < kPerThread; ++i) {
        stats.Record(op, t % kStatusCodeCount, microseconds(t));
      }
    });
  }
  for (auto& th : threads) th.join();

  const RequestStatsSnapshot s = stats.Snapshot();
  uint64_t total = 0;
  for (int o = 0; o < kRequestOpCount; ++o) {
    total += TotalRequests(s, static_cast<RequestOp>(o));
    EXPECT_EQ(TotalRequests(s, static_cast<RequestOp>(o)),
              TotalObservations(s, static_cast<RequestOp>(o)));
  }
  EXPECT_EQ(total, uint64_t{kThreads} * kPerThread);
  // Thread t recorded kPerThread requests of t µs each.
  uint64_t expected_sum_ns = 0;
  uint64_t actual_sum_ns = 0;
  for (int t = 0; t < kThreads; ++t) {
    expected_sum_ns += uint64_t{kPerThread} * t * 1000;
  }
  for (uint64_t ns : s.latency_sum_ns) actual_sum_ns += ns;
  EXPECT_EQ(actual_sum_ns, expected_sum_ns);
}

// Slots come back when threads exit, and the next owner of a slot continues
// its counts rather than overwriting them.
TEST(RequestStatsTest, SlotsAreReusedAcrossThreadGenerations) {
  RequestStats stats;
  constexpr int kWaves = 4;
  constexpr int kThreadsPerWave = RequestStats::kWriterShards;
  constexpr int kPerThread = 500;
  for (int w = 0; w < kWaves; ++w) {
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreadsPerWave; ++t) {
      threads.emplace_back([&stats] {
        for (int i = 0; i < kPerThread; ++i) {
          stats.Record(RequestOp::kSet, 0, microseconds(7));
        }
      });
    }
    for (auto& th : threads) th.join();
  }
  const RequestStatsSnapshot s = stats.Snapshot();
  const int set = static_cast<int>(RequestOp::kSet);
  EXPECT_EQ(s.requests[set][0], uint64_t{kWaves} * kThreadsPerWave * kPerThread);
  EXPECT_EQ(s.latency_buckets[set][1],
            uint64_t{kWaves} * kThreadsPerWave * kPerThread);
}

// A scrape reads while writers write. Every counter only grows, so each
// snapshot's totals must be at least the previous one's.
TEST(RequestStatsTest, SnapshotsDuringRecordingAreMonotonic) {
  RequestStats stats;
  constexpr int kWriters = 2;
  constexpr int kPerWriter = 200'000;
  std::atomic<int> running{kWriters};
  std::vector<std::thread> writers;
  for (int w = 0; w < kWriters; ++w) {
    writers.emplace_back([&] {
      for (int i = 0; i < kPerWriter; ++i) {
        stats.Record(RequestOp::kGet, i % 3, nanoseconds(i));
      }
      running.fetch_sub(1, std::memory_order_release);
    });
  }
  uint64_t last_requests = 0;
  uint64_t last_sum = 0;
  while (running.load(std::memory_order_acquire) > 0) {
    const RequestStatsSnapshot s = stats.Snapshot();
    const uint64_t requests = TotalRequests(s, RequestOp::kGet);
    const uint64_t sum = s.latency_sum_ns[static_cast<int>(RequestOp::kGet)];
    ASSERT_GE(requests, last_requests);
    ASSERT_GE(sum, last_sum);
    last_requests = requests;
    last_sum = sum;
  }
  for (auto& th : writers) th.join();
  EXPECT_EQ(TotalRequests(stats.Snapshot(), RequestOp::kGet),
            uint64_t{kWriters} * kPerWriter);
}

}  // namespace
}  // namespace furrballs::service
