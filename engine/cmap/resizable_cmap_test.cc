// Unit tests for ResizableCMap: growth from empty, full and tombstoned
// tables, shrinks (toward a table just big enough, with admission against
// the smaller capacity, and the big table's pages given back), every key readable with its latest value at every step of a
// migration, Set/erase/UpdateInPlace while growing, admission across both
// tables, refused growths, and released memory (RSS falls; a stale probe of
// the released table misses). Single-threaded; resizable_cmap_stress_test
// races readers against growth.
#include "engine/cmap/resizable_cmap.h"

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include <gtest/gtest.h>

#include "engine/cmap/internal/cmap_test_peer.h"
#include "engine/cmap/internal/test_meta.h"
#include "engine/common/error.h"
#include "engine/common/hash_pair.h"
#include "engine/common/proc_status_testing.h"
#include "engine/common/raw_allocator.h"

namespace furrballs {
namespace {

using cmap_internal::CMapTestPeer;

using Meta = cmap_internal::TestMeta;
using cmap_internal::Mix;

Meta MakeMeta(uint64_t id, uint64_t version) {
  return cmap_internal::MakeTestMeta(static_cast<uint32_t>(id),
                                     static_cast<uint32_t>(version));
}

HashPair Key(uint64_t id) { return HashPair{Mix(id), Mix(id ^ 0x5555)}; }

using Map = ResizableCMap<Meta>;

// The map must answer exactly as `model` (key id -> version) for ids in
// [0, ids).
void ExpectMatches(const Map& m, const std::map<uint64_t, uint64_t>& model,
                   uint64_t ids) {
  for (uint64_t id = 0; id < ids; ++id) {
    const std::optional<Meta> got = m.Find(Key(id));
    const auto it = model.find(id);
    if (it == model.end()) {
      ASSERT_FALSE(got.has_value()) << "id " << id << " should be absent";
    } else {
      ASSERT_TRUE(got.has_value()) << "id " << id << " missing";
      ASSERT_EQ(got->id, id);
      ASSERT_EQ(got->version, it->second) << "id " << id;
    }
  }
  ASSERT_EQ(m.size(), model.size());
}

// Inserts ids [0, n) at version 1, noting them in `model` if given.
void Fill(Map& m, uint64_t n, std::map<uint64_t, uint64_t>* model = nullptr) {
  for (uint64_t id = 0; id < n; ++id) {
    ASSERT_TRUE(m.Set(Key(id), MakeMeta(id, 1)).inserted) << id;
    if (model != nullptr) (*model)[id] = 1;
  }
}

// Where a key is while growing: 'o'ld table, 'n'ew table, or '-' neither.
char WhereIs(const Map& m, uint64_t id) {
  const HashPair k = CMapTestPeer::TableKey<Map>(Key(id));
  const auto* old = CMapTestPeer::OldTable(m);
  if (old != nullptr && old->Find(k).has_value()) return 'o';
  if (CMapTestPeer::CurrentTable(m)->Find(k).has_value()) return 'n';
  return '-';
}

TEST(ResizableCMapTest, GrowsWhileEmpty) {
  Map m(16, RawAllocator::Default());
  ASSERT_TRUE(m.ok());
  EXPECT_FALSE(m.growing());
  ASSERT_EQ(m.BeginGrow(Map::AllocateTable(32, RawAllocator::Default())),
            Error::kOk);
  EXPECT_TRUE(m.growing());
  EXPECT_EQ(m.capacity(), 32u);
  EXPECT_EQ(m.MigrateSome(64), 0u);
  EXPECT_FALSE(m.growing());
  Fill(m, 32);
  EXPECT_EQ(m.Set(Key(32), MakeMeta(32, 1)).err, Error::kCacheFull);
  EXPECT_EQ(m.size(), 32u);
  EXPECT_EQ(m.ReleaseRetired(), 0u) << "the default allocator keeps memory";
}

// A full table grows; at every step of the migration (7 keys at a time)
// every key reads its value, and the keys left in the old table shrink to 0.
TEST(ResizableCMapTest, GrowsWhenFullEveryKeyReadableAtEveryStep) {
  Map m(100, RawAllocator::Default());
  std::map<uint64_t, uint64_t> model;
  for (uint64_t id = 0; id < 100; ++id) {
    ASSERT_TRUE(m.Set(Key(id), MakeMeta(id, id + 1)).inserted);
    model[id] = id + 1;
  }
  ASSERT_EQ(m.Set(Key(100), MakeMeta(100, 1)).err, Error::kCacheFull);
  ASSERT_EQ(m.BeginGrow(Map::AllocateTable(200, RawAllocator::Default())),
            Error::kOk);
  EXPECT_EQ(m.capacity(), 200u);
  ExpectMatches(m, model, 120);
  size_t left = 100;
  int calls = 0;
  while (m.growing()) {
    const size_t now = m.MigrateSome(7);
    ASSERT_LE(now, left);
    ASSERT_GE(now + 7, left) << "moved more than asked";
    left = now;
    ++calls;
    ExpectMatches(m, model, 120);
  }
  EXPECT_EQ(left, 0u);
  EXPECT_EQ(calls, 15) << "100 keys, 7 a call";
  for (uint64_t id = 100; id < 200; ++id) {
    ASSERT_TRUE(m.Set(Key(id), MakeMeta(id, 1)).inserted);
    model[id] = 1;
  }
  EXPECT_EQ(m.Set(Key(200), MakeMeta(200, 1)).err, Error::kCacheFull);
  ExpectMatches(m, model, 210);
}

// Tombstones in the old table are skipped, erased keys stay erased.
TEST(ResizableCMapTest, GrowsWithDeletedSlots) {
  Map m(64, RawAllocator::Default());
  std::map<uint64_t, uint64_t> model;
  Fill(m, 64, &model);
  for (uint64_t id = 0; id < 64; id += 2) {
    ASSERT_EQ(m.FindAndEraseByHash(Key(id)).err, Error::kOk);
    model.erase(id);
  }
  ASSERT_EQ(m.BeginGrow(Map::AllocateTable(128, RawAllocator::Default())),
            Error::kOk);
  while (m.MigrateSome(5) > 0) ExpectMatches(m, model, 64);
  ExpectMatches(m, model, 64);
}

// While growing: an overwrite updates the key where it is, an insert goes
// to the new table, an erase removes from either, and an erased key that
// comes back lands in the new table.
TEST(ResizableCMapTest, SetAndEraseWhileGrowing) {
  Map m(64, RawAllocator::Default());
  std::map<uint64_t, uint64_t> model;
  Fill(m, 64, &model);
  ASSERT_EQ(m.BeginGrow(Map::AllocateTable(256, RawAllocator::Default())),
            Error::kOk);
  m.MigrateSome(20);
  std::vector<uint64_t> in_old, in_new;
  for (uint64_t id = 0; id < 64; ++id) {
    (WhereIs(m, id) == 'o' ? in_old : in_new).push_back(id);
  }
  ASSERT_EQ(in_new.size(), 20u);
  ASSERT_EQ(in_old.size(), 44u);

  // Overwrites stay where the key is.
  for (uint64_t id : {in_old[0], in_new[0]}) {
    const char before = WhereIs(m, id);
    const CMapSetResult r = m.Set(Key(id), MakeMeta(id, 7));
    ASSERT_EQ(r.err, Error::kOk);
    EXPECT_FALSE(r.inserted);
    EXPECT_EQ(WhereIs(m, id), before);
    model[id] = 7;
  }
  // Erases from either table.
  for (uint64_t id : {in_old[1], in_new[1]}) {
    const FindAndEraseResult<Meta> r = m.FindAndEraseByHash(Key(id));
    ASSERT_EQ(r.err, Error::kOk);
    EXPECT_EQ(r.value->id, id);
    EXPECT_EQ(WhereIs(m, id), '-');
    model.erase(id);
  }
  EXPECT_EQ(m.FindAndEraseByHash(Key(in_old[1])).err, Error::kKeyNotFound);
  // Inserts, new keys and returning ones, go to the new table.
  for (uint64_t id : {uint64_t{1000}, in_old[1]}) {
    ASSERT_TRUE(m.Set(Key(id), MakeMeta(id, 9)).inserted);
    EXPECT_EQ(WhereIs(m, id), 'n');
    model[id] = 9;
  }
  ExpectMatches(m, model, 1001);
  while (m.MigrateSome(16) > 0) ExpectMatches(m, model, 1001);
  ExpectMatches(m, model, 1001);
}

// UpdateInPlace while growing reaches the key in either table, and a value
// updated before its move is what the new table holds after it.
TEST(ResizableCMapTest, UpdateInPlaceWhileGrowing) {
  Map m(64, RawAllocator::Default());
  std::map<uint64_t, uint64_t> model;
  Fill(m, 64, &model);
  ASSERT_EQ(m.BeginGrow(Map::AllocateTable(128, RawAllocator::Default())),
            Error::kOk);
  do {
    for (uint64_t id = 0; id < 64; ++id) {
      int calls = 0;
      ASSERT_EQ(m.UpdateInPlace(Key(id),
                                [&](Meta& v) {
                                  ++calls;
                                  ++v.version;
                                }),
                Error::kOk);
      EXPECT_EQ(calls, 1);
      ++model[id];
    }
    ExpectMatches(m, model, 64);
  } while (m.MigrateSome(9) > 0);
  ExpectMatches(m, model, 64);
  EXPECT_EQ(m.UpdateInPlace(Key(500), [](Meta&) { FAIL(); }),
            Error::kKeyNotFound);
}

// A slot held by an UpdateInPlace is not moved: MigrateSome leaves it for
// the next call, and the update's result is what moves.
TEST(ResizableCMapTest, MigrationSkipsASlotHeldByAnUpdate) {
  Map m(16, RawAllocator::Default());
  ASSERT_TRUE(m.Set(Key(1), MakeMeta(1, 1)).inserted);
  ASSERT_EQ(m.BeginGrow(Map::AllocateTable(32, RawAllocator::Default())),
            Error::kOk);
  ASSERT_EQ(m.UpdateInPlace(Key(1),
                            [&](Meta& v) {
                              EXPECT_EQ(m.MigrateSome(64), 1u)
                                  << "moved a slot an update holds";
                              v.version = 5;
                            }),
            Error::kOk);
  EXPECT_EQ(WhereIs(m, 1), 'o');
  EXPECT_EQ(m.MigrateSome(64), 0u);
  EXPECT_EQ(WhereIs(m, 1), 'n');
  EXPECT_EQ(m.Find(Key(1))->version, 5u);
}

// While growing, admission counts both tables against the new capacity.
TEST(ResizableCMapTest, AdmissionCountsBothTables) {
  Map m(100, RawAllocator::Default());
  Fill(m, 100);
  ASSERT_EQ(m.BeginGrow(Map::AllocateTable(150, RawAllocator::Default())),
            Error::kOk);
  for (uint64_t id = 100; id < 150; ++id) {
    ASSERT_TRUE(m.Set(Key(id), MakeMeta(id, 1)).inserted) << id;
  }
  EXPECT_EQ(m.size(), 150u);
  EXPECT_EQ(m.Set(Key(150), MakeMeta(150, 1)).err, Error::kCacheFull)
      << "the new table alone holds only 50";
  EXPECT_EQ(m.Set(Key(3), MakeMeta(3, 2)).err, Error::kOk)
      << "an overwrite is not an admission";
  while (m.MigrateSome(32) > 0) {
  }
  EXPECT_EQ(m.size(), 150u);
  EXPECT_EQ(m.Set(Key(150), MakeMeta(150, 1)).err, Error::kCacheFull);
}

TEST(ResizableCMapTest, RefusesASecondOrSmallerGrowth) {
  Map m(100, RawAllocator::Default());
  const RawAllocator a = RawAllocator::Default();
  EXPECT_EQ(m.BeginGrow(nullptr), Error::kInvalidArgument);
  EXPECT_EQ(m.BeginGrow(Map::AllocateTable(100, a)),
            Error::kInvalidArgument);
  EXPECT_EQ(m.BeginGrow(Map::AllocateTable(50, a)),
            Error::kInvalidArgument);
  RawAllocator failing = a;
  failing.allocate = [](void*, size_t) -> void* { return nullptr; };
  EXPECT_EQ(m.BeginGrow(Map::AllocateTable(200, failing)),
            Error::kAllocationFailed);
  EXPECT_FALSE(m.growing());
  ASSERT_EQ(m.Set(Key(1), MakeMeta(1, 1)).err, Error::kOk);
  ASSERT_EQ(m.BeginGrow(Map::AllocateTable(200, a)), Error::kOk);
  EXPECT_EQ(m.BeginGrow(Map::AllocateTable(400, a)),
            Error::kInvalidArgument);
  EXPECT_EQ(m.capacity(), 200u);
  while (m.MigrateSome(1) > 0) {
  }
  EXPECT_EQ(m.BeginGrow(Map::AllocateTable(400, a)), Error::kOk)
      << "a growth may follow a finished one";
}

TEST(ResizableCMapTest, InertWhenTheFirstTableFails) {
  RawAllocator failing = RawAllocator::Default();
  failing.allocate = [](void*, size_t) -> void* { return nullptr; };
  Map m(100, failing);
  EXPECT_EQ(m.status(), Error::kAllocationFailed);
  m.Prefetch(Key(1), 0);  // a hint: nothing to prefetch, nothing to break
  m.Prefetch(Key(1), 1);
  EXPECT_FALSE(m.Find(Key(1)).has_value());
  EXPECT_EQ(m.Set(Key(1), MakeMeta(1, 1)).err, Error::kAllocationFailed);
  EXPECT_EQ(m.BeginGrow(Map::AllocateTable(200, RawAllocator::Default())),
            Error::kInvalidArgument);
}

// Prefetch is a hint: on keys present and absent, in both tables while
// growing, every step of it leaves every answer as it was.
TEST(ResizableCMapTest, PrefetchChangesNoAnswer) {
  Map m(100, RawAllocator::Default());
  std::map<uint64_t, uint64_t> model;
  Fill(m, 100, &model);
  ASSERT_EQ(m.BeginGrow(Map::AllocateTable(200, RawAllocator::Default())),
            Error::kOk);
  m.MigrateSome(50);
  ASSERT_TRUE(m.growing());
  for (int step = 0; step < 2; ++step) {
    for (uint64_t id = 0; id < 120; ++id) m.Prefetch(Key(id), step);
  }
  ExpectMatches(m, model, 120);
  while (m.growing()) m.MigrateSome(64);
  for (int step = 0; step < 2; ++step) {
    for (uint64_t id = 0; id < 120; ++id) m.Prefetch(Key(id), step);
  }
  ExpectMatches(m, model, 120);
}

// Grows five times in a row with inserts between the steps.
TEST(ResizableCMapTest, GrowsRepeatedly) {
  Map m(64, RawAllocator::Mapped());
  std::map<uint64_t, uint64_t> model;
  uint64_t next = 0;
  size_t released = 0;
  for (size_t cap = 64; cap <= 1024; cap *= 2) {
    while (model.size() < cap) {
      ASSERT_TRUE(m.Set(Key(next), MakeMeta(next, next)).inserted);
      model[next] = next;
      ++next;
    }
    ASSERT_EQ(m.BeginGrow(Map::AllocateTable(cap * 2, RawAllocator::Mapped())),
              Error::kOk);
    while (m.MigrateSome(3) > 0) {
      ASSERT_TRUE(m.Set(Key(next), MakeMeta(next, next)).inserted);
      model[next] = next;
      ++next;
      ExpectMatches(m, model, next + 4);
    }
    released += m.ReleaseRetired();
  }
  ExpectMatches(m, model, next + 4);
  // Only whole pages are released: the 64-key table's slots fit in one.
  EXPECT_GT(released, 0u);
}

// The retired table's pages leave the RSS; a stale probe of it (a reader
// that loaded the table before it was retired) misses every key, without a
// fault, and the slots it held read as never written (seq 0), which a
// reader that was inside such a slot takes as "changed".
TEST(ResizableCMapTest, ReleaseRetiredGivesPagesBackAndStaleProbesMiss) {
  constexpr uint64_t kKeys = 100'000;  // a 4.3 MiB table
  Map m(kKeys, RawAllocator::Mapped());
  Fill(m, kKeys);
  const auto* stale = CMapTestPeer::CurrentTable(m);
  const HashPair k0 = CMapTestPeer::TableKey<Map>(Key(0));
  const size_t slot = CMapTestPeer::SlotOf(*stale, k0);
  EXPECT_NE(CMapTestPeer::Seq(*stale, slot) & 0xffffffff, 0u);

  ASSERT_EQ(m.BeginGrow(Map::AllocateTable(2 * kKeys, RawAllocator::Mapped())),
            Error::kOk);
  while (m.MigrateSome(64) > 0) {
  }
  const size_t before = VmRssBytes();
  const size_t released = m.ReleaseRetired();
  const size_t after = VmRssBytes();
  EXPECT_GE(released, Map::BytesFor(kKeys) - 2 * 4096);
  EXPECT_GE(before - after, released * 9 / 10)
      << "RSS " << before << " -> " << after << " bytes";
  EXPECT_EQ(m.ReleaseRetired(), 0u) << "released twice";

  EXPECT_EQ(CMapTestPeer::Seq(*stale, slot), 0u);
  for (uint64_t id = 0; id < kKeys; id += 97) {
    const HashPair k = CMapTestPeer::TableKey<Map>(Key(id));
    ASSERT_FALSE(stale->Find(k).has_value()) << id;
    ASSERT_EQ(m.Find(Key(id))->id, id);
  }
  EXPECT_EQ(m.size(), kKeys);
}

// Releasing the old table's slots behind the migration cursor, after every
// step, while keys are erased and inserted (into the new table): every key
// stays readable, also those displaced past the released groups from a
// home among them (their probe walks the kept control bytes), most of the
// old table's pages leave before the growth ends, and the retired table's
// release counts only the rest of it.
TEST(ResizableCMapTest, ReleasingBehindTheCursorNeverHidesAKey) {
  constexpr uint64_t kKeys = 8'000;  // full: load 3/4, keys displaced
  Map m(kKeys, RawAllocator::Mapped());
  std::map<uint64_t, uint64_t> model;
  Fill(m, kKeys, &model);
  ASSERT_EQ(m.BeginGrow(Map::AllocateTable(2 * kKeys, RawAllocator::Mapped())),
            Error::kOk);
  uint64_t next = kKeys, victim = 0;
  size_t checks = 0, released_while_growing = 0;
  bool checked_half = false;
  while (m.MigrateSome(7) > 0) {
    // An erase of a key wherever it is (ahead of the cursor in the old
    // table, or moved) and an insert, which goes to the new table.
    victim = (victim + 7919) % kKeys;
    if (model.erase(victim) > 0) {
      ASSERT_EQ(m.FindAndEraseByHash(Key(victim)).err, Error::kOk);
    }
    ASSERT_TRUE(m.Set(Key(next), MakeMeta(next, 1)).inserted);
    model[next++] = 1;
    const size_t b = m.ReleaseRetired();
    released_while_growing += b;
    if (b > 0) {
      ++checks;
      ASSERT_NO_FATAL_FAILURE(ExpectMatches(m, model, next));
    }
    const auto* old = CMapTestPeer::OldTable(m);
    if (!checked_half && old != nullptr && old->size() < kKeys / 2) {
      checked_half = true;
      // Half the keys moved: most of what they occupied is given back.
      EXPECT_GE(released_while_growing, Map::BytesFor(kKeys) / 3);
    }
  }
  EXPECT_TRUE(checked_half);
  EXPECT_GT(checks, 10u);
  ASSERT_NO_FATAL_FAILURE(ExpectMatches(m, model, next));
  const size_t rest = m.ReleaseRetired();
  EXPECT_GT(rest, 0u);
  // The old table was released once, page by page: no page counted twice.
  EXPECT_EQ(m.released_bytes(), released_while_growing + rest);
  EXPECT_LE(m.released_bytes(), Map::BytesFor(kKeys));
  EXPECT_GE(m.released_bytes(), Map::BytesFor(kKeys) - 3 * 4096);
  EXPECT_EQ(m.ReleaseRetired(), 0u);
  ASSERT_NO_FATAL_FAILURE(ExpectMatches(m, model, next));
}

// A batch size holds a release back until that much is ready; the retired
// table is released whatever its size.
TEST(ResizableCMapTest, ReleaseBehindTheCursorWaitsForABatch) {
  constexpr uint64_t kKeys = 8'000;
  Map m(kKeys, RawAllocator::Mapped());
  Fill(m, kKeys);
  ASSERT_EQ(m.BeginGrow(Map::AllocateTable(2 * kKeys, RawAllocator::Mapped())),
            Error::kOk);
  ASSERT_GT(m.MigrateSome(kKeys / 4), 0u);
  EXPECT_EQ(m.ReleaseRetired(Map::BytesFor(kKeys)), 0u) << "not a batch yet";
  EXPECT_GT(m.ReleaseRetired(4096), 0u);
  while (m.MigrateSome(64) > 0) {
  }
  EXPECT_GT(m.ReleaseRetired(Map::BytesFor(kKeys)), 0u);
}

// ---- Shrinking ---------------------------------------------------------------

// A big, sparsely used table shrinks to one just big enough for its keys:
// every key reads its value at every step, inserts while shrinking are
// admitted against the smaller capacity (claim (e): the migrator never
// meets a full table), and when it ends the small table is the only one.
TEST(ResizableCMapTest, ShrinksEveryKeyReadableAtEveryStep) {
  Map m(1000, RawAllocator::Default());
  std::map<uint64_t, uint64_t> model;
  Fill(m, 300, &model);
  for (uint64_t id = 0; id < 300; id += 3) {  // tombstones in the old table
    ASSERT_EQ(m.FindAndEraseByHash(Key(id)).err, Error::kOk);
    model.erase(id);
  }
  ASSERT_EQ(m.size(), 200u);
  ASSERT_EQ(m.BeginShrink(Map::AllocateTable(210, RawAllocator::Default())),
            Error::kOk);
  EXPECT_TRUE(m.growing());
  EXPECT_EQ(m.capacity(), 210u);
  ASSERT_NO_FATAL_FAILURE(ExpectMatches(m, model, 320));
  uint64_t next = 1000;
  while (m.MigrateSome(9) > 0) {
    // Room for 10 more keys in the small table, counted across both.
    const CMapSetResult r = m.Set(Key(next), MakeMeta(next, 2));
    if (model.size() < 210) {
      ASSERT_TRUE(r.inserted) << next;
      model[next] = 2;
    } else {
      ASSERT_EQ(r.err, Error::kCacheFull) << next;
    }
    ++next;
    ASSERT_NO_FATAL_FAILURE(ExpectMatches(m, model, 320));
  }
  EXPECT_FALSE(m.growing());
  EXPECT_EQ(m.size(), 210u);
  EXPECT_EQ(m.Set(Key(5000), MakeMeta(5000, 1)).err, Error::kCacheFull);
  EXPECT_EQ(CMapTestPeer::CurrentTable(m)->capacity(), 210u);
  for (uint64_t id = 1000; id < next; ++id) {
    const auto it = model.find(id);
    ASSERT_EQ(m.Find(Key(id)).has_value(), it != model.end()) << id;
  }
}

// A shrink must admit every key there is, and not be a growth.
TEST(ResizableCMapTest, RefusesAShrinkBelowItsKeysOrWhileGrowing) {
  const RawAllocator a = RawAllocator::Default();
  Map m(100, a);
  Fill(m, 60);
  EXPECT_EQ(m.BeginShrink(nullptr), Error::kInvalidArgument);
  EXPECT_EQ(m.BeginShrink(Map::AllocateTable(59, a)), Error::kInvalidArgument);
  EXPECT_EQ(m.BeginShrink(Map::AllocateTable(100, a)),
            Error::kInvalidArgument);
  EXPECT_EQ(m.BeginShrink(Map::AllocateTable(200, a)),
            Error::kInvalidArgument);
  EXPECT_EQ(m.BeginGrow(Map::AllocateTable(80, a)), Error::kInvalidArgument)
      << "a growth is never a shrink";
  RawAllocator failing = a;
  failing.allocate = [](void*, size_t) -> void* { return nullptr; };
  EXPECT_EQ(m.BeginShrink(Map::AllocateTable(80, failing)),
            Error::kAllocationFailed);
  EXPECT_FALSE(m.growing());
  ASSERT_EQ(m.BeginShrink(Map::AllocateTable(60, a)), Error::kOk);
  EXPECT_EQ(m.BeginShrink(Map::AllocateTable(70, a)), Error::kInvalidArgument);
  EXPECT_EQ(m.BeginGrow(Map::AllocateTable(200, a)), Error::kInvalidArgument);
  while (m.MigrateSome(1) > 0) {
  }
  EXPECT_EQ(m.size(), 60u);
  EXPECT_EQ(m.Set(Key(60), MakeMeta(60, 1)).err, Error::kCacheFull);
  EXPECT_EQ(m.BeginGrow(Map::AllocateTable(120, a)), Error::kOk)
      << "a growth may follow a finished shrink";
}

// Grow, then shrink back below where it started, with erases and inserts
// between the steps: every key stays readable, and the big table's pages
// leave the RSS, once each. (Releasing behind the cursor while shrinking
// runs in resizable_cmap_stress_test, with readers.)
TEST(ResizableCMapTest, AShrinkGivesTheBigTableBack) {
  constexpr uint64_t kBig = 100'000;  // a 4.3 MiB table
  constexpr uint64_t kKeys = 10'000;
  Map m(kKeys, RawAllocator::Mapped());
  std::map<uint64_t, uint64_t> model;
  Fill(m, kKeys, &model);
  ASSERT_EQ(m.BeginGrow(Map::AllocateTable(kBig, RawAllocator::Mapped())),
            Error::kOk);
  while (m.MigrateSome(64) > 0) {
  }
  const size_t released_by_growth = m.ReleaseRetired();
  // Touch the whole big table, as a table that was once full would be.
  uint64_t next = kKeys;
  while (m.size() < kBig) {
    ASSERT_TRUE(m.Set(Key(next), MakeMeta(next, 1)).inserted);
    ++next;
  }
  for (uint64_t id = kKeys; id < next; ++id) {
    ASSERT_EQ(m.FindAndEraseByHash(Key(id)).err, Error::kOk);
  }
  ASSERT_EQ(m.size(), kKeys);

  ASSERT_EQ(m.BeginShrink(Map::AllocateTable(kKeys + 100,
                                             RawAllocator::Mapped())),
            Error::kOk);
  uint64_t victim = 0;
  size_t steps = 0;
  while (m.MigrateSome(64) > 0) {
    victim = (victim + 7919) % kKeys;
    if (model.erase(victim) > 0) {
      ASSERT_EQ(m.FindAndEraseByHash(Key(victim)).err, Error::kOk);
    }
    if (m.size() < kKeys + 100) {
      ASSERT_TRUE(m.Set(Key(next), MakeMeta(next, 1)).inserted);
      model[next] = 1;
    }
    ++next;
    if (++steps % 16 == 0) {
      ASSERT_NO_FATAL_FAILURE(ExpectMatches(m, model, 200));
    }
  }
  const size_t rss_before = VmRssBytes();
  const size_t released = m.ReleaseRetired();
  const size_t rss_after = VmRssBytes();
  for (const auto& [id, version] : model) {
    ASSERT_EQ(m.Find(Key(id))->version, version) << id;
  }
  ASSERT_EQ(m.size(), model.size());
  EXPECT_EQ(m.released_bytes(), released_by_growth + released);
  EXPECT_GE(released, Map::BytesFor(kBig) - 3 * 4096);
  EXPECT_LE(released, Map::BytesFor(kBig));
  EXPECT_GE(rss_before - rss_after, released * 9 / 10)
      << "RSS " << rss_before << " -> " << rss_after;
}

}  // namespace
}  // namespace furrballs
