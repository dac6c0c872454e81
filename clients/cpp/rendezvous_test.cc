// Tests of rendezvous hashing: determinism, balance, and the minimal-movement
// property when endpoints are added or removed.
#include "clients/cpp/rendezvous.h"

#include <algorithm>
#include <string>
#include <vector>

#include <absl/strings/str_cat.h>
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace furrballs::client
