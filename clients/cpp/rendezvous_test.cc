// Tests of rendezvous hashing: determinism, balance, and the minimal-movement
// property when endpoints are added or removed.
#include "clients/cpp/rendezvous.h"

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <absl/strings/numbers.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_split.h>
#include <gtest/gtest.h>
#include <xxhash.h>

namespace furrballs::client {
namespace {

constexpr int kKeys = 20000;

std::string Key(int i) { return absl::StrCat("key-", i); }

std::vector<std::string> Endpoints(int n) {
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) out.push_back(absl::StrCat("10.0.0.", i, ":50051"));
  return out;
}

TEST(RendezvousTest, OrderAndDuplicatesDoNotMatter) {
  std::vector<std::string> a = Endpoints(5);
  std::vector<std::string> b = a;
  std::reverse(b.begin(), b.end());
  b.push_back(a[2]);
  Rendezvous ra(a), rb(b);
  ASSERT_EQ(ra.endpoints(), rb.endpoints());
  for (int i = 0; i < 1000; ++i) {
    EXPECT_EQ(ra.endpoints()[ra.Owner(Key(i))], rb.endpoints()[rb.Owner(Key(i))]);
  }
}

TEST(RendezvousTest, OwnerHasTheHighestScore) {
  Rendezvous r(Endpoints(7));
  for (int i = 0; i < 1000; ++i) {
    const size_t owner = r.Owner(Key(i));
    for (size_t e = 0; e < r.endpoints().size(); ++e) {
      EXPECT_LE(r.Score(e, Key(i)), r.Score(owner, Key(i)));
    }
  }
}

TEST(RendezvousTest, SeedChangesOwners) {
  Rendezvous a(Endpoints(4), 1), b(Endpoints(4), 2);
  int differ = 0;
  for (int i = 0; i < 1000; ++i) differ += a.Owner(Key(i)) != b.Owner(Key(i));
  // Independent seeds agree on about 1/4 of the keys.
  EXPECT_GT(differ, 500);
}

TEST(RendezvousTest, KeysSpreadEvenly) {
  Rendezvous r(Endpoints(4));
  std::vector<int> count(4);
  for (int i = 0; i < kKeys; ++i) ++count[r.Owner(Key(i))];
  for (int c : count) {
    // Binomial(20000, 1/4): sd ~ 61, so +-10% of 5000 is ~8 sd.
    EXPECT_GT(c, 4500);
    EXPECT_LT(c, 5500);
  }
}

TEST(RendezvousTest, AddingAnEndpointMovesOnlyKeysToIt) {
  Rendezvous three(Endpoints(3)), four(Endpoints(4));
  int moved = 0;
  for (int i = 0; i < kKeys; ++i) {
    const std::string before = three.endpoints()[three.Owner(Key(i))];
    const std::string after = four.endpoints()[four.Owner(Key(i))];
    if (before != after) {
      ++moved;
      EXPECT_EQ(after, Endpoints(4)[3]) << "key moved between old endpoints";
    }
  }
  const double share = static_cast<double>(moved) / kKeys;
  EXPECT_GT(share, 0.22);
  EXPECT_LT(share, 0.28);
}

TEST(RendezvousTest, RemovingAnEndpointMovesOnlyItsKeys) {
  std::vector<std::string> all = Endpoints(5);
  std::vector<std::string> less = all;
  less.erase(less.begin() + 1);
  Rendezvous full(all), reduced(less);
  for (int i = 0; i < kKeys; ++i) {
    const std::string before = full.endpoints()[full.Owner(Key(i))];
    const std::string after = reduced.endpoints()[reduced.Owner(Key(i))];
    if (before != all[1]) {
      EXPECT_EQ(before, after);
    }
  }
}

TEST(RendezvousTest, SingleEndpointOwnsEverything) {
  Rendezvous r({"only:1"});
  for (int i = 0; i < 100; ++i) EXPECT_EQ(r.Owner(Key(i)), 0u);
}

// The vectors that the Python client's test checks too
// (tests/clients/rendezvous_vectors.txt; its header gives the format), so
// that C++ and Python clients agree on every owner. The path is relative to
// the runfiles root, which is the working directory of a Bazel test.
TEST(RendezvousTest, SharedVectors) {
  std::ifstream in("tests/clients/rendezvous_vectors.txt");
  ASSERT_TRUE(in) << "tests/clients/rendezvous_vectors.txt not in runfiles";
  uint64_t seed = 0;
  std::vector<std::string> endpoints;
  std::unique_ptr<Rendezvous> ring;
  int checked = 0;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> f = absl::StrSplit(line, ' ');
    SCOPED_TRACE(absl::StrCat("line ", n, ": ", line));
    if (f[0] == "seed") {
      ASSERT_EQ(f.size(), 2u);
      ASSERT_TRUE(absl::SimpleAtoi(f[1], &seed));
    } else if (f[0] == "endpoints") {
      endpoints.assign(f.begin() + 1, f.end());
      ring = std::make_unique<Rendezvous>(endpoints, seed);
    } else if (f[0] == "endpoint_seed") {
      ASSERT_EQ(f.size(), 3u);
      uint64_t want = 0;
      ASSERT_TRUE(absl::SimpleHexAtoi(f[2], &want));
      // Pins the derivation of the per-endpoint seed; an owner line alone
      // could agree by chance.
      EXPECT_EQ(XXH3_64bits_withSeed(f[1].data(), f[1].size(), seed), want);
      ++checked;
    } else if (f[0] == "owner") {
      ASSERT_EQ(f.size(), 3u);
      ASSERT_NE(ring, nullptr);
      EXPECT_EQ(ring->endpoints()[ring->Owner(f[1])], f[2]);
      ++checked;
    } else {
      FAIL() << "unknown record " << f[0];
    }
  }
  EXPECT_GT(checked, 40);
}

}  // namespace
}  // namespace furrballs::client
