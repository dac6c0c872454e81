#include "engine/arc/arc_flat_list.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <list>
#include <map>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "engine/arc/arc_trace.h"
#include "engine/arc/retired_memory.h"
#include "engine/common/hash_pair.h"
#include "engine/common/raw_allocator.h"

namespace furrballs {
namespace {

constexpr std::array<ArcList, 4> kLists = {ArcList::kT1, ArcList::kT2,
                                           ArcList::kB1, ArcList::kB2};

// A RawAllocator that counts calls and can be told to fail the n-th one.
struct CountingAllocator {
  int allocations = 0;
  int deallocations = 0;
  int fail_at = -1;  // 0-based allocation number to fail, or -1

  RawAllocator Get() {
    return RawAllocator{
        [](void* ctx, size_t bytes) -> void* {
          auto* self = static_cast<CountingAllocator*>(ctx);
          if (self->allocations++ == self->fail_at) return nullptr;
          return RawAllocator::Default().Allocate(bytes);
        },
        [](void* ctx, void* p, size_t bytes) {
          ++static_cast<CountingAllocator*>(ctx)->deallocations;
          RawAllocator::Default().Deallocate(p, bytes);
        },
        this};
  }
};

// The fingerprints of list `l`, MRU first, as the lists name them
// (fingerprint(): the slot's high half and its index bucket's tag).
std::vector<uint64_t> Contents(const ArcFlatLists<>& lists, ArcList l) {
  std::vector<uint64_t> out;
  for (uint32_t s = lists.mru(l); s != kArcNil; s = lists.next(s)) {
    out.push_back(lists.fingerprint(s));
  }
  return out;
}

// The fingerprints (H2) of `keys`.
template <typename Keys>
std::vector<uint64_t> Fingerprints(const Keys& keys) {
  std::vector<uint64_t> out;
  for (const HashPair& k : keys) out.push_back(k.h2);
  return out;
}

ArcFlatLists<> Make(uint32_t capacity) {
  absl::StatusOr<ArcFlatLists<>> lists =
      ArcFlatLists<>::Create(capacity, RawAllocator::Default());
  EXPECT_TRUE(lists.ok()) << lists.status();
  return *std::move(lists);
}

TEST(ArcFlatListsTest, RejectsBadCapacities) {
  EXPECT_FALSE(ArcFlatLists<>::Create(0, RawAllocator::Default()).ok());
  EXPECT_FALSE(ArcFlatLists<>::Create(ArcFlatLists<>::kMaxCapacity + 1,
                                      RawAllocator::Default())
                   .ok());
}

TEST(ArcFlatListsTest, AllocationFailureFreesWhatWasAllocated) {
  for (int fail_at : {0, 1}) {
    CountingAllocator counter;
    counter.fail_at = fail_at;
    absl::StatusOr<ArcFlatLists<>> lists =
        ArcFlatLists<>::Create(100, counter.Get());
    ASSERT_FALSE(lists.ok());
    EXPECT_EQ(lists.status().code(), absl::StatusCode::kResourceExhausted);
    EXPECT_EQ(counter.allocations - 1, counter.deallocations);
  }
}

TEST(ArcFlatListsTest, PushMoveRemoveKeepMruToLruOrder) {
  ArcFlatLists<> lists = Make(4);
  const HashPair a = TraceKey(1), b = TraceKey(2), c = TraceKey(3);
  lists.PushFront(ArcList::kT1, a);
  lists.PushFront(ArcList::kT1, b);
  lists.PushFront(ArcList::kT1, c);
  EXPECT_EQ(Contents(lists, ArcList::kT1), Fingerprints(std::vector{c, b, a}));
  EXPECT_EQ(lists.fingerprint(lists.lru(ArcList::kT1)), a.h2);

  // Middle element to another list, then the tail.
  lists.MoveToFront(lists.Find(b), ArcList::kT2);
  lists.MoveToFront(lists.Find(a), ArcList::kT2);
  EXPECT_EQ(Contents(lists, ArcList::kT1), Fingerprints(std::vector{c}));
  EXPECT_EQ(Contents(lists, ArcList::kT2), Fingerprints(std::vector{a, b}));
  EXPECT_EQ(lists.Where(a), ArcList::kT2);

  // Within the same list: LRU to MRU.
  lists.MoveToFront(lists.Find(b), ArcList::kT2);
  EXPECT_EQ(Contents(lists, ArcList::kT2), Fingerprints(std::vector{b, a}));

  lists.Remove(lists.Find(c));
  EXPECT_EQ(lists.size(ArcList::kT1), 0u);
  EXPECT_EQ(lists.mru(ArcList::kT1), kArcNil);
  EXPECT_EQ(lists.lru(ArcList::kT1), kArcNil);
  EXPECT_EQ(lists.Where(c), ArcList::kNone);
  EXPECT_EQ(lists.Find(c), kArcNil);
  EXPECT_EQ(lists.tracked(), 2u);
}

// 2c slots are shared by the four lists: a ghost list may take all of them
// and a resident list c, and the push beyond reports
// exhaustion instead of corrupting memory.
TEST(ArcFlatListsTest, OneListCanHoldTheWholeArena) {
  for (ArcList l : kLists) {
    ArcFlatLists<> lists = Make(1000);
    const uint64_t most = IsGhost(l) ? 2000 : 1000;
    for (uint64_t i = 0; i < most; ++i) {
      ASSERT_NE(lists.PushFront(l, TraceKey(i)), kArcNil);
    }
    EXPECT_EQ(lists.size(l), most);
    EXPECT_EQ(lists.PushFront(l, TraceKey(5000)), kArcNil);
    for (uint64_t i = 0; i < most; ++i) ASSERT_EQ(lists.Where(TraceKey(i)), l);
  }
}

// c residents and c ghosts fill the arena; the ghosts may then all come back
// as residents one at a time, each once a resident became a ghost, as ARC's
// REPLACE does, and every key keeps its fingerprint through the moves.
TEST(ArcFlatListsTest, GhostsComeBackAsResidentsInAFullArena) {
  constexpr uint32_t kC = 64;
  ArcFlatLists<> lists = Make(kC);
  for (uint64_t i = 0; i < kC; ++i) lists.PushFront(ArcList::kB1, TraceKey(i));
  for (uint64_t i = kC; i < 2 * kC; ++i) {
    lists.PushFront(ArcList::kT1, TraceKey(i));
  }
  EXPECT_EQ(lists.PushFront(ArcList::kT2, TraceKey(9999)), kArcNil);
  for (uint64_t i = 0; i < kC; ++i) {
    lists.MoveToFront(lists.lru(ArcList::kT1), ArcList::kB2);
    lists.MoveToFront(lists.Find(TraceKey(i)), ArcList::kT2);
  }
  std::vector<HashPair> t2;
  for (uint64_t i = kC; i-- > 0;) t2.push_back(TraceKey(i));
  EXPECT_EQ(Contents(lists, ArcList::kT2), Fingerprints(t2));
  std::vector<HashPair> b2;
  for (uint64_t i = 2 * kC; i-- > kC;) b2.push_back(TraceKey(i));
  EXPECT_EQ(Contents(lists, ArcList::kB2), Fingerprints(b2));
  EXPECT_EQ(lists.size(ArcList::kB1), 0u);
  EXPECT_EQ(lists.size(ArcList::kT1), 0u);
}

// A key is its 64-bit fingerprint (H2), resident or ghost, as it is to the
// key table: another key with the same H2 is taken for it, and one with the
// same H1 and either half of H2 different is another key.
TEST(ArcFlatListsTest, KeysMatchByFingerprint) {
  ArcFlatLists<> lists = Make(8);
  const HashPair a{1, 0x1234567890abcdefULL};
  const HashPair b{2, 0x1234567890abcdefULL};  // a's fingerprint, other h1
  const HashPair near{1, 0x1234567890abcdeeULL};  // a's h1, other low half
  const HashPair far{1, 0x1234567990abcdefULL};   // a's h1, other high half
  lists.PushFront(ArcList::kT1, a);
  EXPECT_EQ(lists.Where(b), ArcList::kT1);
  EXPECT_EQ(lists.Find(b), lists.Find(a));
  EXPECT_EQ(lists.fingerprint(lists.Find(a)), a.h2);
  EXPECT_EQ(lists.Where(near), ArcList::kNone);
  EXPECT_EQ(lists.Where(far), ArcList::kNone);
  lists.PushFront(ArcList::kB1, near);
  lists.PushFront(ArcList::kT2, far);

  // a becomes a ghost, and b brings it back.
  lists.MoveToFront(lists.Find(a), ArcList::kB1);
  EXPECT_EQ(lists.Where(b), ArcList::kB1);
  lists.MoveToFront(lists.Find(b), ArcList::kT2);
  EXPECT_EQ(lists.Where(a), ArcList::kT2);
  EXPECT_EQ(Contents(lists, ArcList::kT2), (std::vector{a.h2, far.h2}));
  EXPECT_EQ(Contents(lists, ArcList::kB1), (std::vector{near.h2}));
  lists.Remove(lists.Find(b));
  EXPECT_EQ(lists.Where(a), ArcList::kNone);
  EXPECT_EQ(lists.Where(near), ArcList::kB1);
  EXPECT_EQ(lists.Where(far), ArcList::kT2);
  EXPECT_EQ(lists.tracked(), 2u);
}

// A slot's fingerprint is its high half and its index bucket's tag, found
// by a walk from the home bucket: keys far from their home (one high half
// for all, so one cluster that wraps past the table's end) are named right
// after pushes, moves and removals (backward shifts) in every list.
TEST(ArcFlatListsTest, FingerprintsOfAClusterSurviveRemovals) {
  constexpr uint32_t kC = 40;
  ArcFlatLists<> lists = Make(kC);
  std::map<uint64_t, ArcList> model;  // fingerprint -> list
  TraceRng rng(5);
  for (int op = 0; op < 20000; ++op) {
    // The largest high half: the home is the table's last bucket.
    const uint64_t h2 = uint64_t{0xffffffff} << 32 | rng.Below(3 * kC);
    const HashPair k{static_cast<uint64_t>(op), h2};
    const auto it = model.find(h2);
    if (it == model.end()) {
      const ArcList to = kLists[rng.Below(4)];
      if (lists.tracked() == 2 * kC ||
          (IsResident(to) && lists.resident() == kC)) {
        continue;
      }
      ASSERT_NE(lists.PushFront(to, k), kArcNil);
      model[h2] = to;
    } else if (rng.Below(2) == 0) {
      lists.Remove(lists.Find(k));
      model.erase(it);
    } else if (IsResident(it->second) || lists.resident() < kC) {
      const ArcList to = rng.Below(2) == 0 ? ArcList::kT2 : ArcList::kB2;
      lists.MoveToFront(lists.Find(k), to);
      it->second = to;
    }
    for (ArcList l : kLists) {
      for (uint32_t s = lists.mru(l); s != kArcNil; s = lists.next(s)) {
        const uint64_t f = lists.fingerprint(s);
        ASSERT_EQ(model.count(f), 1u) << "op " << op;
        ASSERT_EQ(model[f], l) << "op " << op;
        ASSERT_EQ(lists.Find(HashPair{0, f}), s) << "op " << op;
      }
    }
    ASSERT_EQ(lists.tracked(), model.size());
  }
}

TEST(ArcFlatListsTest, NoAllocationAfterCreate) {
  CountingAllocator counter;
  absl::StatusOr<ArcFlatLists<>> lists =
      ArcFlatLists<>::Create(64, counter.Get());
  ASSERT_TRUE(lists.ok());
  const int after_create = counter.allocations;
  TraceRng rng(3);
  for (int op = 0; op < 100000; ++op) {
    const HashPair k = TraceKey(rng.Below(200));
    const uint32_t s = lists->Find(k);
    if (s == kArcNil) {
      const ArcList to = kLists[rng.Below(4)];
      if (lists->tracked() < lists->slot_count() &&
          (IsGhost(to) || lists->resident() < 64)) {
        lists->PushFront(to, k);
      }
    } else if (rng.Below(3) == 0) {
      lists->Remove(s);
    } else {
      const ArcList to = kLists[rng.Below(4)];
      if (IsResident(to) && IsGhost(lists->list_of(s))) {
        if (lists->resident() < 64) lists->MoveToFront(s, to);
      } else {
        lists->MoveToFront(s, to);
      }
    }
  }
  EXPECT_EQ(counter.allocations, after_create);
  EXPECT_EQ(counter.deallocations, 0);
}

TEST(ArcFlatListsTest, MoveConstructionTransfersOwnership) {
  CountingAllocator counter;
  {
    absl::StatusOr<ArcFlatLists<>> made =
        ArcFlatLists<>::Create(8, counter.Get());
    ASSERT_TRUE(made.ok());
    made->PushFront(ArcList::kB1, TraceKey(9));
    ArcFlatLists<> moved(*std::move(made));
    EXPECT_EQ(moved.Where(TraceKey(9)), ArcList::kB1);
  }
  EXPECT_EQ(counter.allocations, 2);  // index, arena
  EXPECT_EQ(counter.deallocations, 2);
}

// Random pushes, moves and removes against four std::lists, with c growing
// at the given ops (to the given capacities) and the index rehashed one
// entry per op after each growth.
void RunAgainstStdLists(uint32_t capacity,
                        const std::vector<std::pair<int, uint32_t>>& growths,
                        uint64_t universe, int ops) {
  uint32_t c = capacity;
  ArcFlatLists<> lists = Make(c);
  auto next_growth = growths.begin();
  std::array<std::list<HashPair>, 4> model;
  auto model_of = [&](ArcList l) -> std::list<HashPair>& {
    return model[static_cast<size_t>(l)];
  };
  auto model_find = [&](const HashPair& k) -> ArcList {
    for (ArcList l : kLists) {
      const auto& m = model_of(l);
      if (std::find(m.begin(), m.end(), k) != m.end()) return l;
    }
    return ArcList::kNone;
  };
  TraceRng rng(11 + capacity);
  for (int op = 0; op < ops; ++op) {
    if (next_growth != growths.end() && next_growth->first == op) {
      while (!lists.GrowStep(1)) {
      }
      RetiredMemory retired;
      lists.TakeRetired(&retired);
      absl::StatusOr<ArcFlatLists<>::Growth> g =
          lists.AllocateGrowth(next_growth->second);
      ASSERT_TRUE(g.ok()) << g.status();
      lists.BeginGrow(*std::move(g));
      c = next_growth->second;
      ASSERT_EQ(lists.capacity(), c);
      ++next_growth;
    }
    if (lists.GrowStep(1)) {
      RetiredMemory retired;
      lists.TakeRetired(&retired);
    }
    const HashPair k = TraceKey(rng.Below(universe));
    const ArcList where = model_find(k);
    ASSERT_EQ(lists.Where(k), where) << "op " << op;
    const ArcList to = kLists[rng.Below(4)];
    // At most c residents: a move that would exceed it is skipped.
    const bool room =
        IsGhost(to) || IsResident(where) || lists.resident() < c;
    if (where == ArcList::kNone) {
      if (lists.tracked() == 2 * c || !room) continue;
      lists.PushFront(to, k);
      model_of(to).push_front(k);
    } else if (rng.Below(4) == 0) {
      lists.Remove(lists.Find(k));
      model_of(where).remove(k);
    } else if (room) {
      lists.MoveToFront(lists.Find(k), to);
      model_of(where).remove(k);
      model_of(to).push_front(k);
    }
    for (ArcList l : kLists) {
      ASSERT_EQ(lists.size(l), model_of(l).size());
      ASSERT_EQ(Contents(lists, l), Fingerprints(model_of(l))) << "op " << op;
    }
  }
}

TEST(ArcFlatListsTest, RandomOperationsMatchStdList) {
  RunAgainstStdLists(16, {}, 48, 50000);
}

// The same with growths, small and large, the second while the previous
// one still copies and rehashes (it is finished first), with the arena full
// of ghosts and residents (a universe of 3c): slots are read
// and written in both generations while the copy runs.
TEST(ArcFlatListsTest, RandomOperationsMatchStdListAcrossGrowths) {
  RunAgainstStdLists(16, {{3000, 40}, {6000, 300}}, 120, 12000);
  RunAgainstStdLists(400, {{3000, 600}, {3100, 1500}}, 1800, 8000);
}

// Growth in the middle of a full arena: every slot of 2c in use (c
// residents, c ghosts), then every tracked key is still found in its list
// while the index rehashes, and the new slots are usable at
// once.
TEST(ArcFlatListsTest, GrowthOfAFullArenaKeepsEverySlot) {
  constexpr uint32_t c = 1500;
  CountingAllocator counter;
  absl::StatusOr<ArcFlatLists<>> made = ArcFlatLists<>::Create(c, counter.Get());
  ASSERT_TRUE(made.ok());
  ArcFlatLists<>& lists = *made;
  std::vector<HashPair> keys;
  for (uint64_t i = 0; i < 2 * c; ++i) {
    keys.push_back(TraceKey(i));
    ASSERT_NE(lists.PushFront(i < c ? ArcList::kT1 : ArcList::kB2, keys[i]),
              kArcNil);
  }
  ASSERT_EQ(lists.PushFront(ArcList::kB1, TraceKey(99999)), kArcNil);
  const int allocations = counter.allocations;
  absl::StatusOr<ArcFlatLists<>::Growth> g = lists.AllocateGrowth(4000);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(counter.allocations, allocations + 2);
  lists.BeginGrow(*std::move(g));
  EXPECT_TRUE(lists.growing());
  for (uint64_t i = 2 * c; i < 2 * c + 200; ++i) {
    keys.push_back(TraceKey(i));
    ASSERT_NE(lists.PushFront(ArcList::kT2, keys.back()), kArcNil);
    ASSERT_FALSE(lists.GrowStep(3));
  }
  for (size_t i = 0; i < keys.size(); ++i) {
    const ArcList want =
        i < c ? ArcList::kT1 : i < 2 * c ? ArcList::kB2 : ArcList::kT2;
    ASSERT_EQ(lists.Where(keys[i]), want) << i;
    ASSERT_EQ(lists.fingerprint(lists.Find(keys[i])), keys[i].h2);
  }
  while (!lists.GrowStep(100)) {
  }
  RetiredMemory retired;
  lists.TakeRetired(&retired);
  EXPECT_FALSE(lists.growing());
  EXPECT_EQ(counter.deallocations, 0);
  retired.Release();
  EXPECT_EQ(counter.deallocations, 2);  // the old index and arena
  EXPECT_EQ(lists.memory_bytes(), ArcFlatLists<>::BytesFor(4000));
  for (size_t i = 0; i < keys.size(); ++i) {
    ASSERT_NE(lists.Find(keys[i]), kArcNil) << i;
  }
}

TEST(ArcFlatListsTest, GrowthMustBeLargerAndFitTheSlotEncoding) {
  ArcFlatLists<> lists = Make(100);
  EXPECT_EQ(lists.AllocateGrowth(100).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(lists.AllocateGrowth(50).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(lists.AllocateGrowth(ArcFlatLists<>::kMaxCapacity + 1)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

// A growth that gives back the old index and arena behind its
// cursors after every step (madvise: the pages then read as zeros) keeps
// every key where it was, while keys are pushed and removed, and gives
// most of the old generation back before it ends.
TEST(ArcFlatListsTest, ReleasingBehindTheCursorsKeepsEveryKey) {
  constexpr uint32_t c = 20'000;
  absl::StatusOr<ArcFlatLists<>> made =
      ArcFlatLists<>::Create(c, RawAllocator::Mapped());
  ASSERT_TRUE(made.ok());
  ArcFlatLists<>& lists = *made;
  std::map<uint64_t, ArcList> model;
  for (uint64_t i = 0; i < 2 * c; ++i) {
    const ArcList l = i % 2 == 0 ? ArcList::kT1 : ArcList::kB2;
    ASSERT_NE(lists.PushFront(l, TraceKey(i)), kArcNil);
    model[i] = l;
  }
  absl::StatusOr<ArcFlatLists<>::Growth> g = lists.AllocateGrowth(2 * c);
  ASSERT_TRUE(g.ok());
  lists.BeginGrow(*std::move(g));
  size_t released = 0, checks = 0;
  uint64_t next = 2 * c;
  bool done = false;
  while (!done) {
    RetiredMemory retired;
    done = lists.GrowStep(5, &retired);
    if (done) break;
    const size_t b = retired.Release();
    released += b;
    // A push (to the new arena) and a removal, wherever the key is.
    ASSERT_NE(lists.PushFront(ArcList::kT2, TraceKey(next)), kArcNil);
    model[next++] = ArcList::kT2;
    const uint64_t victim = (next * 7919) % (2 * c);
    if (const auto it = model.find(victim); it != model.end()) {
      lists.Remove(lists.Find(TraceKey(victim)));
      model.erase(it);
    }
    if (b == 0) continue;
    ++checks;
    for (const auto& [i, l] : model) {
      ASSERT_EQ(lists.Where(TraceKey(i)), l) << "key " << i;
      ASSERT_EQ(lists.fingerprint(lists.Find(TraceKey(i))), TraceKey(i).h2)
          << i;
    }
  }
  EXPECT_GT(checks, 5u);
  EXPECT_GE(released, ArcFlatLists<>::BytesFor(c) / 2);
  RetiredMemory retired;
  lists.TakeRetired(&retired);
  retired.Release();
  for (const auto& [i, l] : model) ASSERT_EQ(lists.Where(TraceKey(i)), l) << i;
}

// A growth holds both generations until it ends, then only the new one.
TEST(ArcFlatListsTest, GrowthPeakIsBothGenerations) {
  EXPECT_EQ(ArcFlatLists<>::BytesFor(1000),
            2000 * 12 + ArcIndex::BytesFor(2000));
  EXPECT_EQ(ArcFlatLists<>::GrowthPeakBytes(1000, 2500),
            ArcFlatLists<>::BytesFor(1000) + ArcFlatLists<>::BytesFor(2500));
  ArcFlatLists<> lists = Make(1000);
  absl::StatusOr<ArcFlatLists<>::Growth> g = lists.AllocateGrowth(2500);
  ASSERT_TRUE(g.ok());
  lists.BeginGrow(*std::move(g));
  EXPECT_EQ(lists.memory_bytes(), ArcFlatLists<>::GrowthPeakBytes(1000, 2500));
  while (!lists.GrowStep(8)) {
  }
  RetiredMemory retired;
  lists.TakeRetired(&retired);
  EXPECT_EQ(lists.memory_bytes(), ArcFlatLists<>::BytesFor(2500));
  EXPECT_EQ(retired.bytes(), ArcFlatLists<>::BytesFor(1000));
}

// A compaction before a shrink moves the slots above 2c' below it without
// key records: a moved slot must stay named by its fingerprint (the word's
// high half moves with it, its index bucket keeps the low half and is
// renumbered), in clusters of keys sharing a high half, while keys leave
// and arrive between steps at the tightest bounds (exactly c' resident and
// 2c' tracked); and the smaller arena installed after it keeps every key.
TEST(ArcFlatListsTest, CompactionKeepsEveryFingerprint) {
  constexpr uint32_t kC = 64, kSmall = 16;
  constexpr std::array<uint32_t, 3> kHighs = {0xffffffffu, 0x12345678u,
                                              0x9abcdef0u};
  ArcFlatLists<> lists = Make(kC);
  std::map<ArcList, std::vector<uint64_t>> model;  // MRU first
  uint64_t next_low = 1;
  auto push = [&](ArcList l) {
    const uint64_t h2 = uint64_t{kHighs[next_low % kHighs.size()]} << 32 |
                        next_low;
    ++next_low;
    const uint32_t s = lists.PushFront(l, HashPair{0, h2});
    model[l].insert(model[l].begin(), h2);
    return s;
  };
  auto remove = [&](ArcList l, uint64_t h2) {
    lists.Remove(lists.Find(HashPair{0, h2}));
    auto& v = model[l];
    v.erase(std::find(v.begin(), v.end(), h2));
  };
  auto check = [&](const char* when) {
    for (ArcList l : kLists) {
      ASSERT_EQ(Contents(lists, l), model[l]) << when;
      for (uint64_t h2 : model[l]) {
        ASSERT_EQ(lists.Where(HashPair{0, h2}), l) << when;
      }
    }
  };
  // Ghosts in slots 0-63, residents in 64-127; every fourth slot kept, so
  // 16 residents and 16 ghosts remain, most of them above 2c' = 32.
  for (uint32_t i = 0; i < 2 * kC; ++i) {
    const ArcList l =
        i < kC ? (i % 2 ? ArcList::kB2 : ArcList::kB1)
               : (i % 2 ? ArcList::kT2 : ArcList::kT1);
    ASSERT_EQ(push(l), i);
  }
  for (ArcList l : kLists) {
    const std::vector<uint64_t> keys = model[l];
    for (uint64_t h2 : keys) {
      if (lists.Find(HashPair{0, h2}) % 4 != 3) remove(l, h2);
    }
  }
  ASSERT_EQ(lists.resident(), kSmall);
  ASSERT_EQ(lists.tracked(), 2 * kSmall);
  check("before");
  lists.BeginCompact(kSmall);
  int steps = 0;
  while (!lists.CompactStep(1)) {
    ++steps;
    ASSERT_NO_FATAL_FAILURE(check("compacting"));
    // A ghost leaves and another arrives (the LRU end of B1), and a
    // resident likewise: the pushes need a free slot at the bounds.
    for (ArcList l : {ArcList::kB1, ArcList::kT1}) {
      if (model[l].empty()) continue;
      remove(l, model[l].back());
      ASSERT_NE(push(l), kArcNil);
    }
  }
  EXPECT_GT(steps, 2);
  EXPECT_FALSE(lists.compacting());
  check("compacted");
  for (ArcList l : kLists) {
    for (uint64_t h2 : model[l]) {
      ASSERT_LT(lists.Find(HashPair{0, h2}), 2 * kSmall);
    }
  }
  absl::StatusOr<ArcFlatLists<>::Growth> g = lists.AllocateShrink(kSmall);
  ASSERT_TRUE(g.ok());
  lists.BeginGrow(*std::move(g));
  while (!lists.GrowStep(1)) {
  }
  RetiredMemory retired;
  lists.TakeRetired(&retired);
  retired.Release();
  EXPECT_FALSE(lists.growing());
  EXPECT_EQ(lists.memory_bytes(), ArcFlatLists<>::BytesFor(kSmall));
  check("shrunk");
  EXPECT_EQ(lists.PushFront(ArcList::kB2, HashPair{0, 1}), kArcNil)
      << "the smaller arena is full";
}

}  // namespace
}  // namespace furrballs
