// bench/engine/latency_histogram.cc: bucket arithmetic and percentiles.
#include "bench/engine/latency_histogram.h"

#include <cmath>

namespace furrballs::bench {

void LatencyHistogram::Merge(const LatencyHistogram& other) {
  for (size_t i = 0; i < kBucketCount; ++i) counts_[i] += other.counts_[i];
  total_ += other.total_;
}

uint64_t LatencyHistogram::BucketLow(size_t bucket) {
  const size_t group = bucket >> kSubBucketBits;
  if (group <= 1) return bucket;
  const int shift = static_cast<int>(group) - 1;
  const uint64_t mantissa =
      (bucket & ((size_t{1} << kSubBucketBits) - 1)) |
      (uint64_t{1} << kSubBucketBits);
  return mantissa << shift;
}

uint64_t LatencyHistogram::BucketWidth(size_t bucket) {
  const size_t group = bucket >> kSubBucketBits;
  return group <= 1 ? 1 : uint64_t{1} << (group - 1);
}

uint64_t LatencyHistogram::Percentile(double q) const {
  if (total_ == 0) return 0;
  if (q < 0) q = 0;
  if (q > 1) q = 1;
  uint64_t rank = static_cast<uint64_t>(std::ceil(q * static_cast<double>(total_)));
  if (rank == 0) rank = 1;
  uint64_t seen = 0;
  for (size_t i = 0; i < kBucketCount; ++i) {
    seen += counts_[i];
    if (seen >= rank) return BucketLow(i) + BucketWidth(i) / 2;
  }
  return BucketLow(kBucketCount - 1);
}

}  // namespace furrballs::bench
