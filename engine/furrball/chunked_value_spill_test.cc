// The chunked values of chunked_value.h with the spill tier: evicted or
// spilled chunks never give a partial value, spilled chunks reload, a
// deleted value never comes back.
// no_tsan (BUILD): Debian's librocksdb is not built with ThreadSanitizer.
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "engine/furrball/chunked_value_testing.h"
#include "engine/furrball/furrball.h"

namespace furrballs {
namespace furrball_internal {
namespace {

// FourMiB with the spill tier in a fresh directory `name`.
FurrBallOptions FourMiBWithSpill(const std::string& name) {
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / name;
  std::filesystem::remove_all(dir);
  FurrBallOptions o = FourMiB();
  o.spill_dir = dir.string();
  return o;
}

TEST(ChunkedValueSpillTest, EvictionNeverYieldsAPartialValue) {
  ExpectEvictionNeverYieldsAPartialValue(FourMiBWithSpill("chunked_eviction"),
                                         3);
}

// The spill tier: chunks and heads spill and reload like any key, and a
// deleted big value never comes back from disk.
TEST(ChunkedValueSpillTest, SpilledChunksReloadAndDeletedValuesStayDeleted) {
  std::unique_ptr<FurrBall> ball = MustOpen(FourMiBWithSpill("chunked_spill"));
  ASSERT_NE(ball, nullptr);
  const std::string kept = Stamped(400'000, 1), gone = Stamped(400'000, 2);
  ASSERT_EQ(ball->Set("kept", kept).error, Error::kOk);
  ASSERT_EQ(ball->Set("gone", gone).error, Error::kOk);
  ASSERT_TRUE(ball->Delete("gone").deleted);
  // Push both out of memory with 6 MB of small values.
  for (int i = 0; i < 6000; ++i) {
    ASSERT_EQ(ball->Set("filler" + std::to_string(i), Stamped(1000, i)).error,
              Error::kOk);
  }
  uint64_t spilled = 0;
  for (const NodeStatsSnapshot& s : ball->Stats()) {
    spilled += s.spill_keys_written;
  }
  EXPECT_GT(spilled, 0u);
  std::string got;
  const GetResult r = ball->Get("kept", &got);
  ASSERT_TRUE(r.found) << "the spill tier keeps what memory drops";
  EXPECT_TRUE(got == kept);
  EXPECT_FALSE(ball->Get("gone", &got).found);
}

}  // namespace
}  // namespace furrball_internal
}  // namespace furrballs
