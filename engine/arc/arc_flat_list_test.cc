#include "engine/arc/arc_flat_list.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <list>
#include <vector>

#include <gtest/gtest.h>

#include "engine/arc/arc_trace.h"
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

std::vector<HashPair> Contents(const ArcFlatLists<>& lists, ArcList l) {
  std::vector<HashPair> out;
  for (uint32_t s = lists.mru(l); s != kArcNil; s = lists.next(s)) {
    out.push_back(lists.key(s));
  }
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
  EXPECT_EQ(Contents(lists, ArcList::kT1), (std::vector<HashPair>{c, b, a}));
  EXPECT_EQ(lists.key(lists.lru(ArcList::kT1)), a);

  // Middle element to another list, then the tail.
  lists.MoveToFront(lists.Find(b), ArcList::kT2);
  lists.MoveToFront(lists.Find(a), ArcList::kT2);
  EXPECT_EQ(Contents(lists, ArcList::kT1), (std::vector<HashPair>{c}));
  EXPECT_EQ(Contents(lists, ArcList::kT2), (std::vector<HashPair>{a, b}));
  EXPECT_EQ(lists.Where(a), ArcList::kT2);

  // Within the same list: LRU to MRU.
  lists.MoveToFront(lists.Find(b), ArcList::kT2);
  EXPECT_EQ(Contents(lists, ArcList::kT2), (std::vector<HashPair>{b, a}));

  lists.Remove(lists.Find(c));
  EXPECT_EQ(lists.size(ArcList::kT1), 0u);
  EXPECT_EQ(lists.mru(ArcList::kT1), kArcNil);
  EXPECT_EQ(lists.lru(ArcList::kT1), kArcNil);
  EXPECT_EQ(lists.Where(c), ArcList::kNone);
  EXPECT_EQ(lists.Find(c), kArcNil);
  EXPECT_EQ(lists.tracked(), 2u);
}

// 2c slots are shared by the four lists: any one list may take all of them,
// and the (2c+1)-th push reports exhaustion instead of corrupting memory.
TEST(ArcFlatListsTest, OneListCanHoldTheWholeArena) {
  for (ArcList l : kLists) {
    ArcFlatLists<> lists = Make(1000);
    for (uint64_t i = 0; i < 2000; ++i) {
      ASSERT_NE(lists.PushFront(l, TraceKey(i)), kArcNil);
    }
    EXPECT_EQ(lists.size(l), 2000u);
    EXPECT_EQ(lists.PushFront(l, TraceKey(5000)), kArcNil);
    for (uint64_t i = 0; i < 2000; ++i) ASSERT_EQ(lists.Where(TraceKey(i)), l);
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
      if (lists->tracked() < lists->slot_count()) {
        lists->PushFront(kLists[rng.Below(4)], k);
      }
    } else if (rng.Below(3) == 0) {
      lists->Remove(s);
    } else {
      lists->MoveToFront(s, kLists[rng.Below(4)]);
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
  EXPECT_EQ(counter.allocations, 2);  // arena + index
  EXPECT_EQ(counter.deallocations, 2);
}

// Random pushes, moves and removes against four std::lists.
TEST(ArcFlatListsTest, RandomOperationsMatchStdList) {
  constexpr uint32_t kCapacity = 16;
  ArcFlatLists<> lists = Make(kCapacity);
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
  TraceRng rng(11);
  for (int op = 0; op < 50000; ++op) {
    const HashPair k = TraceKey(rng.Below(48));
    const ArcList where = model_find(k);
    ASSERT_EQ(lists.Where(k), where) << "op " << op;
    const ArcList to = kLists[rng.Below(4)];
    if (where == ArcList::kNone) {
      if (lists.tracked() == 2 * kCapacity) continue;
      lists.PushFront(to, k);
      model_of(to).push_front(k);
    } else if (rng.Below(4) == 0) {
      lists.Remove(lists.Find(k));
      model_of(where).remove(k);
    } else {
      lists.MoveToFront(lists.Find(k), to);
      model_of(where).remove(k);
      model_of(to).push_front(k);
    }
    for (ArcList l : kLists) {
      ASSERT_EQ(lists.size(l), model_of(l).size());
      ASSERT_EQ(Contents(lists, l),
                std::vector<HashPair>(model_of(l).begin(), model_of(l).end()))
          << "op " << op;
    }
  }
}

}  // namespace
}  // namespace furrballs
