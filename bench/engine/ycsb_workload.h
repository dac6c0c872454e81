// bench/engine/ycsb_workload.h: YCSB-style key choice and operation mix.
//
// Thread safety: ZipfianGenerator and ScrambledZipfianGenerator are immutable
// after construction and may be shared; every thread draws from its own Rng.
//
// Key choice follows YCSB's generators, written from the published
// algorithms:
// - ZipfianGenerator: the rank of an item in [0, n) with P(rank i) ~ 1/(i+1)^θ,
//   by the inverse-CDF approximation of Gray et al., "Quickly Generating
//   Billion-Record Synthetic Databases" (SIGMOD 1994), which is exact for
//   ranks 0 and 1 and approximate in the tail. ζ(n, θ) is summed exactly for
//   the benchmark's n (YCSB's scrambled generator instead draws from 10^10
//   items with a precomputed ζ and folds the result modulo n).
// - ScrambledZipfianGenerator: a Zipfian rank hashed with 64-bit FNV-1a over
//   its eight little-endian bytes, modulo n, as YCSB does, so the popular keys
//   are spread over the key space instead of being the first keys loaded.
//   Ranks that collide modulo n share a key, as in YCSB.
// - Uniform: every key in [0, n) equally likely.
#ifndef FURRBALLS_BENCH_ENGINE_YCSB_WORKLOAD_H_
#define FURRBALLS_BENCH_ENGINE_YCSB_WORKLOAD_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <absl/status/statusor.h>

namespace furrballs::bench {

// SplitMix64 (Steele, Lea, Flood, "Fast splittable pseudorandom number
// generators", OOPSLA 2014): one add and two multiply-xorshift rounds per draw;
// plenty for choosing keys and operations.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}

  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }

  // Uniform in [0, 1) with 53 bits.
  double NextDouble() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

  // Uniform in [0, n) by multiply-high (Lemire), no division.
  uint64_t NextBelow(uint64_t n) {
    return static_cast<uint64_t>(
        (static_cast<unsigned __int128>(Next()) * n) >> 64);
  }

 private:
  uint64_t state_;
};

// ζ(n, θ) = Σ_{i=1..n} 1/i^θ.
double Zeta(uint64_t n, double theta);

class ZipfianGenerator {
 public:
  // REQUIRES: n >= 2, 0 < theta < 1.
  ZipfianGenerator(uint64_t n, double theta);

  uint64_t Next(Rng& rng) const;

  uint64_t n() const { return n_; }
  double zetan() const { return zetan_; }
  // The exact probability of rank i under Zipf(n, θ).
  double Probability(uint64_t rank) const;

 private:
  uint64_t n_;
  double theta_;
  double zetan_;
  double alpha_;
  double eta_;
  double half_pow_theta_;  // 1 + 0.5^θ: the cumulative weight of ranks 0, 1
};

// 64-bit FNV-1a over the eight little-endian bytes of `value`.
uint64_t Fnv1a64(uint64_t value);

class ScrambledZipfianGenerator {
 public:
  ScrambledZipfianGenerator(uint64_t n, double theta) : zipf_(n, theta) {}

  uint64_t Next(Rng& rng) const { return KeyOfRank(zipf_.Next(rng)); }
  uint64_t KeyOfRank(uint64_t rank) const { return Fnv1a64(rank) % zipf_.n(); }
  const ZipfianGenerator& zipfian() const { return zipf_; }

 private:
  ZipfianGenerator zipf_;
};

enum class Distribution : uint8_t { kZipfian, kUniform };

absl::StatusOr<Distribution> ParseDistribution(std::string_view name);
const char* DistributionName(Distribution d);

// Chooses key numbers in [0, n) by the configured distribution.
class KeyChooser {
 public:
  KeyChooser(Distribution d, uint64_t n, double theta)
      : distribution_(d), n_(n), zipf_(n < 2 ? 2 : n, theta) {}

  uint64_t Next(Rng& rng) const {
    return distribution_ == Distribution::kZipfian ? zipf_.Next(rng)
                                                   : rng.NextBelow(n_);
  }

 private:
  Distribution distribution_;
  uint64_t n_;
  ScrambledZipfianGenerator zipf_;
};

// The YCSB core workloads used here. Each operation is a read with
// probability read_proportion; otherwise an update (A, B) or a
// read-modify-write of the same key (F). C is read-only.
struct WorkloadMix {
  char name = 'A';
  double read_proportion = 0.5;
  bool read_modify_write = false;
};

absl::StatusOr<WorkloadMix> ParseWorkload(std::string_view name);

// Writes the key of record `key_number` into *key: "user" followed by the
// number in decimal, zero-padded so that the key is exactly key_bytes long.
// REQUIRES: key_bytes >= 4 + the number's digit count (at most 20).
void FormatKey(uint64_t key_number, size_t key_bytes, std::string* key);

}  // namespace furrballs::bench

#endif  // FURRBALLS_BENCH_ENGINE_YCSB_WORKLOAD_H_
