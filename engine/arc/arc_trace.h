// engine/arc/arc_trace.h: deterministic access traces for the ARC tests and
// benchmark (Zipfian, sequential scan, scan-resistant, loop, temporal shift,
// random mix). Test-only.
//
// Thread safety: plain functions and values; a TraceRng or ZipfianGenerator
// is thread-compatible.
//
// Everything is computed with integer arithmetic and <cmath> on doubles from
// our own generator (SplitMix64), so a trace is the same on every platform and
// standard library: no std::*_distribution, whose output is unspecified.
#ifndef FURRBALLS_ENGINE_ARC_ARC_TRACE_H_
#define FURRBALLS_ENGINE_ARC_ARC_TRACE_H_

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "engine/common/hash_pair.h"

namespace furrballs {

// SplitMix64 (Steele, Lea & Flood 2014): one add and a 64-bit finalizer.
class TraceRng {
 public:
  explicit TraceRng(uint64_t seed) : state_(seed) {}
  uint64_t Next() { return Mix(state_ += 0x9e3779b97f4a7c15ULL); }
  // Uniform in [0, 1) with 53 random bits.
  double NextDouble() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  // Uniform in [0, n); the modulo bias is below 2^-40 for the n used here.
  uint64_t Below(uint64_t n) { return Next() % n; }

  static uint64_t Mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }

 private:
  uint64_t state_;
};

// The HashPair standing for key number `id`: two independent mixes, so keys
// spread over ARC's index exactly as keyed XXH3 hashes do.
inline HashPair TraceKey(uint64_t id) {
  return HashPair{TraceRng::Mix(id ^ 0x5bd1e9955bd1e995ULL),
                  TraceRng::Mix(id + 0x2545f4914f6cdd1dULL)};
}

// Zipfian ranks in [0, n) with skew theta (0 < theta < 1): rank 0 is the most
// popular. The method of Gray et al., "Quickly Generating Billion-Record
// Synthetic Databases" (SIGMOD 1994), which YCSB also uses: one O(n) zeta sum
// at construction, then O(1) per draw.
class ZipfianGenerator {
 public:
  ZipfianGenerator(uint64_t n, double theta, uint64_t seed)
      : n_(n), rng_(seed) {
    double zetan = 0;
    for (uint64_t i = 1; i <= n; ++i) zetan += 1.0 / std::pow(double(i), theta);
    const double zeta2 = 1.0 + 1.0 / std::pow(2.0, theta);
    zetan_ = zetan;
    alpha_ = 1.0 / (1.0 - theta);
    eta_ = (1.0 - std::pow(2.0 / double(n), 1.0 - theta)) /
           (1.0 - zeta2 / zetan);
    half_pow_theta_ = 1.0 + std::pow(0.5, theta);
  }

  uint64_t Next() {
    const double u = rng_.NextDouble();
    const double uz = u * zetan_;
    if (uz < 1.0) return 0;
    if (uz < half_pow_theta_) return 1;
    const uint64_t r = static_cast<uint64_t>(
        double(n_) * std::pow(eta_ * u - eta_ + 1.0, alpha_));
    return r < n_ ? r : n_ - 1;
  }

 private:
  uint64_t n_;
  TraceRng rng_;
  double zetan_, alpha_, eta_, half_pow_theta_;
};

enum class TraceKind {
  kZipfian,        // Zipfian(0.99) over the universe
  kScan,           // a pure sequential scan: every key is new
  kScanResistant,  // a Zipfian hot set (universe/20) interrupted by scans
  kLoop,           // the universe, in order, over and over
  kTemporalShift,  // Zipfian over a quarter of the universe; the quarter
                   // changes every ops/4 accesses
  kRandomMix,      // per access: Zipfian, uniform, or a short sequential run
};

inline constexpr TraceKind kAllTraceKinds[] = {
    TraceKind::kZipfian,       TraceKind::kScan,
    TraceKind::kScanResistant, TraceKind::kLoop,
    TraceKind::kTemporalShift, TraceKind::kRandomMix,
};

inline std::string_view TraceName(TraceKind k) {
  switch (k) {
    case TraceKind::kZipfian: return "Zipfian";
    case TraceKind::kScan: return "Scan";
    case TraceKind::kScanResistant: return "ScanResistant";
    case TraceKind::kLoop: return "Loop";
    case TraceKind::kTemporalShift: return "TemporalShift";
    case TraceKind::kRandomMix: return "RandomMix";
  }
  return "?";
}

inline constexpr double kZipfTheta = 0.99;

// `ops` key ids drawn from [0, universe) (kScan ignores the universe).
inline std::vector<uint64_t> MakeTraceIds(TraceKind kind, uint64_t universe,
                                          size_t ops, uint64_t seed) {
  std::vector<uint64_t> ids;
  ids.reserve(ops);
  switch (kind) {
    case TraceKind::kZipfian: {
      ZipfianGenerator zipf(universe, kZipfTheta, seed);
      while (ids.size() < ops) ids.push_back(zipf.Next());
      break;
    }
    case TraceKind::kScan:
      for (size_t i = 0; i < ops; ++i) ids.push_back(i);
      break;
    case TraceKind::kScanResistant: {
      // 4000 hot accesses, then a burst that scans universe/5 cold keys in
      // order (resuming where the previous burst stopped), repeated.
      const uint64_t hot = std::max<uint64_t>(universe / 20, 1);
      const uint64_t cold = universe - hot;
      const uint64_t burst = std::max<uint64_t>(universe / 5, 1);
      ZipfianGenerator zipf(hot, kZipfTheta, seed);
      uint64_t cursor = 0;
      while (ids.size() < ops) {
        for (int i = 0; i < 4000 && ids.size() < ops; ++i) {
          ids.push_back(zipf.Next());
        }
        for (uint64_t i = 0; i < burst && ids.size() < ops; ++i) {
          ids.push_back(hot + cursor);
          cursor = (cursor + 1) % cold;
        }
      }
      break;
    }
    case TraceKind::kLoop:
      for (size_t i = 0; i < ops; ++i) ids.push_back(i % universe);
      break;
    case TraceKind::kTemporalShift: {
      const uint64_t window = std::max<uint64_t>(universe / 4, 2);
      const size_t phase_len = std::max<size_t>(ops / 4, 1);
      ZipfianGenerator zipf(window, kZipfTheta, seed);
      for (size_t i = 0; i < ops; ++i) {
        const uint64_t phase = (i / phase_len) % 4;
        ids.push_back((phase * window + zipf.Next()) % universe);
      }
      break;
    }
    case TraceKind::kRandomMix: {
      ZipfianGenerator zipf(universe, kZipfTheta, seed);
      TraceRng rng(seed ^ 0xabcdef);
      while (ids.size() < ops) {
        const uint64_t pick = rng.Below(10);
        if (pick < 5) {
          ids.push_back(zipf.Next());
        } else if (pick < 8) {
          ids.push_back(rng.Below(universe));
        } else {
          const uint64_t start = rng.Below(universe);
          const uint64_t len = 1 + rng.Below(16);
          for (uint64_t i = 0; i < len && ids.size() < ops; ++i) {
            ids.push_back((start + i) % universe);
          }
        }
      }
      break;
    }
  }
  return ids;
}

inline std::vector<HashPair> MakeTrace(TraceKind kind, uint64_t universe,
                                       size_t ops, uint64_t seed) {
  std::vector<HashPair> keys;
  keys.reserve(ops);
  for (uint64_t id : MakeTraceIds(kind, universe, ops, seed)) {
    keys.push_back(TraceKey(id));
  }
  return keys;
}

}  // namespace furrballs

#endif  // FURRBALLS_ENGINE_ARC_ARC_TRACE_H_
