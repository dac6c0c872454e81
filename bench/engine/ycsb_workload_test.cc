// bench/engine/ycsb_workload_test.cc: the key generators against theory, and
// their determinism.
#include "bench/engine/ycsb_workload.h"

#include <cmath>
#include <vector>

#include <gtest/gtest.h>

namespace furrballs::bench {
namespace {

TEST(ZetaTest, SmallSumsAreExact) {
  EXPECT_DOUBLE_EQ(Zeta(1, 0.99), 1.0);
  EXPECT_DOUBLE_EQ(Zeta(2, 0.99), 1.0 + std::pow(2.0, -0.99));
  EXPECT_NEAR(Zeta(1000, 0.0), 1000.0, 1e-9);
}

// Ranks 0 and 1 are drawn exactly by Gray et al.'s method, so their
// frequencies must match 1/ζ(n) and 2^-θ/ζ(n).
TEST(ZipfianGeneratorTest, TopRanksMatchTheory) {
  constexpr uint64_t kItems = 100000;
  constexpr int kSamples = 2000000;
  const ZipfianGenerator zipf(kItems, 0.99);
  Rng rng(7);
  std::vector<uint64_t> counts(kItems, 0);
  for (int i = 0; i < kSamples; ++i) {
    const uint64_t rank = zipf.Next(rng);
    ASSERT_LT(rank, kItems);
    ++counts[rank];
  }
  for (uint64_t rank : {uint64_t{0}, uint64_t{1}}) {
    const double expected = zipf.Probability(rank) * kSamples;
    // ~80k expected hits: 3 standard deviations is about 1%.
    EXPECT_NEAR(static_cast<double>(counts[rank]), expected, 0.02 * expected)
        << "rank " << rank;
  }
  // The tail is approximate, but frequencies still fall with rank.
  uint64_t band_10_19 = 0, band_100_109 = 0, band_1000_1009 = 0;
  for (int i = 0; i < 10; ++i) {
    band_10_19 += counts[10 + i];
    band_100_109 += counts[100 + i];
    band_1000_1009 += counts[1000 + i];
  }
  EXPECT_GT(counts[1], band_10_19 / 10);
  EXPECT_GT(band_10_19, band_100_109);
  EXPECT_GT(band_100_109, band_1000_1009);
  // Zipf: rank 0 is (1001/1)^θ ≈ 935 times as likely as rank 1000.
  const double ratio = static_cast<double>(counts[0]) /
                       (static_cast<double>(band_1000_1009) / 10);
  EXPECT_NEAR(ratio, std::pow(1005.5, 0.99), 0.25 * std::pow(1005.5, 0.99));
}

TEST(ScrambledZipfianGeneratorTest, HottestKeyIsTheHashOfRankZero) {
  constexpr uint64_t kItems = 50000;
  constexpr int kSamples = 1000000;
  const ScrambledZipfianGenerator zipf(kItems, 0.99);
  Rng rng(11);
  std::vector<uint64_t> counts(kItems, 0);
  for (int i = 0; i < kSamples; ++i) ++counts[zipf.Next(rng)];
  const uint64_t hottest = zipf.KeyOfRank(0);
  EXPECT_NE(hottest, 0u) << "scrambling should move the hot key";
  for (uint64_t k = 0; k < kItems; ++k) {
    EXPECT_LE(counts[k], counts[hottest]) << k;
  }
  // At least rank 0's share (another rank may fold onto the same key).
  const double expected = zipf.zipfian().Probability(0) * kSamples;
  EXPECT_GT(static_cast<double>(counts[hottest]), 0.97 * expected);
}

TEST(KeyChooserTest, SameSeedSameKeysDifferentSeedDifferentKeys) {
  for (Distribution d : {Distribution::kZipfian, Distribution::kUniform}) {
    const KeyChooser chooser(d, 10000, 0.99);
    Rng a(42), b(42), c(43);
    std::vector<uint64_t> ka, kb, kc;
    for (int i = 0; i < 1000; ++i) {
      ka.push_back(chooser.Next(a));
      kb.push_back(chooser.Next(b));
      kc.push_back(chooser.Next(c));
    }
    EXPECT_EQ(ka, kb) << DistributionName(d);
    EXPECT_NE(ka, kc) << DistributionName(d);
  }
}

TEST(KeyChooserTest, UniformIsFlat) {
  constexpr uint64_t kItems = 20;
  constexpr int kSamples = 400000;
  const KeyChooser chooser(Distribution::kUniform, kItems, 0.99);
  Rng rng(3);
  std::vector<int> counts(kItems, 0);
  for (int i = 0; i < kSamples; ++i) ++counts[chooser.Next(rng)];
  for (uint64_t k = 0; k < kItems; ++k) {
    EXPECT_NEAR(counts[k], kSamples / kItems, 0.03 * kSamples / kItems) << k;
  }
}

TEST(RngTest, DoublesAreInTheUnitInterval) {
  Rng rng(5);
  double sum = 0;
  for (int i = 0; i < 100000; ++i) {
    const double u = rng.NextDouble();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  EXPECT_NEAR(sum / 100000, 0.5, 0.01);
}

TEST(Fnv1a64Test, PinnedValues) {
  // Pinned so that which keys are hot cannot change silently.
  EXPECT_EQ(Fnv1a64(0), 0xa8c7f832281a39c5ULL);
  EXPECT_EQ(Fnv1a64(1), 0x89cd31291d2aefa4ULL);
}

TEST(WorkloadTest, ParsesTheCoreWorkloads) {
  EXPECT_DOUBLE_EQ(ParseWorkload("A")->read_proportion, 0.5);
  EXPECT_DOUBLE_EQ(ParseWorkload("b")->read_proportion, 0.95);
  EXPECT_DOUBLE_EQ(ParseWorkload("C")->read_proportion, 1.0);
  EXPECT_TRUE(ParseWorkload("F")->read_modify_write);
  EXPECT_FALSE(ParseWorkload("E").ok());
  EXPECT_EQ(*ParseDistribution("zipfian"), Distribution::kZipfian);
  EXPECT_FALSE(ParseDistribution("latest").ok());
}

TEST(FormatKeyTest, FixedWidthUserKeys) {
  std::string key;
  FormatKey(42, 24, &key);
  EXPECT_EQ(key, "user00000000000000000042");
  FormatKey(1234567, 12, &key);
  EXPECT_EQ(key, "user01234567");
}

}  // namespace
}  // namespace furrballs::bench
