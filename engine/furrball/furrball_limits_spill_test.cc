// The entry format's limits (furrball_limits_test) through the spill tier:
// entries of the longest keys at the largest pages leave memory in their
// portable form (entry.h) inside page blobs and come back whole after a warm
// restart.
// no_tsan (BUILD): Debian's librocksdb is not built with ThreadSanitizer.
#include <filesystem>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "engine/furrball/chunked_value_testing.h"
#include "engine/furrball/furrball.h"
#include "engine/furrball/furrball_limits_testing.h"

namespace furrballs {
namespace furrball_internal {
namespace {

TEST(FurrBallLimitsSpillTest, TheLargestEntriesComeBackAfterAWarmRestart) {
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / "limits_warm_restart";
  std::filesystem::remove_all(dir);
  FurrBallOptions o = LongKeyPages(10);
  o.spill_dir = dir.string();
  const std::string whole = Stamped(LargestWholeValue(), 1);
  const std::string chunked = Stamped(LargestWholeValue() + 1, 2);
  const std::string small = "a small value";
  uint64_t versions[3];
  {
    std::unique_ptr<FurrBall> ball = MustOpen(o);
    ASSERT_NE(ball, nullptr);
    ASSERT_EQ(ball->memory_plan().page_size, kMaxPageSize);
    const std::string* values[] = {&whole, &chunked, &small};
    for (int i = 0; i < 3; ++i) {
      const SetResult r = ball->Set(LongestKey(i), *values[i]);
      ASSERT_EQ(r.error, Error::kOk) << i;
      versions[i] = r.version;
    }
    ball->Close();
  }  // destroying it after Close() spills every resident page
  std::unique_ptr<FurrBall> ball = MustOpen(o);
  ASSERT_NE(ball, nullptr);
  std::string got;
  const std::string* values[] = {&whole, &chunked, &small};
  for (int i = 0; i < 3; ++i) {
    const GetResult g = ball->Get(LongestKey(i), &got);
    ASSERT_TRUE(g.found) << "key " << i << " lost in a graceful restart";
    EXPECT_TRUE(got == *values[i]) << i;
    EXPECT_EQ(g.version, versions[i]) << i;
  }
  // Reloaded, they are resident entries again: read from memory.
  ASSERT_TRUE(ball->GetFromMemory(ball->Ref(LongestKey(0)), &got).found);
  EXPECT_TRUE(got == whole);
}

}  // namespace
}  // namespace furrball_internal
}  // namespace furrballs
