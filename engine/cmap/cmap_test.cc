#include "engine/cmap/cmap.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include <gtest/gtest.h>

#include "engine/cmap/internal/cmap_test_peer.h"
#include "engine/common/error.h"
#include "engine/common/hash_pair.h"
#include "engine/common/raw_allocator.h"

namespace furrballs {
namespace {

using cmap_internal::CMapTestPeer;
using cmap_internal::kCtrlDeleted;
using cmap_internal::kCtrlEmpty;
using cmap_internal::kGroupWidth;

struct SmallValue {
  uint64_t id;
  uint64_t check;
};
struct LargeValue {
  uint64_t id;
  uint64_t words[15];
};
static_assert(sizeof(LargeValue) == 128);
// 20 bytes, like the engine's KeyMeta: its last 4 bytes ride in the seq
// word's high half (internal/slot.h, "The tail").
struct TailValue {
  uint32_t id;
  uint32_t words[3];
  uint32_t check;
};
static_assert(sizeof(TailValue) == 20);
static_assert(cmap_internal::SlotArray<SmallValue>::BytesFor(1) == 32 &&
                  cmap_internal::SlotArray<LargeValue>::BytesFor(1) == 144 &&
                  cmap_internal::SlotArray<TailValue>::BytesFor(1) == 32 &&
                  cmap_internal::SlotArray<char[41]>::BytesFor(1) == 56 &&
                  cmap_internal::SlotArray<char[45]>::BytesFor(1) == 64,
              "slots are packed: seq (with a tail of at most 4 bytes), "
              "fingerprint and the value's words");

template <typename V>
V MakeValue(uint64_t id) {
  V v;
  std::memset(&v, 0, sizeof(v));
  v.id = id;
  if constexpr (std::is_same_v<V, SmallValue>) {
    v.check = ~id;
  } else if constexpr (std::is_same_v<V, TailValue>) {
    for (size_t i = 0; i < std::size(v.words); ++i) {
      v.words[i] = static_cast<uint32_t>(id * 31 + i);
    }
    v.check = ~static_cast<uint32_t>(id);
  } else {
    for (size_t i = 0; i < std::size(v.words); ++i) v.words[i] = id * 31 + i;
  }
  return v;
}

template <typename V>
bool IsValueFor(const V& v, uint64_t id) {
  const V expected = MakeValue<V>(id);
  return std::memcmp(&v, &expected, sizeof(V)) == 0;
}

template <typename V, typename G>
struct Config {
  using Value = V;
  using Group = G;
  using Map = CMap<V, G>;
};

// Every test runs on a small and a large value and both group
// implementations.
template <typename C>
class CMapTest : public ::testing::Test {
 protected:
  using Value = typename C::Value;
  using Map = typename C::Map;

  static Value V(uint64_t id) { return MakeValue<Value>(id); }
  static bool Holds(const Map& m, const HashPair& h, uint64_t id) {
    const std::optional<Value> v = m.Find(h);
    return v.has_value() && IsValueFor(*v, id);
  }
};

using Configs = ::testing::Types<
#if defined(__SSE2__)
    Config<SmallValue, GroupSse2>, Config<LargeValue, GroupSse2>,
    Config<TailValue, GroupSse2>,
#endif
    Config<SmallValue, GroupPortable>, Config<LargeValue, GroupPortable>,
    Config<TailValue, GroupPortable>>;
TYPED_TEST_SUITE(CMapTest, Configs);

// A crafted identity: home group `group`, control byte `h2s`, and a unique
// `id` in both halves. Distinct ids give distinct h2, as real keys have.
HashPair Key(size_t group, uint8_t h2s, uint64_t id) {
  return HashPair{(id << 32) | group, (uint64_t{h2s} << 57) | (id + 1)};
}

// TryVisit is one round of Visit: a writer entering the slot while fn runs
// (here fn itself, which holds no lock) makes it kChanged, not a retry.
TYPED_TEST(CMapTest, TryVisitReportsAWriterThatEnteredWhileItRan) {
  typename TestFixture::Map m(100);
  const HashPair h = Key(3, 7, 1);
  using Outcome = typename TestFixture::Map::VisitOutcome;
  int calls = 0;
  EXPECT_EQ(m.TryVisit(h, [&](const auto&) { ++calls; }), Outcome::kAbsent);
  EXPECT_EQ(calls, 0);
  ASSERT_TRUE(m.Set(h, this->V(1)).inserted);
  EXPECT_EQ(m.TryVisit(h, [&](const auto&) { ++calls; }), Outcome::kVisited);
  EXPECT_EQ(m.TryVisit(h,
                       [&](const auto&) {
                         ++calls;
                         ASSERT_EQ(m.Set(h, this->V(2)).err, Error::kOk);
                       }),
            Outcome::kChanged);
  EXPECT_EQ(calls, 2);
  EXPECT_TRUE(this->Holds(m, h, 2));
}

TYPED_TEST(CMapTest, EmptyMapMissesEverything) {
  typename TestFixture::Map m(100);
  ASSERT_TRUE(m.ok());
  const HashPair h = Key(3, 7, 1);
  EXPECT_FALSE(m.Find(h).has_value());
  EXPECT_EQ(m.FindAndEraseByHash(h).err, Error::kKeyNotFound);
  bool called = false;
  EXPECT_EQ(m.UpdateInPlace(h, [&](auto&) { called = true; }),
            Error::kKeyNotFound);
  EXPECT_FALSE(called);
  EXPECT_EQ(m.size(), 0u);
  EXPECT_EQ(m.capacity(), 100u);
}

size_t VmRssBytes() {
  FILE* f = std::fopen("/proc/self/status", "r");
  size_t kb = 0;
  char line[256];
  while (f != nullptr && std::fgets(line, sizeof line, f) != nullptr) {
    if (std::sscanf(line, "VmRSS: %zu kB", &kb) == 1) break;
  }
  if (f != nullptr) std::fclose(f);
  return kb << 10;
}

// From a zeroing allocator a map writes nothing but its SENTINEL group at
// construction (EMPTY control bytes are stored as zeros, group.h), and the
// untouched table works: misses, then holds what is inserted.
TYPED_TEST(CMapTest, AZeroedTableIsEmptyWithoutBeingWritten) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "RSS is meaningless with sanitizer shadow memory";
#endif
  constexpr size_t kCapacity = size_t{24} << 20;  // 32 MiB of control bytes
  const size_t rss_before = VmRssBytes();
  typename TestFixture::Map m(kCapacity, KeyHasher(), RawAllocator::Mapped());
  ASSERT_EQ(m.status(), Error::kOk);
  EXPECT_LT(VmRssBytes(), rss_before + (size_t{4} << 20))
      << "construction touched the control bytes";
  for (uint64_t id = 0; id < 1000; ++id) {
    EXPECT_FALSE(m.Find(Key(id * 7919, 0x11, id)).has_value());
    ASSERT_TRUE(m.Set(Key(id * 7919, 0x11, id), this->V(id)).inserted);
  }
  for (uint64_t id = 0; id < 1000; ++id) {
    EXPECT_TRUE(this->Holds(m, Key(id * 7919, 0x11, id), id)) << id;
  }
}

TYPED_TEST(CMapTest, SetReportsInsertThenUpdate) {
  typename TestFixture::Map m(100);
  const HashPair h = Key(5, 9, 1);
  const CMapSetResult first = m.Set(h, this->V(10));
  EXPECT_EQ(first.err, Error::kOk);
  EXPECT_TRUE(first.inserted);
  EXPECT_TRUE(this->Holds(m, h, 10));

  const CMapSetResult second = m.Set(h, this->V(11));
  EXPECT_EQ(second.err, Error::kOk);
  EXPECT_FALSE(second.inserted);
  EXPECT_TRUE(this->Holds(m, h, 11));
  EXPECT_EQ(m.size(), 1u);
}

TYPED_TEST(CMapTest, StringKeysAreHashedWithTheMapsHasher) {
  typename TestFixture::Map m(100, KeyHasher(42));
  EXPECT_TRUE(m.Set("alpha", this->V(1)).inserted);
  EXPECT_TRUE(m.Set("beta", this->V(2)).inserted);
  EXPECT_TRUE(this->Holds(m, m.hasher().Hash("alpha"), 1));
  EXPECT_TRUE(m.Find("beta").has_value());
  EXPECT_TRUE(IsValueFor(*m.Find("beta"), 2));
  EXPECT_FALSE(m.Find("gamma").has_value());
  EXPECT_EQ(m.UpdateInPlace("alpha", [](auto& v) { v.id = 5; }), Error::kOk);
  EXPECT_EQ(m.Find("alpha")->id, 5u);

  const FindAndEraseResult<typename TestFixture::Value> erased =
      m.FindAndErase("beta");
  EXPECT_EQ(erased.err, Error::kOk);
  ASSERT_TRUE(erased.value.has_value());
  EXPECT_TRUE(IsValueFor(*erased.value, 2));
  EXPECT_FALSE(m.Find("beta").has_value());
}

TYPED_TEST(CMapTest, FindAndEraseReturnsTheValueOnce) {
  typename TestFixture::Map m(100);
  const HashPair a = Key(1, 1, 1), b = Key(1, 1, 2);
  m.Set(a, this->V(100));
  m.Set(b, this->V(200));

  auto erased = m.FindAndEraseByHash(a);
  EXPECT_EQ(erased.err, Error::kOk);
  ASSERT_TRUE(erased.value.has_value());
  EXPECT_TRUE(IsValueFor(*erased.value, 100));
  EXPECT_FALSE(m.Find(a).has_value());
  EXPECT_TRUE(this->Holds(m, b, 200));
  EXPECT_EQ(m.size(), 1u);

  erased = m.FindAndEraseByHash(a);
  EXPECT_EQ(erased.err, Error::kKeyNotFound);
  EXPECT_FALSE(erased.value.has_value());
}

TYPED_TEST(CMapTest, UpdateInPlaceRunsFnOnTheValue) {
  typename TestFixture::Map m(100);
  const HashPair h = Key(2, 3, 1);
  m.Set(h, this->V(1));
  EXPECT_EQ(m.UpdateInPlace(h, [](auto& v) { v = MakeValue<std::decay_t<decltype(v)>>(2); }),
            Error::kOk);
  EXPECT_TRUE(this->Holds(m, h, 2));
  // fn sees the current value.
  uint64_t seen = 0;
  m.UpdateInPlace(h, [&](auto& v) { seen = v.id; });
  EXPECT_EQ(seen, 2u);
  EXPECT_TRUE(this->Holds(m, h, 2));
}

TYPED_TEST(CMapTest, VisitRunsFnOnAStableValue) {
  typename TestFixture::Map m(100);
  const HashPair h = Key(3, 3, 1);
  int calls = 0;
  EXPECT_FALSE(m.Visit(h, [&](const auto&) { ++calls; }));
  EXPECT_EQ(calls, 0);

  m.Set(h, this->V(7));
  uint64_t seen = 0;
  EXPECT_TRUE(m.Visit(h, [&](const auto& v) {
    ++calls;
    seen = v.id;
  }));
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(seen, 7u);
}

// A write to the slot while fn runs makes Visit run fn again on the new
// value; an erase makes it report the key absent.
TYPED_TEST(CMapTest, VisitRerunsFnWhenAWriterInterleaves) {
  typename TestFixture::Map m(100);
  const HashPair h = Key(3, 3, 1);
  m.Set(h, this->V(1));
  std::vector<uint64_t> seen;
  EXPECT_TRUE(m.Visit(h, [&](const auto& v) {
    seen.push_back(v.id);
    if (seen.size() == 1) {
      EXPECT_EQ(m.Set(h, this->V(2)).err, Error::kOk);
    }
  }));
  EXPECT_EQ(seen, (std::vector<uint64_t>{1, 2}));

  int calls = 0;
  EXPECT_FALSE(m.Visit(h, [&](const auto&) {
    ++calls;
    EXPECT_EQ(m.FindAndEraseByHash(h).err, Error::kOk);
  }));
  EXPECT_EQ(calls, 1);
}

// While one writer is inside a slot, every other write to it fails fast.
TYPED_TEST(CMapTest, WritersOfAHeldSlotGetAbandonedSet) {
  typename TestFixture::Map m(100);
  const HashPair h = Key(4, 5, 1), other = Key(4, 5, 2);
  m.Set(h, this->V(1));
  m.Set(other, this->V(7));
  const size_t slot = CMapTestPeer::SlotOf(m, h);
  const uint64_t seq_before = CMapTestPeer::Seq(m, slot);

  EXPECT_EQ(m.UpdateInPlace(h, [&](auto& v) {
              EXPECT_EQ(CMapTestPeer::Seq(m, slot) % 2, 1u) << "odd inside";
              EXPECT_EQ(m.Set(h, this->V(2)).err, Error::kAbandonedSet);
              EXPECT_EQ(m.UpdateInPlace(h, [](auto&) {}), Error::kAbandonedSet);
              const auto erased = m.FindAndEraseByHash(h);
              EXPECT_EQ(erased.err, Error::kAbandonedSet);
              EXPECT_FALSE(erased.value.has_value());
              // Other slots are unaffected.
              EXPECT_EQ(m.Set(other, this->V(8)).err, Error::kOk);
              v = MakeValue<std::decay_t<decltype(v)>>(3);
            }),
            Error::kOk);
  EXPECT_TRUE(this->Holds(m, h, 3));
  EXPECT_TRUE(this->Holds(m, other, 8));
  // The sequence is the word's low half (the high half is a tail value's
  // last bytes, which this write changed).
  EXPECT_EQ(CMapTestPeer::Seq(m, slot) & 0xffffffff, (seq_before + 2) & 0xffffffff)
      << "one writer window, and the abandoned writers left no trace";
}

// An insert whose target slot is locked fails fast and leaves nothing behind.
TYPED_TEST(CMapTest, InsertIntoAHeldFreeSlotIsAbandoned) {
  typename TestFixture::Map m(100);
  const HashPair h = Key(6, 5, 1);
  const size_t target = 6 * kGroupWidth;  // first EMPTY slot of its home
  uint64_t stable;
  ASSERT_TRUE(CMapTestPeer::Lock(m, target, &stable));
  const CMapSetResult r = m.Set(h, this->V(1));
  EXPECT_EQ(r.err, Error::kAbandonedSet);
  EXPECT_FALSE(r.inserted);
  EXPECT_EQ(m.size(), 0u);
  EXPECT_EQ(CMapTestPeer::Ctrl(m, target), kCtrlEmpty);
  CMapTestPeer::Unlock(m, target, stable);

  EXPECT_TRUE(m.Set(h, this->V(1)).inserted);
  EXPECT_EQ(CMapTestPeer::SlotOf(m, h), target);
}

// Two Sets of one absent key race: the first probes and picks the group's
// EMPTY slot; before it claims, a tombstone appears earlier on the path and
// the second Set inserts the key there. The first must notice the other copy
// after its claim (insert step 5) and back out, or the key would exist
// twice and an erase would resurrect the older copy.
TYPED_TEST(CMapTest, InsertBacksOutWhenARacingInsertPlacedTheSameKey) {
  typename TestFixture::Map m(100);
  const HashPair blocker = Key(2, 1, 1), racer = Key(2, 1, 2);
  m.Set(blocker, this->V(1));
  const size_t tombstone = CMapTestPeer::SlotOf(m, blocker);

  const CMapSetResult first =
      CMapTestPeer::SetWithPause(m, racer, this->V(10), [&] {
        ASSERT_EQ(m.FindAndEraseByHash(blocker).err, Error::kOk);
        const CMapSetResult second = m.Set(racer, this->V(20));
        ASSERT_TRUE(second.inserted);
        ASSERT_EQ(CMapTestPeer::SlotOf(m, racer), tombstone);
      });
  EXPECT_EQ(first.err, Error::kAbandonedSet);
  EXPECT_FALSE(first.inserted);

  EXPECT_TRUE(this->Holds(m, racer, 20));
  EXPECT_EQ(m.size(), 1u);
  EXPECT_EQ(m.FindAndEraseByHash(racer).err, Error::kOk);
  EXPECT_EQ(m.FindAndEraseByHash(racer).err, Error::kKeyNotFound)
      << "a second copy survived";
  EXPECT_EQ(CMapTestPeer::CountCtrl(m, cmap_internal::IsOccupied), 0u);
  EXPECT_EQ(m.size(), 0u);
}

TYPED_TEST(CMapTest, SizesItselfToTheFewestGroupsAtMostThreeQuartersFull) {
  for (size_t capacity : {0u, 1u, 12u, 13u, 100u, 384u, 385u, 5000u}) {
    typename TestFixture::Map m(capacity);
    ASSERT_TRUE(m.ok());
    const size_t groups = m.slot_count() / kGroupWidth;
    EXPECT_EQ(m.slot_count() % kGroupWidth, 0u);
    EXPECT_LE(capacity * 4, m.slot_count() * 3) << capacity;
    EXPECT_LT(capacity, m.slot_count());
    if (groups > 1) {
      EXPECT_GT(capacity * 4, (m.slot_count() - kGroupWidth) * 3)
          << "the smallest that fits";
    }
  }
}

TYPED_TEST(CMapTest, CapacityIsEnforcedWithCacheFull) {
  constexpr size_t kCapacity = 20;
  typename TestFixture::Map m(kCapacity);
  for (uint64_t i = 0; i < kCapacity; ++i) {
    ASSERT_TRUE(m.Set(Key(i % 2, 1, i), this->V(i)).inserted) << i;
  }
  EXPECT_EQ(m.size(), kCapacity);
  const CMapSetResult full = m.Set(Key(0, 1, 99), this->V(99));
  EXPECT_EQ(full.err, Error::kCacheFull);
  EXPECT_FALSE(full.inserted);
  EXPECT_FALSE(m.Find(Key(0, 1, 99)).has_value());
  EXPECT_EQ(m.size(), kCapacity);

  // Overwrites still work at capacity.
  EXPECT_EQ(m.Set(Key(1, 1, 3), this->V(33)).err, Error::kOk);
  EXPECT_TRUE(this->Holds(m, Key(1, 1, 3), 33));

  EXPECT_EQ(m.FindAndEraseByHash(Key(0, 1, 4)).err, Error::kOk);
  EXPECT_TRUE(m.Set(Key(0, 1, 99), this->V(99)).inserted);
  EXPECT_EQ(m.Set(Key(0, 1, 100), this->V(100)).err, Error::kCacheFull);
}

TYPED_TEST(CMapTest, ZeroCapacityAdmitsNothing) {
  typename TestFixture::Map m(0);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m.Set(Key(0, 0, 1), this->V(1)).err, Error::kCacheFull);
  EXPECT_EQ(m.size(), 0u);
}

TYPED_TEST(CMapTest, EraseThenInsertLandsInTheTombstone) {
  typename TestFixture::Map m(100);
  const HashPair a = Key(3, 1, 1), b = Key(3, 2, 2), c = Key(3, 3, 3);
  m.Set(a, this->V(1));
  m.Set(b, this->V(2));
  const size_t slot_a = CMapTestPeer::SlotOf(m, a);
  ASSERT_EQ(m.FindAndEraseByHash(a).err, Error::kOk);
  EXPECT_EQ(CMapTestPeer::Ctrl(m, slot_a), kCtrlDeleted);

  EXPECT_TRUE(m.Set(c, this->V(3)).inserted);
  EXPECT_EQ(CMapTestPeer::SlotOf(m, c), slot_a);
  EXPECT_EQ(CMapTestPeer::CountCtrl(m, [](uint8_t x) { return x == kCtrlDeleted; }),
            0u);
}

// The first tombstone on the path wins even over an EMPTY slot in a later
// group, and over EMPTY slots of its own group.
TYPED_TEST(CMapTest, InsertPrefersTheFirstTombstoneOnThePath) {
  typename TestFixture::Map m(192);  // 16 groups
  ASSERT_EQ(m.slot_count(), 16 * kGroupWidth);
  for (uint64_t i = 0; i < kGroupWidth; ++i) m.Set(Key(5, 1, i), this->V(i));
  const HashPair displaced = Key(5, 1, 100);
  m.Set(displaced, this->V(100));
  EXPECT_EQ(CMapTestPeer::SlotOf(m, displaced), 6 * kGroupWidth);

  const size_t hole = CMapTestPeer::SlotOf(m, Key(5, 1, 9));
  ASSERT_EQ(m.FindAndEraseByHash(Key(5, 1, 9)).err, Error::kOk);
  const HashPair next = Key(5, 1, 101);
  m.Set(next, this->V(101));
  EXPECT_EQ(CMapTestPeer::SlotOf(m, next), hole);

  // Within one group: a tombstone after an EMPTY slot still wins.
  const HashPair x = Key(9, 1, 200), y = Key(9, 1, 201), z = Key(9, 1, 202);
  m.Set(x, this->V(1));
  m.Set(y, this->V(2));
  const size_t slot_y = CMapTestPeer::SlotOf(m, y);
  m.FindAndEraseByHash(y);
  m.Set(z, this->V(3));
  EXPECT_EQ(CMapTestPeer::SlotOf(m, z), slot_y);
}

// A full group does not end a probe; the overflow count records who passed.
TYPED_TEST(CMapTest, ProbeCrossesFullGroupsAndTombstones) {
  typename TestFixture::Map m(200);
  for (uint64_t i = 0; i < kGroupWidth; ++i) m.Set(Key(2, 4, i), this->V(i));
  EXPECT_EQ(CMapTestPeer::Overflow(m, 2), 0u);
  const HashPair displaced = Key(2, 4, 50);
  m.Set(displaced, this->V(50));
  EXPECT_EQ(CMapTestPeer::SlotOf(m, displaced) / kGroupWidth, 3u);
  EXPECT_EQ(CMapTestPeer::Overflow(m, 2), 1u);
  EXPECT_TRUE(this->Holds(m, displaced, 50));

  // A tombstone in the full group must not end the probe either.
  m.FindAndEraseByHash(Key(2, 4, 0));
  EXPECT_TRUE(this->Holds(m, displaced, 50));
  EXPECT_EQ(m.Set(displaced, this->V(51)).inserted, false) << "found, not re-inserted";
  EXPECT_TRUE(this->Holds(m, displaced, 51));

  EXPECT_EQ(m.FindAndEraseByHash(displaced).err, Error::kOk);
  EXPECT_EQ(CMapTestPeer::Overflow(m, 2), 0u);
}

TYPED_TEST(CMapTest, MissEndsAtEmptyOrAtAGroupNothingOverflowed) {
  typename TestFixture::Map m(200);
  // Home group with an EMPTY byte: one group.
  EXPECT_EQ(CMapTestPeer::GroupsVisited(m, Key(7, 1, 1)), 1u);

  // A full group (no EMPTY) that no key overflowed: still one group, even
  // after a tombstone appears in it.
  for (uint64_t i = 0; i < kGroupWidth; ++i) m.Set(Key(7, 1, i), this->V(i));
  EXPECT_EQ(CMapTestPeer::GroupsVisited(m, Key(7, 1, 999)), 1u);
  m.FindAndEraseByHash(Key(7, 1, 3));
  m.Set(Key(7, 1, 3), this->V(3));  // back into the tombstone
  EXPECT_EQ(CMapTestPeer::GroupsVisited(m, Key(7, 1, 999)), 1u);

  // Once a key overflows group 7, misses homed there look one group further.
  m.Set(Key(7, 1, 20), this->V(20));
  EXPECT_EQ(CMapTestPeer::GroupsVisited(m, Key(7, 1, 999)), 2u);
}

TYPED_TEST(CMapTest, ProbeWrapsAroundFromTheLastGroupToTheFirst) {
  typename TestFixture::Map m(200);
  const size_t groups = m.slot_count() / kGroupWidth;
  const size_t last = groups - 1;
  for (uint64_t i = 0; i < kGroupWidth; ++i) m.Set(Key(last, 2, i), this->V(i));
  const HashPair wrapped = Key(last, 2, 77);
  EXPECT_TRUE(m.Set(wrapped, this->V(77)).inserted);
  EXPECT_EQ(CMapTestPeer::SlotOf(m, wrapped) / kGroupWidth, 0u);
  EXPECT_TRUE(this->Holds(m, wrapped, 77));
  EXPECT_EQ(CMapTestPeer::Overflow(m, last), 1u);
  EXPECT_EQ(m.FindAndEraseByHash(wrapped).err, Error::kOk);
  EXPECT_EQ(CMapTestPeer::Overflow(m, last), 0u);
  EXPECT_FALSE(m.Find(wrapped).has_value());
  EXPECT_TRUE(CMapTestPeer::SentinelIntact(m));
}

// Equal control bytes (h2 >> 57) never confuse keys: the full fingerprint
// decides.
TYPED_TEST(CMapTest, ControlByteCollisionsAreResolvedByTheFingerprint) {
  typename TestFixture::Map m(200);
  std::vector<HashPair> keys;
  for (uint64_t i = 0; i < 40; ++i) keys.push_back(Key(4, 0x55, i));
  for (uint64_t i = 0; i < keys.size(); ++i) {
    ASSERT_TRUE(m.Set(keys[i], this->V(i)).inserted);
  }
  for (uint64_t i = 0; i < keys.size(); ++i) {
    EXPECT_TRUE(this->Holds(m, keys[i], i)) << i;
  }
  EXPECT_FALSE(m.Find(Key(4, 0x55, 1000)).has_value());
  for (uint64_t i = 0; i < keys.size(); i += 2) m.FindAndEraseByHash(keys[i]);
  for (uint64_t i = 0; i < keys.size(); ++i) {
    EXPECT_EQ(m.Find(keys[i]).has_value(), i % 2 == 1) << i;
  }
}

// Erase+insert at full capacity, far longer than it takes the report's
// design to turn every EMPTY into a tombstone. Inserts must keep succeeding,
// and a miss must keep walking only the groups displaced keys cross.
TYPED_TEST(CMapTest, ChurnAtFullCapacityNeitherFillsUpNorSlowsMisses) {
  constexpr size_t kCapacity = 1536;  // exactly 3/4 of 128 groups
  typename TestFixture::Map m(kCapacity, KeyHasher(7));
  ASSERT_EQ(m.slot_count(), 2048u);
  std::mt19937_64 rng(3);
  std::vector<std::pair<HashPair, uint64_t>> live;
  uint64_t next_id = 0;
  auto insert_new = [&] {
    const uint64_t id = next_id++;
    const HashPair h = m.hasher().Hash("key" + std::to_string(id));
    const CMapSetResult r = m.Set(h, this->V(id));
    ASSERT_EQ(r.err, Error::kOk);
    ASSERT_TRUE(r.inserted);
    live.emplace_back(h, id);
  };
  for (size_t i = 0; i < kCapacity; ++i) insert_new();
  for (size_t op = 0; op < 40 * kCapacity; ++op) {
    const size_t victim = rng() % live.size();
    ASSERT_EQ(m.FindAndEraseByHash(live[victim].first).err, Error::kOk);
    live[victim] = live.back();
    live.pop_back();
    insert_new();
  }
  EXPECT_EQ(m.size(), kCapacity);
  EXPECT_EQ(CMapTestPeer::CountCtrl(m, cmap_internal::IsOccupied), kCapacity);
  for (const auto& [h, id] : live) ASSERT_TRUE(this->Holds(m, h, id));

  size_t visited = 0;
  constexpr int kMisses = 2000;
  for (int i = 0; i < kMisses; ++i) {
    visited += CMapTestPeer::GroupsVisited(m, HashPair{rng(), rng()});
  }
  const double mean = static_cast<double>(visited) / kMisses;
  // Measured 2.9. Without overflow counts every EMPTY is gone by now and
  // this is 128, the whole table.
  EXPECT_LT(mean, 8.0);
  this->RecordProperty("mean_groups_per_miss", std::to_string(mean));
  EXPECT_TRUE(CMapTestPeer::SentinelIntact(m));
}

// Single-threaded differential test against std::unordered_map on a small
// table with crafted collisions, wraparound and tombstones.
TYPED_TEST(CMapTest, AgreesWithAReferenceMap) {
  constexpr size_t kCapacity = 100;
  typename TestFixture::Map m(kCapacity);
  const size_t groups = m.slot_count() / kGroupWidth;
  std::unordered_map<uint64_t, uint64_t> ref;  // key id -> value id
  std::mt19937_64 rng(11);
  // 300 key ids over few groups and few control bytes.
  auto key = [&](uint64_t id) { return Key(id % 3 == 0 ? groups - 1 : id % 2, id % 4, id); };
  for (int op = 0; op < 200000; ++op) {
    const uint64_t id = rng() % 300;
    const HashPair h = key(id);
    switch (rng() % 4) {
      case 0: {
        const auto v = m.Find(h);
        const auto it = ref.find(id);
        ASSERT_EQ(v.has_value(), it != ref.end());
        if (v) {
          ASSERT_TRUE(IsValueFor(*v, it->second));
        }
        break;
      }
      case 1: {
        const uint64_t value = rng();
        const CMapSetResult r = m.Set(h, this->V(value));
        if (ref.count(id)) {
          ASSERT_EQ(r.err, Error::kOk);
          ASSERT_FALSE(r.inserted);
          ref[id] = value;
        } else if (ref.size() == kCapacity) {
          ASSERT_EQ(r.err, Error::kCacheFull);
        } else {
          ASSERT_EQ(r.err, Error::kOk);
          ASSERT_TRUE(r.inserted);
          ref[id] = value;
        }
        break;
      }
      case 2: {
        const auto r = m.FindAndEraseByHash(h);
        const auto it = ref.find(id);
        if (it == ref.end()) {
          ASSERT_EQ(r.err, Error::kKeyNotFound);
        } else {
          ASSERT_EQ(r.err, Error::kOk);
          ASSERT_TRUE(IsValueFor(*r.value, it->second));
          ref.erase(it);
        }
        break;
      }
      default: {
        const uint64_t value = rng();
        const Error err = m.UpdateInPlace(h, [&](auto& v) {
          v = MakeValue<std::decay_t<decltype(v)>>(value);
        });
        if (ref.count(id)) {
          ASSERT_EQ(err, Error::kOk);
          ref[id] = value;
        } else {
          ASSERT_EQ(err, Error::kKeyNotFound);
        }
      }
    }
    ASSERT_EQ(m.size(), ref.size());
  }
  EXPECT_TRUE(CMapTestPeer::SentinelIntact(m));
  // Every overflow count is exactly the number of live keys passing by.
  std::vector<uint32_t> expected(groups, 0);
  for (const auto& [id, value] : ref) {
    const HashPair h = key(id);
    const size_t at = CMapTestPeer::SlotOf(m, h) / kGroupWidth;
    for (cmap_internal::ProbeSeq seq(h.h1, cmap_internal::GroupRange(groups));
         seq.group() != at;
         seq.Next()) {
      ++expected[seq.group()];
    }
  }
  for (size_t g = 0; g < groups; ++g) {
    EXPECT_EQ(CMapTestPeer::Overflow(m, g), expected[g]) << g;
  }
}

// Counts the calls and checks what comes back.
struct CountingAllocator {
  int allocations = 0;
  int deallocations = 0;
  size_t bytes_live = 0;
  int fail_at = -1;  // fail the n-th allocation (0-based); -1 = never

  RawAllocator Get() {
    return RawAllocator{
        [](void* ctx, size_t bytes) -> void* {
          auto* self = static_cast<CountingAllocator*>(ctx);
          if (self->allocations++ == self->fail_at) return nullptr;
          self->bytes_live += bytes;
          return RawAllocator::Default().Allocate(bytes);
        },
        [](void* ctx, void* p, size_t bytes) {
          auto* self = static_cast<CountingAllocator*>(ctx);
          ++self->deallocations;
          self->bytes_live -= bytes;
          RawAllocator::Default().Deallocate(p, bytes);
        },
        this};
  }
};

TYPED_TEST(CMapTest, UsesTheCallersAllocatorForBothArrays) {
  CountingAllocator counter;
  {
    typename TestFixture::Map m(1000, KeyHasher(), counter.Get());
    ASSERT_TRUE(m.ok());
    EXPECT_EQ(counter.allocations, 2);
    EXPECT_EQ(counter.bytes_live, TestFixture::Map::BytesFor(1000));
    // Exactly the packed slots (seq, fingerprint, value words) and one
    // control byte each, the sentinel group and the overflow counts: no
    // padding per slot.
    const size_t slot_bytes =
        16 + cmap_internal::kValueWords<typename TestFixture::Value> * 8;
    EXPECT_GE(counter.bytes_live, m.slot_count() * (slot_bytes + 1));
    EXPECT_LT(counter.bytes_live, m.slot_count() * (slot_bytes + 1) + 4096);
    for (uint64_t i = 0; i < 1000; ++i) m.Set(Key(i, 1, i), this->V(i));
    EXPECT_EQ(counter.allocations, 2) << "no allocation after construction";
  }
  EXPECT_EQ(counter.deallocations, 2);
  EXPECT_EQ(counter.bytes_live, 0u);
}

TYPED_TEST(CMapTest, AllocationFailureLeavesAnInertMap) {
  for (int fail_at : {0, 1}) {
    CountingAllocator counter;
    counter.fail_at = fail_at;
    {
      typename TestFixture::Map m(1000, KeyHasher(), counter.Get());
      EXPECT_FALSE(m.ok());
      EXPECT_EQ(m.status(), Error::kAllocationFailed);
      EXPECT_EQ(m.slot_count(), 0u);
      const HashPair h = Key(0, 1, 1);
      EXPECT_FALSE(m.Find(h).has_value());
      const CMapSetResult r = m.Set(h, this->V(1));
      EXPECT_EQ(r.err, Error::kAllocationFailed);
      EXPECT_FALSE(r.inserted);
      EXPECT_EQ(m.FindAndEraseByHash(h).err, Error::kKeyNotFound);
      EXPECT_EQ(m.UpdateInPlace(h, [](auto&) {}), Error::kKeyNotFound);
      EXPECT_EQ(m.size(), 0u);
    }
    EXPECT_EQ(counter.bytes_live, 0u) << "the first array is returned";
  }
}

TYPED_TEST(CMapTest, CapacityBeyondTheMaximumIsRejectedWithoutAllocating) {
  CountingAllocator counter;
  typename TestFixture::Map m(TestFixture::Map::kMaxCapacity + 1, KeyHasher(),
                              counter.Get());
  EXPECT_EQ(m.status(), Error::kInvalidArgument);
  EXPECT_EQ(counter.allocations, 0);
  EXPECT_FALSE(m.Find(Key(0, 0, 0)).has_value());
}

// The sequence is the seq word's low half: its wrap from 2^32 - 2 (to 2:
// sequence 0 is kept for slots never written, slot.h) must neither carry
// into the value's tail in the high half nor lose it, and a Find across the
// wrap reads the value whole.
TEST(CMapValueTest, SequenceWrapKeepsTheTail) {
  CMap<TailValue> m(10);
  const HashPair h = Key(0, 9, 1);
  ASSERT_TRUE(m.Set(h, MakeValue<TailValue>(1)).inserted);
  const size_t slot = CMapTestPeer::SlotOf(m, h);
  const uint64_t tail = CMapTestPeer::Seq(m, slot) >> 32;
  EXPECT_EQ(tail, ~uint32_t{1}) << "TailValue::check is the tail";
  CMapTestPeer::SetSequence(m, slot, 0xfffffffe);
  EXPECT_EQ(m.UpdateInPlace(h, [](TailValue& v) { v = MakeValue<TailValue>(2); }),
            Error::kOk);
  EXPECT_EQ(CMapTestPeer::Seq(m, slot), uint64_t{~uint32_t{2}} << 32 | 2)
      << "sequence wrapped past 0 to 2, the new tail above it";
  const std::optional<TailValue> got = m.Find(h);
  ASSERT_TRUE(got.has_value());
  EXPECT_TRUE(IsValueFor(*got, 2));
  // And once more, a plain overwrite and an erase from the wrapped sequence.
  EXPECT_EQ(m.Set(h, MakeValue<TailValue>(3)).err, Error::kOk);
  EXPECT_EQ(CMapTestPeer::Seq(m, slot) & 0xffffffff, 4u);
  const FindAndEraseResult<TailValue> erased = m.FindAndEraseByHash(h);
  ASSERT_EQ(erased.err, Error::kOk);
  EXPECT_TRUE(IsValueFor(*erased.value, 3));
  EXPECT_EQ(CMapTestPeer::Seq(m, slot), 6u) << "an erased slot has no tail";
}

// Values whose size is not a multiple of 8 round-trip exactly.
TEST(CMapValueTest, OddSizedValuesRoundTrip) {
  struct Odd {
    char bytes[13];
  };
  CMap<Odd> m(10);
  Odd v;
  for (int i = 0; i < 13; ++i) v.bytes[i] = static_cast<char>('a' + i);
  m.Set(HashPair{1, 2}, v);
  const std::optional<Odd> got = m.Find(HashPair{1, 2});
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(std::memcmp(got->bytes, v.bytes, 13), 0);
}

}  // namespace
}  // namespace furrballs
