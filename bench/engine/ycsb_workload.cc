// bench/engine/ycsb_workload.cc: Zipfian constants, parsing, key format.
#include "bench/engine/ycsb_workload.h"

#include <cmath>

#include <absl/strings/ascii.h>
#include <absl/strings/str_cat.h>

namespace furrballs::bench {

double Zeta(uint64_t n, double theta) {
  double sum = 0;
  for (uint64_t i = 1; i <= n; ++i) sum += 1.0 / std::pow(static_cast<double>(i), theta);
  return sum;
}

ZipfianGenerator::ZipfianGenerator(uint64_t n, double theta)
    : n_(n),
      theta_(theta),
      zetan_(Zeta(n, theta)),
      alpha_(1.0 / (1.0 - theta)),
      half_pow_theta_(1.0 + std::pow(0.5, theta)) {
  const double zeta2 = Zeta(2, theta);
  eta_ = (1.0 - std::pow(2.0 / static_cast<double>(n), 1.0 - theta)) /
         (1.0 - zeta2 / zetan_);
}

uint64_t ZipfianGenerator::Next(Rng& rng) const {
  const double u = rng.NextDouble();
  const double uz = u * zetan_;
  if (uz < 1.0) return 0;
  if (uz < half_pow_theta_) return 1;
  const uint64_t rank = static_cast<uint64_t>(
      static_cast<double>(n_) * std::pow(eta_ * u - eta_ + 1.0, alpha_));
  return rank < n_ ? rank : n_ - 1;
}

double ZipfianGenerator::Probability(uint64_t rank) const {
  return 1.0 / std::pow(static_cast<double>(rank + 1), theta_) / zetan_;
}

uint64_t Fnv1a64(uint64_t value) {
  constexpr uint64_t kOffsetBasis = 0xcbf29ce484222325ULL;
  constexpr uint64_t kPrime = 0x100000001b3ULL;
  uint64_t hash = kOffsetBasis;
  for (int i = 0; i < 8; ++i) {
    hash ^= value & 0xff;
    hash *= kPrime;
    value >>= 8;
  }
  return hash;
}

absl::StatusOr<Distribution> ParseDistribution(std::string_view name) {
  const std::string lower = absl::AsciiStrToLower(std::string(name));
  if (lower == "zipfian" || lower == "zipf") return Distribution::kZipfian;
  if (lower == "uniform") return Distribution::kUniform;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown distribution '", std::string(name), "' (zipfian, uniform)"));
}

const char* DistributionName(Distribution d) {
  return d == Distribution::kZipfian ? "zipfian" : "uniform";
}

absl::StatusOr<WorkloadMix> ParseWorkload(std::string_view name) {
  const std::string upper = absl::AsciiStrToUpper(std::string(name));
  if (upper == "A") return WorkloadMix{'A', 0.5, false};
  if (upper == "B") return WorkloadMix{'B', 0.95, false};
  if (upper == "C") return WorkloadMix{'C', 1.0, false};
  if (upper == "F") return WorkloadMix{'F', 0.5, true};
  return absl::InvalidArgumentError(
      absl::StrCat("unknown workload '", std::string(name), "' (A, B, C, F)"));
}

void FormatKey(uint64_t key_number, size_t key_bytes, std::string* key) {
  key->resize(key_bytes);
  char* p = key->data();
  p[0] = 'u';
  p[1] = 's';
  p[2] = 'e';
  p[3] = 'r';
  for (size_t i = key_bytes; i > 4; --i) {
    p[i - 1] = static_cast<char>('0' + key_number % 10);
    key_number /= 10;
  }
}

}  // namespace furrballs::bench
