#include "engine/cmap/internal/group.h"

#include <array>
#include <cstdint>
#include <random>
#include <set>
#include <vector>

#include <gtest/gtest.h>

namespace furrballs::cmap_internal {
namespace {

using Ctrl = std::array<uint8_t, kGroupWidth>;

// A group's bytes as the table stores them (group.h, "Stored form"): what a
// Group is built from.
struct alignas(kGroupWidth) StoredGroup {
  explicit StoredGroup(const Ctrl& ctrl) {
    for (size_t i = 0; i < kGroupWidth; ++i) bytes[i] = StoredCtrl(ctrl[i]);
  }
  const uint8_t* data() const { return bytes.data(); }
  Ctrl bytes;
};

// What every Group must compute, one byte at a time.
template <typename Pred>
uint32_t Reference(const Ctrl& ctrl, Pred pred) {
  uint32_t mask = 0;
  for (size_t i = 0; i < kGroupWidth; ++i) {
    if (pred(ctrl[i])) mask |= 1u << i;
  }
  return mask;
}

// Every byte value that can occur in a ctrl array, in roughly equal shares.
uint8_t ReachableCtrl(std::mt19937& rng) {
  switch (rng() % 4) {
    case 0: return kCtrlEmpty;
    case 1: return kCtrlDeleted;
    case 2: return kCtrlSentinel;
    default: return static_cast<uint8_t>(rng() % 0x80);  // OCCUPIED
  }
}

template <typename G>
class GroupTest : public ::testing::Test {};

#if defined(__SSE2__)
using GroupTypes = ::testing::Types<GroupPortable, GroupSse2>;
#else
using GroupTypes = ::testing::Types<GroupPortable>;
#endif
TYPED_TEST_SUITE(GroupTest, GroupTypes);

TYPED_TEST(GroupTest, MasksMatchBytewiseReference) {
  std::mt19937 rng(1);
  for (int iter = 0; iter < 20000; ++iter) {
    alignas(kGroupWidth) Ctrl ctrl;
    for (auto& c : ctrl) c = ReachableCtrl(rng);
    const TypeParam g(StoredGroup(ctrl).data());
    const uint8_t h2s = static_cast<uint8_t>(rng() % 0x80);
    EXPECT_EQ(g.Match(h2s).mask(),
              Reference(ctrl, [h2s](uint8_t c) { return c == h2s; }));
    EXPECT_EQ(g.MaskEmpty().mask(),
              Reference(ctrl, [](uint8_t c) { return c == kCtrlEmpty; }));
    EXPECT_EQ(g.MaskDeleted().mask(),
              Reference(ctrl, [](uint8_t c) { return c == kCtrlDeleted; }));
    EXPECT_EQ(g.MaskFree().mask(), Reference(ctrl, IsFree));
  }
}

// Match, MaskEmpty and MaskDeleted are exact even for the byte values that
// cannot occur (MaskFree's answer for 0x81..0xFD is unspecified).
TYPED_TEST(GroupTest, ExactMatchesOnArbitraryBytes) {
  std::mt19937 rng(2);
  for (int iter = 0; iter < 20000; ++iter) {
    alignas(kGroupWidth) Ctrl ctrl;
    for (auto& c : ctrl) c = static_cast<uint8_t>(rng());
    const TypeParam g(StoredGroup(ctrl).data());
    const uint8_t h2s = static_cast<uint8_t>(rng() % 0x80);
    EXPECT_EQ(g.Match(h2s).mask(),
              Reference(ctrl, [h2s](uint8_t c) { return c == h2s; }));
    EXPECT_EQ(g.MaskEmpty().mask(),
              Reference(ctrl, [](uint8_t c) { return c == kCtrlEmpty; }));
    EXPECT_EQ(g.MaskDeleted().mask(),
              Reference(ctrl, [](uint8_t c) { return c == kCtrlDeleted; }));
  }
}

TYPED_TEST(GroupTest, EveryPositionAndEveryH2Short) {
  for (size_t pos = 0; pos < kGroupWidth; ++pos) {
    for (int h = 0; h < 0x80; ++h) {
      alignas(kGroupWidth) Ctrl ctrl;
      ctrl.fill(kCtrlDeleted);
      ctrl[pos] = static_cast<uint8_t>(h);
      const TypeParam g(StoredGroup(ctrl).data());
      EXPECT_EQ(g.Match(static_cast<uint8_t>(h)).mask(), 1u << pos);
      EXPECT_EQ(g.MaskFree().mask(), 0xFFFFu & ~(1u << pos));
      EXPECT_FALSE(g.MaskEmpty());
    }
  }
}

TYPED_TEST(GroupTest, SentinelGroupMatchesNothing) {
  alignas(kGroupWidth) Ctrl ctrl;
  ctrl.fill(kCtrlSentinel);
  const TypeParam g(StoredGroup(ctrl).data());
  for (int h = 0; h < 0x80; ++h) EXPECT_FALSE(g.Match(static_cast<uint8_t>(h)));
  EXPECT_FALSE(g.MaskEmpty());
  EXPECT_FALSE(g.MaskDeleted());
  EXPECT_FALSE(g.MaskFree());
}

TEST(BitMaskTest, IteratesSetBitsInOrder) {
  std::vector<uint32_t> seen;
  for (uint32_t i : BitMask(0b1000'0000'0010'0101)) seen.push_back(i);
  EXPECT_EQ(seen, (std::vector<uint32_t>{0, 2, 5, 15}));
  EXPECT_FALSE(BitMask(0));
  EXPECT_EQ(BitMask(0b1000).LowestBitSet(), 3u);
}

TEST(LoadCtrlWordsTest, ByteIOfTheGroupIsByteIOfTheWords) {
  alignas(kGroupWidth) Ctrl ctrl;
  for (size_t i = 0; i < kGroupWidth; ++i) ctrl[i] = static_cast<uint8_t>(i);
  const CtrlWords w = LoadCtrlWords(ctrl.data());
  EXPECT_EQ(w.lo, 0x0706050403020100u);
  EXPECT_EQ(w.hi, 0x0F0E0D0C0B0A0908u);
}

// A zeroed table is all EMPTY without a byte written: the reason for the
// stored form.
TYPED_TEST(GroupTest, ZeroBytesAreAnEmptyGroup) {
  alignas(kGroupWidth) const Ctrl zeros{};
  const TypeParam g(zeros.data());
  EXPECT_EQ(g.MaskEmpty().mask(), 0xFFFFu);
  EXPECT_EQ(g.MaskFree().mask(), 0xFFFFu);
  for (int h = 0; h < 0x80; ++h) EXPECT_FALSE(g.Match(static_cast<uint8_t>(h)));
}

TEST(GroupRangeTest, HomeIsTheLow32BitsOfH1ModuloTheGroupCount) {
  for (size_t groups : {size_t{1}, size_t{2}, size_t{3}, size_t{7},
                        size_t{1000}, size_t{65537}, size_t{1} << 28}) {
    const GroupRange range(groups);
    for (uint64_t h1 : {uint64_t{0}, uint64_t{5}, uint64_t{999},
                        uint64_t{0xdeadbeefcafef00d}, ~uint64_t{0}}) {
      EXPECT_EQ(range.Home(h1), static_cast<uint32_t>(h1) % groups)
          << groups << " " << h1;
    }
  }
}

TEST(ProbeSeqTest, VisitsEveryGroupOnceStartingAtHome) {
  for (size_t groups : {1u, 2u, 3u, 8u, 13u, 64u}) {
    for (uint64_t h1 : {uint64_t{0}, uint64_t{5}, ~uint64_t{0}}) {
      ProbeSeq seq(h1, GroupRange(groups));
      EXPECT_EQ(seq.group(), static_cast<uint32_t>(h1) % groups);
      std::set<size_t> visited;
      for (size_t n = 0; n < groups; ++n, seq.Next()) {
        EXPECT_EQ(seq.index(), n);
        visited.insert(seq.group());
      }
      EXPECT_EQ(visited.size(), groups);
    }
  }
}

}  // namespace
}  // namespace furrballs::cmap_internal
