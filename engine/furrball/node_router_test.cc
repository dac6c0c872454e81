// NodeRouter: ids and indexes of a served set that does not start at 0, and
// hash homes that are indexes.
#include "engine/furrball/node_router.h"

#include <set>

#include <gtest/gtest.h>

namespace furrballs {
namespace {

TEST(NodeRouterTest, IdsAndIndexesOfNodesThatDoNotStartAtZero) {
  const NodeRouter router({1, 3});
  EXPECT_EQ(router.count(), 2);
  EXPECT_EQ(router.IdOf(0), 1);
  EXPECT_EQ(router.IdOf(1), 3);
  EXPECT_EQ(router.IndexOf(1), 0);
  EXPECT_EQ(router.IndexOf(3), 1);
  EXPECT_EQ(router.IndexOf(0), -1);
  EXPECT_EQ(router.IndexOf(2), -1);
}

TEST(NodeRouterTest, HomesAreIndexesSpreadOverEveryNode) {
  const NodeRouter one({1});
  const NodeRouter four({0, 1, 4, 5});
  std::set<int> homes;
  for (uint64_t i = 0; i < 1000; ++i) {
    const HashPair h{i * 0x9e3779b97f4a7c15ull, i};
    EXPECT_EQ(one.HomeIndex(h), 0);
    const int home = four.HomeIndex(h);
    ASSERT_GE(home, 0);
    ASSERT_LT(home, 4);
    homes.insert(home);
  }
  EXPECT_EQ(homes.size(), 4u);
}

}  // namespace
}  // namespace furrballs
