// bench/engine/latency_histogram.h: a log-linear latency histogram for the
// engine benchmark (HdrHistogram-style buckets, ~0.8% resolution).
//
// Thread safety: thread-compatible. Each benchmark thread records into its
// own histogram (no shared atomics on the timed path); the driver merges them
// with Merge() after the threads have joined.
//
// Buckets: values below 2^(kSubBucketBits+1) have one bucket each (exact).
// Above that, every power of two [2^m, 2^(m+1)) is split into 2^kSubBucketBits
// equal buckets, so a bucket is at most 2^-kSubBucketBits (1/128 = 0.78%) of
// its values wide and a reported percentile (the bucket's midpoint) is within
// 0.4% of a recorded value. Values at or above 2^kMaxValueBits are clamped
// into the last bucket.
#ifndef FURRBALLS_BENCH_ENGINE_LATENCY_HISTOGRAM_H_
#define FURRBALLS_BENCH_ENGINE_LATENCY_HISTOGRAM_H_

#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace furrballs::bench {

class LatencyHistogram {
 public:
  static constexpr int kSubBucketBits = 7;
  // 2^40 ns is about 18 minutes: far beyond any single operation.
  static constexpr int kMaxValueBits = 40;
  static constexpr size_t kBucketCount =
      size_t{kMaxValueBits - kSubBucketBits + 1} << kSubBucketBits;

  LatencyHistogram() : counts_(kBucketCount, 0) {}

  void Record(uint64_t value) {
    ++counts_[BucketOf(value)];
    ++total_;
  }

  void Merge(const LatencyHistogram& other);

  uint64_t count() const { return total_; }

  // The value at quantile q in [0, 1] (the smallest recorded bucket that
  // covers ceil(q * count) values), as that bucket's midpoint. 0 when empty.
  uint64_t Percentile(double q) const;

  // The mean of the values ranked between quantiles q_lo and q_hi (0 <= q_lo
  // < q_hi <= 1), each taken as the mean of its bucket's values: a trimmed
  // mean, finer than a percentile when the timer itself is coarse (the
  // values then fall on a few buckets and a percentile jumps between them)
  // and, trimmed at the top, free of the preemptions a mean would include.
  // 0 when empty.
  double MeanBetween(double q_lo, double q_hi) const;

  static size_t BucketOf(uint64_t value) {
    if (value >= (uint64_t{1} << kMaxValueBits)) {
      value = (uint64_t{1} << kMaxValueBits) - 1;
    }
    const int msb = std::bit_width(value) - 1;  // -1 for value 0
    if (msb <= kSubBucketBits) return static_cast<size_t>(value);
    const int shift = msb - kSubBucketBits;
    // (v >> shift) has kSubBucketBits + 1 significant bits: the leading one
    // selects nothing (it is implied by the group), the rest select the
    // sub-bucket.
    return (static_cast<size_t>(shift + 1) << kSubBucketBits) +
           static_cast<size_t>((value >> shift) -
                               (uint64_t{1} << kSubBucketBits));
  }

  // The smallest value that falls into `bucket`, and the bucket's width.
  static uint64_t BucketLow(size_t bucket);
  static uint64_t BucketWidth(size_t bucket);

 private:
  std::vector<uint64_t> counts_;
  uint64_t total_ = 0;
};

}  // namespace furrballs::bench

#endif  // FURRBALLS_BENCH_ENGINE_LATENCY_HISTOGRAM_H_
