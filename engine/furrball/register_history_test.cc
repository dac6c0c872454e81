// Unit tests of the single-key linearizability checker on hand-written
// histories: linearizable ones pass (with deletes, expiry and overlapping
// ops), and each kind of violation is reported with the ops involved.
#include "engine/furrball/register_history.h"

#include <cstdint>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace furrballs {
namespace {

using ::testing::HasSubstr;
using Violation = RegisterCheck::Violation;

RegisterOp Op(RegisterOp::Kind kind, uint64_t inv, uint64_t res) {
  RegisterOp op;
  op.kind = kind;
  op.invoke = inv;
  op.respond = res;
  return op;
}

RegisterOp Set(uint64_t inv, uint64_t res, std::string value, uint64_t version,
               uint64_t ttl_ms = 0) {
  RegisterOp op = Op(RegisterOp::Kind::kSet, inv, res);
  op.value = std::move(value);
  op.version = version;
  op.ttl_ms = ttl_ms;
  return op;
}

RegisterOp Get(uint64_t inv, uint64_t res, std::string value,
               uint64_t version) {
  RegisterOp op = Op(RegisterOp::Kind::kGet, inv, res);
  op.found = true;
  op.value = std::move(value);
  op.version = version;
  return op;
}

RegisterOp Miss(uint64_t inv, uint64_t res) {
  return Op(RegisterOp::Kind::kGet, inv, res);
}

RegisterOp Del(uint64_t inv, uint64_t res, bool deleted) {
  RegisterOp op = Op(RegisterOp::Kind::kDelete, inv, res);
  op.found = deleted;
  return op;
}

RegisterOp Advance(uint64_t inv, uint64_t res, uint64_t clock_ms) {
  RegisterOp op = Op(RegisterOp::Kind::kAdvanceClock, inv, res);
  op.clock_ms = clock_ms;
  return op;
}

constexpr uint64_t kClock = 1;

RegisterCheck Check(const std::vector<RegisterOp>& ops) {
  return CheckRegisterHistory(ops, kClock);
}

TEST(RegisterHistoryTest, SequentialHistoryWithEveryKindPasses) {
  const RegisterCheck r = Check({
      Miss(1, 2),
      Set(3, 4, "a", 10),
      Get(5, 6, "a", 10),
      Set(7, 8, "b", 11),
      Del(9, 10, true),
      Del(11, 12, false),
      Miss(13, 14),
      Set(15, 16, "c", 40),  // versions may skip (another node's counter)
      Get(17, 18, "c", 40),
  });
  EXPECT_TRUE(r.ok()) << r.explanation;
}

TEST(RegisterHistoryTest, OverlappingOpsMayTakeEitherOrder) {
  // The Get overlaps both Sets and reads the first; the miss overlaps the
  // Delete, which overlaps the second Set's read.
  const RegisterCheck r = Check({
      Set(1, 5, "a", 1),
      Get(2, 9, "a", 1),
      Set(3, 7, "b", 2),
      Get(8, 12, "b", 2),
      Del(10, 14, true),
      Miss(11, 15),
  });
  EXPECT_TRUE(r.ok()) << r.explanation;
}

TEST(RegisterHistoryTest, ExpiryExplainsAMissOnceTheClockPassedTheDeadline) {
  const RegisterCheck r = Check({
      Set(1, 2, "a", 1, /*ttl_ms=*/10),
      Advance(3, 4, kClock + 10),
      Miss(5, 6),
  });
  EXPECT_TRUE(r.ok()) << r.explanation;
}

TEST(RegisterHistoryTest, StaleReadIsReported) {
  // The second reader began after the first had seen b, and saw a.
  const RegisterCheck r = Check({
      Set(1, 2, "a", 1),
      Set(3, 10, "b", 2),
      Get(4, 5, "b", 2),
      Get(6, 7, "a", 1),
  });
  EXPECT_EQ(r.violation, Violation::kStaleRead) << r.explanation;
  EXPECT_THAT(r.explanation, HasSubstr("Get -> b version 2"));
  EXPECT_THAT(r.explanation, HasSubstr("Get -> a version 1"));
}

TEST(RegisterHistoryTest, AReadAfterADeleteOfItsValueIsStale) {
  const RegisterCheck r = Check({
      Set(1, 2, "a", 1),
      Del(3, 4, true),
      Get(5, 6, "a", 1),
  });
  EXPECT_EQ(r.violation, Violation::kStaleRead) << r.explanation;
}

TEST(RegisterHistoryTest, LostWriteIsReported) {
  // b was acknowledged before the Get began, which still read a.
  const RegisterCheck r = Check({
      Set(1, 2, "a", 1),
      Set(3, 4, "b", 2),
      Get(5, 6, "a", 1),
  });
  EXPECT_EQ(r.violation, Violation::kLostWrite) << r.explanation;
  EXPECT_THAT(r.explanation, HasSubstr("Set(b) -> version 2"));
}

TEST(RegisterHistoryTest, VersionGoingBackwardsIsReported) {
  // The issue 16 bug: deleted, written again elsewhere, a lower version.
  const RegisterCheck r = Check({
      Set(1, 2, "a", (uint64_t{1} << 58) + 1),
      Del(3, 4, true),
      Set(5, 6, "b", 3),
  });
  EXPECT_EQ(r.violation, Violation::kVersionBackwards) << r.explanation;
  EXPECT_THAT(r.explanation, HasSubstr("Set(a)"));
  EXPECT_THAT(r.explanation, HasSubstr("Set(b)"));
}

TEST(RegisterHistoryTest, ASharedVersionIsReported) {
  const RegisterCheck r = Check({Set(1, 2, "a", 5), Set(3, 4, "b", 5)});
  EXPECT_EQ(r.violation, Violation::kVersionBackwards) << r.explanation;
}

TEST(RegisterHistoryTest, ReadOfAValueNeverWrittenIsReported) {
  EXPECT_EQ(Check({Set(1, 2, "a", 1), Get(3, 4, "z", 1)}).violation,
            Violation::kNeverWritten);
  EXPECT_EQ(Check({Set(1, 2, "a", 1), Get(3, 4, "a", 2)}).violation,
            Violation::kNeverWritten)
      << "the right value with another version";
  EXPECT_EQ(Check({Get(1, 2, "a", 1), Set(3, 4, "a", 1)}).violation,
            Violation::kNeverWritten)
      << "read before it was written";
}

TEST(RegisterHistoryTest, MissWithNoDeleteOrExpiryIsReported) {
  const RegisterCheck r = Check({Set(1, 2, "a", 1), Miss(3, 4)});
  EXPECT_EQ(r.violation, Violation::kUnexplainedMiss) << r.explanation;
  // A Delete that returned false is a miss too.
  EXPECT_EQ(Check({Set(1, 2, "a", 1), Del(3, 4, false)}).violation,
            Violation::kUnexplainedMiss);
}

TEST(RegisterHistoryTest, ExpiryBeforeTheDeadlineIsNoExcuse) {
  // The clock reached 1 + 5 only; the TTL was 10.
  const RegisterCheck r = Check({
      Set(1, 2, "a", 1, /*ttl_ms=*/10),
      Advance(3, 4, kClock + 5),
      Miss(5, 6),
  });
  EXPECT_EQ(r.violation, Violation::kUnexplainedMiss) << r.explanation;
}

TEST(RegisterHistoryTest, OneDeleteCannotExplainTwoRemovals) {
  // Each pairwise rule passes (the Delete could precede either miss), but a
  // single removal cannot put both misses in an absent phase when b's
  // write, read in between, must separate them: only the search sees it.
  const RegisterCheck r = Check({
      Set(1, 2, "a", 1),
      Del(3, 30, true),
      Miss(4, 5),
      Set(6, 7, "b", 2),
      Get(8, 9, "b", 2),
      Miss(10, 11),
  });
  EXPECT_FALSE(r.ok());
  EXPECT_THAT(r.explanation, HasSubstr("Get -> miss"));
}

TEST(RegisterHistoryTest, ADeleteThatFoundNothingNeedsAnAbsentState) {
  // Both Deletes claim to have removed a value, but only one Set wrote one
  // in between and nothing overlaps: the second cannot have.
  const RegisterCheck r = Check({
      Set(1, 2, "a", 1),
      Del(3, 4, true),
      Del(5, 6, true),
  });
  EXPECT_EQ(r.violation, Violation::kNotLinearizable) << r.explanation;
  EXPECT_THAT(r.explanation, HasSubstr("[5, 6]"));
}

}  // namespace
}  // namespace furrballs
