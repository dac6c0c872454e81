// bench/engine/latency_histogram.cc: bucket arithmetic and percentiles.
#include "bench/engine/latency_histogram.h"

#include <algorithm>
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

double LatencyHistogram::MeanBetween(double q_lo, double q_hi) const {
  const double n = static_cast<double>(total_);
  const uint64_t lo = static_cast<uint64_t>(std::floor(std::clamp(q_lo, 0.0, 1.0) * n));
  const uint64_t hi = static_cast<uint64_t>(std::ceil(std::clamp(q_hi, 0.0, 1.0) * n));
  if (hi <= lo) return 0;
  // Ranks [lo, hi) of the sorted values; each bucket holds ranks
  // [seen, seen + count).
  double sum = 0;
  uint64_t seen = 0;
  for (size_t i = 0; i < kBucketCount && seen < hi; ++i) {
    const uint64_t begin = std::max(seen, lo);
    const uint64_t end = std::min(seen + counts_[i], hi);
    if (end > begin) {
      const double mid = static_cast<double>(BucketLow(i)) +
                         static_cast<double>(BucketWidth(i) - 1) / 2;
      sum += static_cast<double>(end - begin) * mid;
    }
    seen += counts_[i];
  }
  return sum / static_cast<double>(hi - lo);
}

}  // namespace furrballs::bench
