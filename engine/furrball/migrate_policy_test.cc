#include "engine/furrball/migrate_policy.h"

#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

namespace furrballs::furrball_internal {
namespace {

using P = SimpleMigratePolicy;

uint8_t Replay(uint8_t b, int local, int remote) {
  for (int i = 0; i < local; ++i) b = P::Record(b, true);
  for (int i = 0; i < remote; ++i) b = P::Record(b, false);
  return b;
}

TEST(SimpleMigratePolicyTest, CountersPackIntoOneByte) {
  for (int l = 0; l <= 15; ++l) {
    for (int r = 0; r <= 15; ++r) {
      const uint8_t b = P::Pack(l, r);
      EXPECT_EQ(P::Local(b), l);
      EXPECT_EQ(P::Remote(b), r);
    }
  }
}

TEST(SimpleMigratePolicyTest, CountsEachSide) {
  const uint8_t b = Replay(Replay(0, 0, 1), 3, 4);
  EXPECT_EQ(P::Local(b), 3);
  EXPECT_EQ(P::Remote(b), 5);
}

TEST(SimpleMigratePolicyTest, SaturationHalvesBothCounters) {
  uint8_t b = P::Pack(6, 15);
  b = P::Record(b, false);
  EXPECT_EQ(P::Local(b), 3);
  EXPECT_EQ(P::Remote(b), 8) << "halved to 7, then this read";
  b = P::Pack(15, 9);
  b = P::Record(b, true);
  EXPECT_EQ(P::Local(b), 8);
  EXPECT_EQ(P::Remote(b), 4);
}

TEST(SimpleMigratePolicyTest, NeverOverflows) {
  uint8_t b = 0;
  for (int i = 0; i < 1000; ++i) {
    b = P::Record(b, i % 3 != 0);
    ASSERT_LE(P::Local(b), 15);
    ASSERT_LE(P::Remote(b), 15);
  }
}

TEST(SimpleMigratePolicyTest, LocalReadsCountOnlyAgainstRemoteOnes) {
  // No write for a key read only on its own node.
  EXPECT_EQ(P::Record(P::Pack(0, 0), true), P::Pack(0, 0));
  EXPECT_EQ(P::Record(P::Pack(15, 0), true), P::Pack(15, 0));
  EXPECT_EQ(P::Record(P::Pack(8, 0), true), P::Pack(8, 0));
  // Once it has remote reads, local ones weigh against them.
  EXPECT_EQ(P::Record(P::Pack(3, 1), true), P::Pack(4, 1));
  EXPECT_EQ(P::Record(P::Pack(0, 0), false), P::Pack(0, 1));
}

TEST(SimpleMigratePolicyTest, DecayForgetsOldLocalReads) {
  // A key read mostly locally for a long time, then only remotely, moves:
  // decay halves the old local count each time the remote count saturates.
  uint8_t b = P::Pack(0, 1);
  for (int i = 0; i < 1000; ++i) b = P::Record(b, i % 10 != 0);
  ASSERT_FALSE(P::ShouldMove(b));
  int remote_reads = 0;
  while (!P::ShouldMove(b)) {
    b = P::Record(b, false);
    ASSERT_LT(++remote_reads, 64) << "decay should forget the local reads";
  }
  EXPECT_GE(remote_reads, P::kMoveRemote);
}

TEST(SimpleMigratePolicyTest, DecidesWhenRemoteDominates) {
  EXPECT_FALSE(P::ShouldMove(P::Pack(0, 7))) << "below kMoveRemote";
  EXPECT_TRUE(P::ShouldMove(P::Pack(0, 8)));
  EXPECT_TRUE(P::ShouldMove(P::Pack(4, 8)));
  EXPECT_FALSE(P::ShouldMove(P::Pack(5, 8))) << "remote < 2 x local";
  EXPECT_FALSE(P::ShouldMove(P::Pack(8, 15)));
  EXPECT_FALSE(P::ShouldMove(P::Pack(15, 15)));
}

TEST(SimpleMigratePolicyTest, BalancedReadsNeverMove) {
  // Alternating reads from the two sides, from a new key and from every
  // state a key can arrive with after a move: the key stays (no ping-pong).
  std::vector<uint8_t> starts = {0};
  for (int b = 0; b < 256; ++b) {
    if (P::ShouldMove(b)) starts.push_back(P::AfterMove(b));
  }
  for (const uint8_t start : starts) {
    for (const bool local_first : {true, false}) {
      uint8_t b = start;
      for (int i = 0; i < 200; ++i) {
        b = P::Record(b, (i % 2 == 0) == local_first);
        ASSERT_FALSE(P::ShouldMove(b))
            << "start " << int{start} << " read " << i;
      }
    }
  }
}

TEST(SimpleMigratePolicyTest, AMovedKeyNeedsNewEvidenceToMoveBack) {
  // The reads that moved a key are local on its new node.
  const uint8_t moved = P::AfterMove(P::Pack(2, 8));
  EXPECT_EQ(P::Local(moved), 8);
  EXPECT_EQ(P::Remote(moved), 2);
  EXPECT_FALSE(P::ShouldMove(moved));
  // Two reads in three still from the new node do not bring it back...
  uint8_t b = moved;
  for (int i = 0; i < 300; ++i) {
    b = P::Record(b, i % 3 != 0);
    ASSERT_FALSE(P::ShouldMove(b)) << i;
  }
  // ... only a shift to the old node does, after at least kMoveRemote reads.
  b = moved;
  int reads = 0;
  while (!P::ShouldMove(b)) {
    b = P::Record(b, false);
    ++reads;
  }
  EXPECT_GE(reads, P::kMoveRemote);
}

}  // namespace
}  // namespace furrballs::furrball_internal
