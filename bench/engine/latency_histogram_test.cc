// bench/engine/latency_histogram_test.cc: bucket arithmetic and percentiles
// on inputs whose answers are known.
#include "bench/engine/latency_histogram.h"

#include <cstdint>

#include <gtest/gtest.h>

namespace furrballs::bench {
namespace {

TEST(LatencyHistogramTest, EmptyReportsZero) {
  LatencyHistogram h;
  EXPECT_EQ(h.count(), 0u);
  EXPECT_EQ(h.Percentile(0.5), 0u);
}

TEST(LatencyHistogramTest, SmallValuesAreExact) {
  LatencyHistogram h;
  for (uint64_t v = 0; v < 256; ++v) h.Record(v);
  EXPECT_EQ(h.Percentile(0.5), 127u);   // the 128th of 256 values
  EXPECT_EQ(h.Percentile(0.99), 253u);  // the 254th
  EXPECT_EQ(h.Percentile(1.0), 255u);
  EXPECT_EQ(h.Percentile(0.0), 0u);
}

TEST(LatencyHistogramTest, MeanBetweenTrimsBothEnds) {
  LatencyHistogram empty;
  EXPECT_EQ(empty.MeanBetween(0, 1), 0);
  LatencyHistogram h;
  for (uint64_t v = 0; v < 256; ++v) h.Record(v);
  EXPECT_DOUBLE_EQ(h.MeanBetween(0, 1), 127.5);
  EXPECT_DOUBLE_EQ(h.MeanBetween(0.25, 0.75), 127.5);  // values 64..191
  EXPECT_DOUBLE_EQ(h.MeanBetween(0, 0.5), 63.5);       // values 0..127
  // Two preemptions in a hundred do not move a mean trimmed at 0.98.
  LatencyHistogram t;
  for (int i = 0; i < 98; ++i) t.Record(100);
  t.Record(1000000000);
  t.Record(1000000000);
  EXPECT_DOUBLE_EQ(t.MeanBetween(0, 0.98), 100);
  EXPECT_GT(t.MeanBetween(0, 1), 1e7);
}

TEST(LatencyHistogramTest, BucketsCoverTheirValuesWithinResolution) {
  for (uint64_t v : {uint64_t{0}, uint64_t{1}, uint64_t{255}, uint64_t{256},
                     uint64_t{257}, uint64_t{1000}, uint64_t{65535},
                     uint64_t{123456789}, (uint64_t{1} << 39) + 12345}) {
    const size_t b = LatencyHistogram::BucketOf(v);
    ASSERT_LT(b, LatencyHistogram::kBucketCount);
    const uint64_t low = LatencyHistogram::BucketLow(b);
    const uint64_t width = LatencyHistogram::BucketWidth(b);
    EXPECT_LE(low, v) << v;
    EXPECT_LT(v, low + width) << v;
    EXPECT_LE(static_cast<double>(width), static_cast<double>(low) / 128 + 1) << v;
  }
}

TEST(LatencyHistogramTest, BucketsAreContiguous) {
  for (size_t b = 0; b + 1 < LatencyHistogram::kBucketCount; ++b) {
    ASSERT_EQ(LatencyHistogram::BucketLow(b) + LatencyHistogram::BucketWidth(b),
              LatencyHistogram::BucketLow(b + 1))
        << b;
    ASSERT_EQ(LatencyHistogram::BucketOf(LatencyHistogram::BucketLow(b)), b);
  }
}

TEST(LatencyHistogramTest, PercentilesOfAUniformRangeAreWithinOnePercent) {
  LatencyHistogram h;
  for (uint64_t v = 1; v <= 100000; ++v) h.Record(v);
  EXPECT_NEAR(static_cast<double>(h.Percentile(0.50)), 50000, 500);
  EXPECT_NEAR(static_cast<double>(h.Percentile(0.99)), 99000, 990);
  EXPECT_NEAR(static_cast<double>(h.Percentile(0.999)), 99900, 999);
}

TEST(LatencyHistogramTest, TailIsFoundAmongManyFastValues) {
  // 98.5% at 70 ns, 1.5% at 3000 ns: p50 is 70, p99 is in the slow group.
  LatencyHistogram h;
  for (int i = 0; i < 9850; ++i) h.Record(70);
  for (int i = 0; i < 150; ++i) h.Record(3000);
  EXPECT_EQ(h.Percentile(0.5), 70u);
  EXPECT_NEAR(static_cast<double>(h.Percentile(0.99)), 3000, 30);
}

TEST(LatencyHistogramTest, MergeEqualsRecordingEverything) {
  LatencyHistogram a, b, all;
  for (uint64_t v = 1; v <= 5000; ++v) {
    (v % 2 == 0 ? a : b).Record(v * 7);
    all.Record(v * 7);
  }
  a.Merge(b);
  EXPECT_EQ(a.count(), all.count());
  for (double q : {0.01, 0.5, 0.9, 0.99, 1.0}) {
    EXPECT_EQ(a.Percentile(q), all.Percentile(q)) << q;
  }
}

TEST(LatencyHistogramTest, HugeValuesAreClampedIntoTheLastBucket) {
  LatencyHistogram h;
  h.Record(~uint64_t{0});
  EXPECT_EQ(LatencyHistogram::BucketOf(~uint64_t{0}),
            LatencyHistogram::kBucketCount - 1);
  EXPECT_GT(h.Percentile(1.0), uint64_t{1} << 39);
}

}  // namespace
}  // namespace furrballs::bench
