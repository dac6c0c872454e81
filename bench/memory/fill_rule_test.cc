// Tests of the memory fill test's stop rule: batch sizing, settling on
// growth below the threshold, and the batch and time limits.
#include "bench/memory/fill_rule.h"

#include <gtest/gtest.h>

namespace furrballs::bench::memory {
namespace {

TEST(BatchKeysTest, CoversTheBudgetWithWholeItems) {
  // 64 MiB of 24-byte keys and 64-byte values: 762,600.7 items, rounded up.
  EXPECT_EQ(BatchKeys(64ull << 20, 24, 64), 762601u);
  EXPECT_EQ(BatchKeys(1000, 10, 90), 10u);
  EXPECT_EQ(BatchKeys(1001, 10, 90), 11u);
}

TEST(FillRuleTest, FirstBatchNeverSettles) {
  FillRule rule(FillRuleOptions{});
  EXPECT_EQ(rule.AfterBatch(0), FillEnd::kContinue);
  EXPECT_EQ(rule.batches(), 1);
}

TEST(FillRuleTest, SettlesWhenABatchAddsLessThanTheThreshold) {
  FillRule rule(FillRuleOptions{.min_growth = 0.005});
  EXPECT_EQ(rule.AfterBatch(100000), FillEnd::kContinue);
  EXPECT_EQ(rule.AfterBatch(150000), FillEnd::kContinue);  // +50%
  EXPECT_EQ(rule.AfterBatch(150750), FillEnd::kContinue);  // +0.5%: still growing
  EXPECT_EQ(rule.AfterBatch(151500), FillEnd::kSettled);   // +0.4975%
  EXPECT_EQ(rule.batches(), 4);
}

TEST(FillRuleTest, ACountThatFallsOrStaysAtZeroHasSettled) {
  FillRule shrinking(FillRuleOptions{});
  shrinking.AfterBatch(262144);
  EXPECT_EQ(shrinking.AfterBatch(250000), FillEnd::kSettled);

  FillRule empty(FillRuleOptions{});
  empty.AfterBatch(0);
  EXPECT_EQ(empty.AfterBatch(0), FillEnd::kSettled);
}

TEST(FillRuleTest, StopsAtTheBatchLimitWhileStillGrowing) {
  FillRule rule(FillRuleOptions{.max_batches = 3});
  EXPECT_EQ(rule.AfterBatch(1000), FillEnd::kContinue);
  EXPECT_EQ(rule.AfterBatch(2000), FillEnd::kContinue);
  EXPECT_EQ(rule.AfterBatch(3000), FillEnd::kBatchLimit);
}

TEST(FillRuleTest, SettlingWinsOverTheBatchLimitOnTheSameBatch) {
  FillRule rule(FillRuleOptions{.max_batches = 2});
  rule.AfterBatch(1000);
  EXPECT_EQ(rule.AfterBatch(1000), FillEnd::kSettled);
}

TEST(FillRuleTest, TimeLimit) {
  FillRule rule(FillRuleOptions{.max_seconds = 30});
  EXPECT_EQ(rule.AfterStep(29.9), FillEnd::kContinue);
  EXPECT_EQ(rule.AfterStep(30), FillEnd::kTimeLimit);
}

TEST(FillRuleTest, EndNames) {
  EXPECT_EQ(FillEndName(FillEnd::kSettled), "settled");
  EXPECT_EQ(FillEndName(FillEnd::kBatchLimit), "batch_limit");
  EXPECT_EQ(FillEndName(FillEnd::kTimeLimit), "time_limit");
}

}  // namespace
}  // namespace furrballs::bench::memory
