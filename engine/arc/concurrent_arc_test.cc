#include "engine/arc/concurrent_arc.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <latch>
#include <memory>
#include <utility>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "engine/arc/arc_trace.h"
#include "engine/arc/reference_arc.h"
#include "engine/common/error.h"
#include "engine/common/hash_pair.h"
#include "engine/common/proc_status_testing.h"
#include "engine/common/raw_allocator.h"

namespace furrballs {
namespace {

using Arc = ConcurrentARC<uint64_t>;

// The value stored for a key: derived from its fingerprint, what ARC names
// it by, so a read and an eviction can be checked.
uint64_t ValueOf(const HashPair& h) { return h.h2 ^ 0x0123456789abcdefULL; }

// How ConcurrentARC names trace key `id` when it hands it out (on_evict,
// ForceEvictOne, ColdestKeys): its table key.
HashPair Named(uint64_t id) { return ArcTableKey(TraceKey(id).h2); }

struct Recorder {
  std::vector<std::pair<HashPair, uint64_t>> evicted;
  std::vector<HashPair> promoted;
};

std::unique_ptr<Arc> Make(uint32_t capacity, Recorder* rec = nullptr) {
  Arc::Options options;
  options.capacity = capacity;
  if (rec != nullptr) {
    options.on_evict = [rec](const HashPair& h, const uint64_t& v) {
      rec->evicted.emplace_back(h, v);
    };
    options.on_promote = [rec](const HashPair& h) {
      rec->promoted.push_back(h);
    };
  }
  absl::StatusOr<std::unique_ptr<Arc>> arc = Arc::Create(options);
  EXPECT_TRUE(arc.ok()) << arc.status();
  return *std::move(arc);
}

// The default allocator, failing the fail_at-th call (0-based) it counts.
struct FailingAllocator {
  int calls = 0;
  int fail_at = -1;

  RawAllocator Get() {
    return RawAllocator{
        [](void* ctx, size_t bytes) -> void* {
          auto* self = static_cast<FailingAllocator*>(ctx);
          if (self->calls++ == self->fail_at) return nullptr;
          return RawAllocator::Default().Allocate(bytes);
        },
        [](void*, void* p, size_t bytes) {
          RawAllocator::Default().Deallocate(p, bytes);
        },
        this};
  }
};

std::string Name(ArcList l) {
  switch (l) {
    case ArcList::kT1: return "T1";
    case ArcList::kT2: return "T2";
    case ArcList::kB1: return "B1";
    case ArcList::kB2: return "B2";
    case ArcList::kNone: return "none";
  }
  return "?";
}

// Drives ConcurrentARC as a cache is driven ("Find; on a miss Set") and the
// reference ARC with the same keys, comparing every step. Returns "" or the
// first divergence.
// `growths` grows c to .second before op .first (finishing the previous
// growth first); only the Sets move keys, as with no worker. A .second
// below c is a shrink, which is driven to its end at once (GrowStep(1)
// until done) and must evict the keys the reference's Shrink evicts, in
// its order.
std::string CompareWithReference(
    const std::vector<HashPair>& trace, uint32_t c,
    const std::vector<std::pair<size_t, uint32_t>>& growths = {}) {
  Recorder rec;
  std::unique_ptr<Arc> arc = Make(c, &rec);
  ReferenceArc ref(c);
  auto next_growth = growths.begin();
  for (size_t i = 0; i < trace.size(); ++i) {
    const HashPair& x = trace[i];
    std::ostringstream where;
    where << "op " << i << ": ";
    if (next_growth != growths.end() && next_growth->first == i) {
      while (!arc->GrowStep(1)) {
      }
      if (next_growth->second < arc->capacity()) {
        rec.evicted.clear();
        const absl::Status shrunk = arc->Shrink(next_growth->second);
        if (!shrunk.ok()) return where.str() + shrunk.ToString();
        while (!arc->GrowStep(1)) {
        }
        const std::vector<HashPair> want = ref.Shrink(next_growth->second);
        if (rec.evicted.size() != want.size()) {
          return where.str() + "shrink evicted " +
                 std::to_string(rec.evicted.size()) + ", reference " +
                 std::to_string(want.size());
        }
        // ARC hands out table keys ({h2, h2}, "Keys ARC names" in
        // concurrent_arc.h); the reference keeps whole HashPairs.
        for (size_t k = 0; k < want.size(); ++k) {
          if (!(rec.evicted[k].first == ArcTableKey(want[k].h2)) ||
              rec.evicted[k].second != ValueOf(want[k])) {
            return where.str() + "shrink evicted another key or value";
          }
        }
        const ArcShape shape = arc->Shape();
        if (shape.t1 != ref.size(ArcList::kT1) ||
            shape.t2 != ref.size(ArcList::kT2) ||
            shape.b1 != ref.size(ArcList::kB1) ||
            shape.b2 != ref.size(ArcList::kB2) || shape.p != ref.p()) {
          return where.str() + "list sizes or p differ after the shrink";
        }
        const std::string bad = arc->CheckInvariants();
        if (!bad.empty()) return where.str() + bad;
      } else {
        const absl::Status grown = arc->Grow(next_growth->second);
        if (!grown.ok()) return where.str() + grown.ToString();
        ref.Grow(next_growth->second);
      }
      ++next_growth;
    }
    const ArcAccessResult want = ref.Access(x);
    rec.evicted.clear();
    const std::optional<uint64_t> found = arc->Find(x);
    if (found.has_value() != want.hit) {
      return where.str() + (want.hit ? "reference hit, Find missed"
                                     : "reference missed, Find hit");
    }
    if (found.has_value()) {
      if (*found != ValueOf(x)) return where.str() + "wrong value";
      continue;
    }
    const CMapSetResult r = arc->Set(x, ValueOf(x));
    if (r.err != Error::kOk || !r.inserted) {
      return where.str() + "Set failed or did not insert: " +
             std::string(ErrorName(r.err));
    }
    if (rec.evicted.size() != (want.evicted ? 1u : 0u)) {
      return where.str() + "evictions: reference " +
             std::to_string(want.evicted) + ", ConcurrentARC " +
             std::to_string(rec.evicted.size());
    }
    if (want.evicted) {
      const auto& [key, value] = rec.evicted[0];
      if (!(key == ArcTableKey(want.evicted_fingerprint)) ||
          value != ValueOf(key)) {
        return where.str() + "evicted a different key or value";
      }
      const ArcList to = arc->Where(key);
      if (to != want.evicted_to) {
        return where.str() + "evicted key went to " + Name(to) +
               ", reference " + Name(want.evicted_to);
      }
    }
    if (arc->Shape().p != ref.p()) return where.str() + "p differs";
  }
  arc->DrainPromotions();
  const ArcShape shape = arc->Shape();
  if (shape.t1 != ref.size(ArcList::kT1) || shape.t2 != ref.size(ArcList::kT2) ||
      shape.b1 != ref.size(ArcList::kB1) || shape.b2 != ref.size(ArcList::kB2)) {
    return "final list sizes differ";
  }
  const ConcurrentArcStats s = arc->stats();
  if (s.promotions_stale != 0 || s.promotions_dropped != 0) {
    return "single-threaded run lost or staled promotions";
  }
  return arc->CheckInvariants();
}

class ConcurrentArcEquivalenceTest
    : public ::testing::TestWithParam<std::tuple<TraceKind, uint32_t>> {};

TEST_P(ConcurrentArcEquivalenceTest, FindThenSetMatchesTheReference) {
  const auto [kind, c] = GetParam();
  const uint64_t universe =
      c >= 1000 ? 10 * uint64_t{c} : std::max<uint64_t>(10 * c, 8);
  const size_t ops = c >= 1000 ? 100000 : 20000;
  EXPECT_EQ(CompareWithReference(MakeTrace(kind, universe, ops, 7 + c), c), "")
      << TraceName(kind) << " c=" << c;
}

// The same with c doubling at a quarter of the trace and growing to 3 * 2c
// + 1 at half of it, the keys moved only by the Sets (kGrowMovesPerSet).
TEST_P(ConcurrentArcEquivalenceTest, FindThenSetMatchesTheReferenceAcrossGrowths) {
  const auto [kind, c] = GetParam();
  const uint32_t final_c = 6 * c + 1;
  const uint64_t universe =
      c >= 1000 ? 10 * uint64_t{final_c} : std::max<uint64_t>(10 * final_c, 8);
  const size_t ops = c >= 1000 ? 100000 : 20000;
  EXPECT_EQ(CompareWithReference(MakeTrace(kind, universe, ops, 9 + c), c,
                                 {{ops / 4, 2 * c}, {ops / 2, final_c}}),
            "")
      << TraceName(kind) << " c=" << c;
}

// Shrinks and a growth between them: from 4c + 3 to c at a quarter of the
// trace, back up to 3c + 1 at half of it, and to c again at three quarters
// (issue 13: the key table gives its memory back). Each shrink runs to its
// end at once; after it, ARC runs with the smaller c.
TEST_P(ConcurrentArcEquivalenceTest, FindThenSetMatchesTheReferenceAcrossShrinks) {
  const auto [kind, c] = GetParam();
  const uint32_t first_c = 4 * c + 3;
  const uint64_t universe =
      c >= 1000 ? 10 * uint64_t{first_c} : std::max<uint64_t>(10 * first_c, 8);
  const size_t ops = c >= 1000 ? 100000 : 20000;
  EXPECT_EQ(CompareWithReference(
                MakeTrace(kind, universe, ops, 11 + c), first_c,
                {{ops / 4, c}, {ops / 2, 3 * c + 1}, {3 * ops / 4, c}}),
            "")
      << TraceName(kind) << " c=" << c;
}

INSTANTIATE_TEST_SUITE_P(
    AllTracesAndCapacities, ConcurrentArcEquivalenceTest,
    ::testing::Combine(::testing::ValuesIn(kAllTraceKinds),
                       ::testing::Values(1u, 2u, 3u, 7u, 64u, 1000u)),
    [](const auto& info) {
      return std::string(TraceName(std::get<0>(info.param))) + "_c" +
             std::to_string(std::get<1>(info.param));
    });

// ARC names a key by its H2, as the table does (ConcurrentARC, "Keys ARC
// names"): a second key with the same H2 is the same key to both, so a Set
// of it overwrites, and the lists and the table keep agreeing through the
// evictions that follow. (With per-resident HashPair records ARC counted
// the twin as a second key the table did not have: "CMap holds 1 keys,
// T1+T2 2".)
TEST(ConcurrentArcTest, TwoKeysWithOneH2AreOneKeyInArcAndTable) {
  int evicted = 0;
  Arc::Options o;
  o.capacity = 4;
  o.on_evict = [&](const HashPair&, const uint64_t&) { ++evicted; };
  auto arc = *Arc::Create(o);
  const HashPair a{1, 0xfeedface12345678ULL};
  const HashPair twin{2, a.h2};
  ASSERT_EQ(arc->Set(a, 1).err, Error::kOk);
  ASSERT_EQ(arc->Set(twin, 2).err, Error::kOk);
  EXPECT_EQ(arc->size(), 1u);
  EXPECT_EQ(arc->CheckInvariants(), "");
  for (uint64_t id = 10; id < 40; ++id) {
    ASSERT_EQ(arc->Set(TraceKey(id), id).err, Error::kOk) << id;
    ASSERT_EQ(arc->CheckInvariants(), "") << id;
    ASSERT_LE(arc->size(), 4u);
  }
  EXPECT_EQ(arc->size(), 4u);
  EXPECT_EQ(evicted, 31 - 4);
}

TEST(ConcurrentArcTest, CreateRejectsZeroCapacity) {
  Arc::Options options;
  options.capacity = 0;
  absl::StatusOr<std::unique_ptr<Arc>> arc = Arc::Create(options);
  ASSERT_FALSE(arc.ok());
  EXPECT_EQ(arc.status().code(), absl::StatusCode::kInvalidArgument);
}

// The ARC arena and index are allocated first (two allocations), then CMap;
// a failure at any of them fails Create and frees what was allocated.
TEST(ConcurrentArcTest, CreateReportsAllocationFailure) {
  for (int fail_at : {0, 1, 2}) {
    FailingAllocator budget;
    budget.fail_at = fail_at;
    Arc::Options options;
    options.capacity = 100;
    options.allocator = budget.Get();
    absl::StatusOr<std::unique_ptr<Arc>> arc = Arc::Create(options);
    ASSERT_FALSE(arc.ok()) << fail_at;
    EXPECT_EQ(arc.status().code(), absl::StatusCode::kResourceExhausted);
  }
}

TEST(ConcurrentArcTest, GrowRejectsWhatIsNotAGrowth) {
  std::unique_ptr<Arc> arc = Make(100);
  EXPECT_EQ(arc->Grow(100).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(arc->Grow(50).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(arc->Grow(ArcFlatLists<>::kMaxCapacity + 1).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(arc->growing());
  EXPECT_TRUE(arc->GrowStep(1));  // nothing under way
  for (uint64_t i = 0; i < 100; ++i) arc->Set(TraceKey(i), i);
  ASSERT_TRUE(arc->Grow(200).ok());
  EXPECT_TRUE(arc->growing());
  EXPECT_EQ(arc->capacity(), 200u);
  const absl::Status again = arc->Grow(400);
  EXPECT_EQ(again.code(), absl::StatusCode::kInvalidArgument) << again;
  while (!arc->GrowStep(7)) {
  }
  EXPECT_FALSE(arc->growing());
  EXPECT_TRUE(arc->Grow(400).ok());
}

// An allocation failure during Grow, at each of its allocations (the new
// table, then ARC's index and arena), changes nothing: c, the keys
// and the next Grow are as before.
TEST(ConcurrentArcTest, AFailedGrowChangesNothing) {
  FailingAllocator budget;
  Arc::Options options;
  options.capacity = 64;
  options.allocator = budget.Get();
  absl::StatusOr<std::unique_ptr<Arc>> made = Arc::Create(options);
  ASSERT_TRUE(made.ok());
  Arc& arc = **made;
  for (uint64_t i = 0; i < 64; ++i) arc.Set(TraceKey(i), i);
  for (int nth = 0;; ++nth) {
    budget.calls = 0;
    budget.fail_at = nth;
    const absl::Status grown = arc.Grow(128);
    if (grown.ok()) {
      EXPECT_GE(nth, 4) << "Grow allocates the table and ARC's three arrays";
      break;
    }
    EXPECT_EQ(grown.code(), absl::StatusCode::kResourceExhausted) << grown;
    EXPECT_EQ(arc.capacity(), 64u);
    EXPECT_FALSE(arc.growing());
    EXPECT_EQ(arc.policy_memory_bytes(), ArcFlatLists<>::BytesFor(64));
    for (uint64_t i = 0; i < 64; ++i) {
      ASSERT_EQ(arc.Find(TraceKey(i)), std::optional<uint64_t>(i));
    }
    ASSERT_LT(nth, 10);
  }
  EXPECT_EQ(arc.CheckInvariants(), "");
}

// With no GrowStep at all, Sets alone finish a growth (kGrowMovesPerSet
// each) and release what it retired; every key stays readable throughout,
// and the grown cache holds the new c.
TEST(ConcurrentArcTest, SetsAloneFinishAGrowth) {
  std::unique_ptr<Arc> arc = Make(500);
  for (uint64_t i = 0; i < 500; ++i) arc->Set(TraceKey(i), ValueOf(TraceKey(i)));
  EXPECT_EQ(arc->policy_memory_bytes(), ArcFlatLists<>::BytesFor(500));
  ASSERT_TRUE(arc->Grow(1200).ok());
  EXPECT_EQ(arc->policy_memory_bytes(),
            ArcFlatLists<>::GrowthPeakBytes(500, 1200));
  EXPECT_EQ(arc->table_capacity(), 1200u);
  uint64_t next = 500;
  while (arc->growing()) {
    const HashPair k = TraceKey(next++);
    ASSERT_EQ(arc->Set(k, ValueOf(k)).err, Error::kOk);
    for (uint64_t i = 0; i < next; i += 37) {
      const std::optional<uint64_t> v = arc->Find(TraceKey(i));
      ASSERT_TRUE(!v.has_value() || *v == ValueOf(TraceKey(i)));
    }
    ASSERT_LT(next, 100000u) << "Sets do not finish the growth";
  }
  EXPECT_EQ(arc->policy_memory_bytes(), ArcFlatLists<>::BytesFor(1200));
  EXPECT_EQ(arc->CheckInvariants(), "");
  for (; next < 3000; ++next) arc->Set(TraceKey(next), ValueOf(TraceKey(next)));
  EXPECT_EQ(arc->size(), 1200u);
  EXPECT_EQ(arc->stats().evictions, 3000u - 1200u);
  EXPECT_EQ(arc->CheckInvariants(), "");
}

// A growth is over only once its retired memory is released: while the Set
// that finished it is still freeing the old arrays (after the SpinLock),
// growing() stays true, GrowStep says "not done" and a new Grow is refused,
// so nobody sees a finished growth whose memory is still mapped (the
// engine's page accounting did, and went over a small budget now and then).
TEST(ConcurrentArcTest, AGrowthEndsWhenItsMemoryIsReleased) {
  // The default allocator; once armed, its first Deallocate (the finishing
  // Set releasing ARC's old arrays) waits until the test lets it go on.
  struct HoldingAllocator {
    std::atomic<bool> armed{false};
    std::latch entered{1};
    std::latch go{1};
    RawAllocator Get() {
      return RawAllocator{
          [](void*, size_t bytes) -> void* {
            return RawAllocator::Default().Allocate(bytes);
          },
          [](void* ctx, void* p, size_t bytes) {
            auto* self = static_cast<HoldingAllocator*>(ctx);
            if (self->armed.exchange(false)) {
              self->entered.count_down();
              self->go.wait();
            }
            RawAllocator::Default().Deallocate(p, bytes);
          },
          this};
    }
  } hold;
  Arc::Options options;
  options.capacity = 64;
  options.allocator = hold.Get();
  absl::StatusOr<std::unique_ptr<Arc>> made = Arc::Create(options);
  ASSERT_TRUE(made.ok());
  Arc& arc = **made;
  for (uint64_t i = 0; i < 64; ++i) arc.Set(TraceKey(i), i);
  ASSERT_TRUE(arc.Grow(128).ok());
  hold.armed = true;
  std::thread setter([&] {
    for (uint64_t i = 64; arc.growing() && i < 100000; ++i) {
      arc.Set(TraceKey(i), i);
    }
  });
  hold.entered.wait();  // the finishing Set is releasing the old memory
  EXPECT_TRUE(arc.growing());
  EXPECT_FALSE(arc.GrowStep(64));
  EXPECT_EQ(arc.Grow(256).code(), absl::StatusCode::kInvalidArgument);
  hold.go.count_down();
  setter.join();
  EXPECT_FALSE(arc.growing());
  EXPECT_TRUE(arc.GrowStep(64));
  EXPECT_EQ(arc.capacity(), 128u);
  EXPECT_EQ(arc.CheckInvariants(), "");
}

std::unique_ptr<Arc> MakeMapped(uint32_t capacity) {
  Arc::Options options;
  options.capacity = capacity;
  options.allocator = RawAllocator::Mapped();
  absl::StatusOr<std::unique_ptr<Arc>> made = Arc::Create(options);
  EXPECT_TRUE(made.ok()) << made.status();
  return made.ok() ? *std::move(made) : nullptr;
}

// A growth gives the old table's slots and the old ARC arrays back behind
// its cursors while it goes on: half-way through, a third of the old
// generation's bytes are released; at the end, the old table's whole.
TEST(ConcurrentArcTest, AGrowthGivesTheOldMemoryBackAsItGoes) {
  constexpr uint32_t c = 40'000;
  std::unique_ptr<Arc> arc = MakeMapped(c);
  ASSERT_NE(arc, nullptr);
  for (uint64_t i = 0; i < c; ++i) arc->Set(TraceKey(i), ValueOf(TraceKey(i)));
  EXPECT_EQ(arc->released_bytes(), 0u);
  ASSERT_TRUE(arc->Grow(2 * c).ok());
  for (uint32_t moved = 0; moved < c / 2; moved += 64) {
    ASSERT_FALSE(arc->GrowStep(64));
  }
  EXPECT_GE(arc->released_bytes(), Arc::BytesFor(c) / 3);
  while (!arc->GrowStep(64)) {
  }
  EXPECT_GE(arc->released_bytes(),
            ResizableCMap<uint64_t>::BytesFor(c) - 3 * 4096);
  EXPECT_LE(arc->released_bytes(), ResizableCMap<uint64_t>::BytesFor(c));
  for (uint64_t i = 0; i < c; ++i) {
    ASSERT_EQ(arc->Find(TraceKey(i)), ValueOf(TraceKey(i))) << i;
  }
  EXPECT_EQ(arc->CheckInvariants(), "");
}

// The same under concurrent Sets (each a growth step whose tail may give
// pages back) and Finds, with the worker stepping: no read sees a foreign
// value or misses an old key, and the old arrays are unmapped only after
// every step that handed out their pages has given them back (TSAN and
// ASAN check that part).
TEST(ConcurrentArcTest, GivingMemoryBackRacesSetsAndFinds) {
  constexpr uint32_t c = 20'000;
  std::unique_ptr<Arc> arc = MakeMapped(c);
  ASSERT_NE(arc, nullptr);
  for (uint64_t i = 0; i < c; ++i) arc->Set(TraceKey(i), ValueOf(TraceKey(i)));
  ASSERT_TRUE(arc->Grow(2 * c).ok());
  std::atomic<bool> grown{false};
  std::atomic<uint64_t> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      for (uint64_t i = c + t; i < 2 * c && !grown.load(); i += 2) {
        if (arc->Set(TraceKey(i), ValueOf(TraceKey(i))).err != Error::kOk &&
            arc->Set(TraceKey(i), ValueOf(TraceKey(i))).err != Error::kOk) {
          bad.fetch_add(1);
        }
      }
    });
  }
  threads.emplace_back([&] {
    for (uint64_t round = 0; !grown.load(); ++round) {
      for (uint64_t i = round % 7; i < c; i += 7) {
        if (arc->Find(TraceKey(i)) != ValueOf(TraceKey(i))) bad.fetch_add(1);
      }
    }
  });
  while (!arc->GrowStep(16)) {
  }
  grown.store(true);
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(bad.load(), 0u);
  EXPECT_GE(arc->released_bytes(),
            ResizableCMap<uint64_t>::BytesFor(c) - 3 * 4096);
  EXPECT_EQ(arc->CheckInvariants(), "");
}

#if !defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)
// What the engine plans for a growth (memory_plan.cc,
// KeyTableGrowthPeakBytes): the new generation whole plus a quarter of the
// old one in memory at once. Checked on the RSS between growth steps, with
// Sets of new keys between them (the worker's GrowStep(4096) against a
// node's Sets in one maintenance pass), from none to many more Sets than
// moves: the RSS never rises more than a quarter of the old generation's
// bytes above both what the cache held before the growth and what it
// holds after it. Seen to fail (not committed) when the old generation is
// kept until the end (the growth before 2026-11-24: 0.35-0.48 of it above
// both), and with 2 moves a Set instead of kGrowMovesPerSet's 64 (0.42 at
// 1,000 Sets a step: new keys bring the new table's pages in before the
// old one is given back).
TEST(ConcurrentArcTest, AGrowthHoldsTheNewTableAndAQuarterOfTheOld) {
  constexpr uint32_t c = 100'000;
  for (int sets_per_step : {0, 1000, 20000}) {
    std::unique_ptr<Arc> arc = MakeMapped(c);
    ASSERT_NE(arc, nullptr);
    for (uint64_t i = 0; i < c; ++i) {
      arc->Set(TraceKey(i), ValueOf(TraceKey(i)));
    }
    const size_t start = VmRssBytes();
    ASSERT_TRUE(arc->Grow(2 * c).ok());
    size_t peak = start;
    uint64_t next = c;
    for (bool done = false; !done;) {
      for (int s = 0; s < sets_per_step; ++s, ++next) {
        arc->Set(TraceKey(next), ValueOf(TraceKey(next)));
      }
      done = arc->GrowStep(4096);
      peak = std::max(peak, VmRssBytes());
    }
    const size_t end = VmRssBytes();
    const double mib = 1048576.0;
    std::printf("%d Sets a step: RSS %.2f -> peak %.2f -> %.2f MiB; a quarter "
                "of the old generation %.2f MiB\n",
                sets_per_step, start / mib, peak / mib, end / mib,
                Arc::BytesFor(c) / 4 / mib);
    EXPECT_LE(peak - std::max(start, end), Arc::BytesFor(c) / 4)
        << sets_per_step << " Sets a step";
  }
}
#endif

TEST(ConcurrentArcTest, ShrinkRejectsWhatIsNotAShrink) {
  std::unique_ptr<Arc> arc = Make(100);
  EXPECT_EQ(arc->Shrink(100).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(arc->Shrink(200).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(arc->Shrink(0).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(arc->growing());
  ASSERT_TRUE(arc->Grow(200).ok());
  EXPECT_EQ(arc->Shrink(50).code(), absl::StatusCode::kInvalidArgument)
      << "one resize at a time";
  while (!arc->GrowStep(7)) {
  }
  ASSERT_TRUE(arc->Shrink(50).ok());
  EXPECT_EQ(arc->capacity(), 50u);
  EXPECT_EQ(arc->Grow(100).code(), absl::StatusCode::kInvalidArgument);
  while (!arc->GrowStep(7)) {
  }
  EXPECT_TRUE(arc->Grow(100).ok()) << "a growth may follow a shrink";
}

// A full cache of 100,000 shrinks to 10,000 with Sets of new keys between
// the worker's steps: the keys beyond c' leave through on_evict (as forced
// evictions), the rest read back, ARC's bounds hold for c', the keys read
// last are the ones kept, and the big table and ARC state are given back
// (the RSS falls by most of their difference).
TEST(ConcurrentArcTest, AShrinkEvictsThroughOnEvictAndGivesTheMemoryBack) {
  constexpr uint32_t kBig = 100'000, kSmall = 10'000;
  // Counted, not recorded: a growing record would raise the RSS measured.
  uint64_t evict_calls = 0, bad_values = 0;
  Arc::Options options;
  options.capacity = kBig;
  options.allocator = RawAllocator::Mapped();
  options.on_evict = [&](const HashPair& h, const uint64_t& v) {
    ++evict_calls;
    bad_values += v != ValueOf(h);
  };
  absl::StatusOr<std::unique_ptr<Arc>> made = Arc::Create(options);
  ASSERT_TRUE(made.ok()) << made.status();
  Arc& arc = **made;
  // Twice c keys: the cache is full and ghosts fill the directory.
  for (uint64_t i = 0; i < 2 * kBig; ++i) {
    ASSERT_EQ(arc.Set(TraceKey(i), ValueOf(TraceKey(i))).err, Error::kOk);
  }
  for (uint64_t i = kBig; i < kBig + kBig / 2; ++i) arc.Find(TraceKey(i));
  const ConcurrentArcStats before = arc.stats();
  const uint64_t evict_calls_before = evict_calls;
  const size_t rss_before = VmRssBytes();
  ASSERT_TRUE(arc.Shrink(kSmall).ok());
  EXPECT_EQ(arc.capacity(), kSmall) << "c is lowered at once";
  uint64_t next = 2 * kBig;
  size_t steps = 0;
  while (!arc.GrowStep(256)) {
    if (++steps % 4 == 0) {
      ASSERT_EQ(arc.Set(TraceKey(next), ValueOf(TraceKey(next))).err,
                Error::kOk);
      ++next;
    }
  }
  const size_t rss_after = VmRssBytes();
  EXPECT_EQ(arc.CheckInvariants(), "");
  EXPECT_EQ(arc.table_capacity(), kSmall);
  EXPECT_EQ(arc.size(), kSmall);
  EXPECT_EQ(arc.policy_memory_bytes(), ArcFlatLists<>::BytesFor(kSmall));
  const ConcurrentArcStats s = arc.stats();
  EXPECT_EQ(s.shrinks, 1u);
  // Every key that left went through on_evict: the trim's as forced
  // evictions, the Sets' misses as evictions.
  EXPECT_EQ(evict_calls - evict_calls_before,
            (s.forced_evictions - before.forced_evictions) +
                (s.evictions - before.evictions));
  EXPECT_EQ(bad_values, 0u);
  EXPECT_EQ(s.inserts - s.evictions - s.forced_evictions, arc.size());
  // The residents read back with their values.
  size_t resident = 0;
  for (uint64_t i = 0; i < next; ++i) {
    const std::optional<uint64_t> v = arc.Peek(TraceKey(i));
    if (v.has_value()) {
      ASSERT_EQ(*v, ValueOf(TraceKey(i)));
      ++resident;
    }
  }
  EXPECT_EQ(resident, kSmall);
  // The keys read before the shrink (T2) were kept over the others (the
  // trim evicts in REPLACE order, T1 first while |T1| > p = 0).
  size_t kept_read = 0;
  for (uint64_t i = kBig; i < kBig + kBig / 2; ++i) {
    kept_read += arc.Peek(TraceKey(i)).has_value();
  }
  EXPECT_GE(kept_read, kSmall - (next - 2 * kBig));
  EXPECT_GE(rss_before - rss_after,
            (Arc::BytesFor(kBig) - Arc::BytesFor(kSmall)) * 8 / 10)
      << "RSS " << rss_before << " -> " << rss_after;
}

TEST(ConcurrentArcTest, BytesForIsTheTableAndArcState) {
  EXPECT_EQ(Arc::BytesFor(1000), ResizableCMap<uint64_t>::BytesFor(1000) +
                                     ArcFlatLists<>::BytesFor(1000));
}

// REPLACE runs before the insert, so CMap is sized for exactly c keys.
TEST(ConcurrentArcTest, TableAdmitsExactlyCapacity) {
  for (uint32_t c : {1u, 64u, 1000u}) {
    std::unique_ptr<Arc> arc = Make(c);
    EXPECT_EQ(arc->table_capacity(), c);
    for (uint64_t i = 0; i < 3 * c; ++i) {
      ASSERT_EQ(arc->Set(TraceKey(i), i).err, Error::kOk);
    }
    EXPECT_EQ(arc->size(), c);
  }
}

TEST(ConcurrentArcTest, FindMissChangesNothing) {
  std::unique_ptr<Arc> arc = Make(4);
  EXPECT_FALSE(arc->Find(TraceKey(1)).has_value());
  arc->DrainPromotions();
  const ConcurrentArcStats s = arc->stats();
  EXPECT_EQ(s.hits_applied + s.promotions_stale, 0u);
  EXPECT_EQ(arc->Where(TraceKey(1)), ArcList::kNone);
}

TEST(ConcurrentArcTest, SetInsertsThenUpdates) {
  Recorder rec;
  std::unique_ptr<Arc> arc = Make(4, &rec);
  const HashPair k = TraceKey(1);
  CMapSetResult r = arc->Set(k, 10);
  EXPECT_EQ(r.err, Error::kOk);
  EXPECT_TRUE(r.inserted);
  EXPECT_EQ(arc->Where(k), ArcList::kT1);
  EXPECT_TRUE(rec.promoted.empty());

  // An update is an ARC hit: T1 -> T2, a promotion.
  r = arc->Set(k, 11);
  EXPECT_EQ(r.err, Error::kOk);
  EXPECT_FALSE(r.inserted);
  EXPECT_EQ(arc->Find(k), 11u);
  EXPECT_EQ(arc->Where(k), ArcList::kT2);
  ASSERT_EQ(rec.promoted.size(), 1u);
  EXPECT_EQ(rec.promoted[0], k);

  // Already in T2: no second promotion.
  arc->Set(k, 12);
  EXPECT_EQ(rec.promoted.size(), 1u);
  EXPECT_EQ(arc->stats().updates, 2u);
  EXPECT_EQ(arc->stats().inserts, 1u);
  EXPECT_EQ(arc->size(), 1u);
}

TEST(ConcurrentArcTest, ReadHitsArePromotedWhenDrained) {
  Recorder rec;
  std::unique_ptr<Arc> arc = Make(4, &rec);
  const HashPair k = TraceKey(1);
  arc->Set(k, 1);
  EXPECT_EQ(arc->Find(k), 1u);
  EXPECT_EQ(arc->Where(k), ArcList::kT1);  // queued, not applied yet
  arc->DrainPromotions();
  EXPECT_EQ(arc->Where(k), ArcList::kT2);
  EXPECT_EQ(rec.promoted.size(), 1u);
  arc->Find(k);
  arc->DrainPromotions();
  EXPECT_EQ(rec.promoted.size(), 1u);  // a T2 refresh is not a promotion
  EXPECT_EQ(arc->stats().hits_applied, 2u);
  EXPECT_EQ(arc->stats().promotions, 1u);
}

// TryDrainPromotions applies the queue when the lock is free and gives up,
// applying nothing, while it is held: here from inside the promotion
// callback, which runs under the lock (DrainPromotions would deadlock).
TEST(ConcurrentArcTest, TryDrainPromotionsGivesUpWhileTheLockIsHeld) {
  Arc::Options options;
  options.capacity = 4;
  Arc* self = nullptr;
  std::vector<bool> nested;  // TryDrainPromotions' answers inside the lock
  options.on_promote = [&](const HashPair&) {
    nested.push_back(self->TryDrainPromotions());
  };
  absl::StatusOr<std::unique_ptr<Arc>> made = Arc::Create(options);
  ASSERT_TRUE(made.ok()) << made.status();
  std::unique_ptr<Arc> arc = *std::move(made);
  self = arc.get();
  const HashPair a = TraceKey(1), b = TraceKey(2);
  arc->Set(a, 1);
  arc->Set(b, 2);
  arc->Find(a);
  arc->Find(b);
  EXPECT_TRUE(arc->TryDrainPromotions());
  EXPECT_EQ(arc->Where(a), ArcList::kT2);
  EXPECT_EQ(arc->Where(b), ArcList::kT2);
  EXPECT_EQ(nested, std::vector<bool>({false, false}));
  EXPECT_EQ(arc->stats().promotions, 2u);
}

// Every 64th queued hit drains cooperatively, without any writer.
TEST(ConcurrentArcTest, EverySixtyFourthFindDrains) {
  std::unique_ptr<Arc> arc = Make(4);
  arc->Set(TraceKey(1), 1);
  for (int i = 0; i < 63; ++i) arc->Find(TraceKey(1));
  EXPECT_EQ(arc->stats().hits_applied, 0u);
  arc->Find(TraceKey(1));
  EXPECT_EQ(arc->stats().hits_applied, 64u);
}

TEST(ConcurrentArcTest, EvictionCallbackGetsKeyAndValue) {
  Recorder rec;
  std::unique_ptr<Arc> arc = Make(2, &rec);
  arc->Set(TraceKey(1), 100);
  arc->Set(TraceKey(1), 101);  // T2 = {1}
  arc->Set(TraceKey(2), 200);  // T1 = {2}
  arc->Set(TraceKey(3), 300);  // full: REPLACE takes 2 (|T1| = 1 > p = 0)
  ASSERT_EQ(rec.evicted.size(), 1u);
  EXPECT_EQ(rec.evicted[0].first, Named(2));
  EXPECT_EQ(rec.evicted[0].second, 200u);
  EXPECT_EQ(arc->Where(TraceKey(2)), ArcList::kB1);
  EXPECT_FALSE(arc->Find(TraceKey(2)).has_value());
  EXPECT_EQ(arc->stats().evictions, 1u);
  EXPECT_EQ(arc->size(), 2u);
  EXPECT_EQ(arc->CheckInvariants(), "");
}

// Case IV with |T1| == c: the LRU of T1 is dropped, not made a ghost.
TEST(ConcurrentArcTest, CaseFourDropsTheLruOfT1) {
  Recorder rec;
  std::unique_ptr<Arc> arc = Make(2, &rec);
  arc->Set(TraceKey(1), 1);
  arc->Set(TraceKey(2), 2);
  arc->Set(TraceKey(3), 3);
  ASSERT_EQ(rec.evicted.size(), 1u);
  EXPECT_EQ(rec.evicted[0].first, Named(1));
  EXPECT_EQ(arc->Where(TraceKey(1)), ArcList::kNone);
}

TEST(ConcurrentArcTest, GhostHitComesBackIntoT2AndIsAPromotion) {
  Recorder rec;
  std::unique_ptr<Arc> arc = Make(2, &rec);
  for (uint64_t id : {1, 1, 2, 3}) arc->Set(TraceKey(id), id);
  ASSERT_EQ(arc->Where(TraceKey(2)), ArcList::kB1);
  rec.promoted.clear();
  const CMapSetResult r = arc->Set(TraceKey(2), 22);
  EXPECT_TRUE(r.inserted);
  EXPECT_EQ(arc->Where(TraceKey(2)), ArcList::kT2);
  EXPECT_EQ(arc->Shape().p, 1u);
  ASSERT_EQ(rec.promoted.size(), 1u);
  EXPECT_EQ(rec.promoted[0], TraceKey(2));
  EXPECT_EQ(arc->stats().ghost_hits, 1u);
}

TEST(ConcurrentArcTest, EraseRemovesResidentAndGhostKeys) {
  Recorder rec;
  std::unique_ptr<Arc> arc = Make(2, &rec);
  for (uint64_t id : {1, 1, 2, 3}) arc->Set(TraceKey(id), id * 10);
  // 1 in T2, 3 in T1, 2 a ghost in B1.
  uint64_t erased = 0;
  EXPECT_EQ(arc->Erase(TraceKey(1), &erased), Error::kOk);
  EXPECT_EQ(erased, 10u);
  EXPECT_FALSE(arc->Find(TraceKey(1)).has_value());
  EXPECT_EQ(arc->Where(TraceKey(1)), ArcList::kNone);  // no ghost
  EXPECT_EQ(arc->Erase(TraceKey(1)), Error::kKeyNotFound);
  const size_t evicted_before = rec.evicted.size();

  EXPECT_EQ(arc->Erase(TraceKey(2)), Error::kKeyNotFound);  // a ghost
  EXPECT_EQ(arc->Where(TraceKey(2)), ArcList::kNone);
  // Setting it again is a plain insert, not a ghost hit: p stays put.
  const uint64_t p = arc->Shape().p;
  arc->Set(TraceKey(2), 20);
  EXPECT_EQ(arc->Where(TraceKey(2)), ArcList::kT1);
  EXPECT_EQ(arc->Shape().p, p);
  EXPECT_EQ(arc->stats().ghost_hits, 0u);
  EXPECT_EQ(rec.evicted.size(), evicted_before);  // Erase is not an eviction
  EXPECT_EQ(arc->stats().erases, 1u);
  EXPECT_EQ(arc->CheckInvariants(), "");
}

TEST(ConcurrentArcTest, ForceEvictOneOnEmptyCache) {
  std::unique_ptr<Arc> arc = Make(4);
  EXPECT_EQ(arc->ForceEvictOne().err, Error::kKeyNotFound);
}

TEST(ConcurrentArcTest, ForceEvictOneEvictsIntoGhostsAndTheCacheRefills) {
  Recorder rec;
  std::unique_ptr<Arc> arc = Make(3, &rec);
  for (uint64_t id : {1, 2, 3}) arc->Set(TraceKey(id), id);
  const ForcedEviction<uint64_t> e = arc->ForceEvictOne();
  ASSERT_EQ(e.err, Error::kOk);
  EXPECT_EQ(e.key, Named(1));  // LRU of T1 (|T1| = 3 > p = 0)
  EXPECT_EQ(e.value, 1u);
  ASSERT_EQ(rec.evicted.size(), 1u);
  EXPECT_EQ(rec.evicted[0].first, Named(1));
  EXPECT_EQ(arc->Where(TraceKey(1)), ArcList::kB1);
  EXPECT_EQ(arc->size(), 2u);
  EXPECT_EQ(arc->stats().forced_evictions, 1u);

  // Below c now: the next insert needs no eviction.
  arc->Set(TraceKey(4), 4);
  EXPECT_EQ(rec.evicted.size(), 1u);
  EXPECT_EQ(arc->size(), 3u);
  EXPECT_EQ(arc->CheckInvariants(), "");

  // Evict everything, then nothing is left.
  for (int i = 0; i < 3; ++i) EXPECT_EQ(arc->ForceEvictOne().err, Error::kOk);
  EXPECT_EQ(arc->size(), 0u);
  EXPECT_EQ(arc->ForceEvictOne().err, Error::kKeyNotFound);
  EXPECT_EQ(arc->CheckInvariants(), "");
}

// ColdestKeys names, without evicting, exactly the keys that ForceEvictOne
// then evicts one after another, from both lists and with p > 0.
TEST(ConcurrentArcTest, ColdestKeysAreTheNextForcedEvictionsInOrder) {
  std::unique_ptr<Arc> arc = Make(64);
  // T1 full; half of it read (-> T2); new keys push the other half to B1;
  // those come back (B1 ghost hits: p grows) and a few more are read.
  for (uint64_t id = 0; id < 64; ++id) arc->Set(TraceKey(id), id);
  for (uint64_t id = 0; id < 32; ++id) arc->Find(TraceKey(id));
  arc->DrainPromotions();
  for (uint64_t id = 64; id < 96; ++id) arc->Set(TraceKey(id), id);
  for (uint64_t id = 32; id < 48; ++id) arc->Set(TraceKey(id), id);
  for (uint64_t id = 64; id < 70; ++id) arc->Find(TraceKey(id));
  arc->DrainPromotions();
  const ArcShape shape = arc->Shape();
  ASSERT_GT(shape.t1, 0u);
  ASSERT_GT(shape.t2, 0u);
  ASSERT_GT(shape.p, 0u);
  std::vector<HashPair> coldest;
  arc->ColdestKeys(100, &coldest);
  ASSERT_EQ(coldest.size(), arc->size()) << "all resident keys, no more";
  const ArcShape after = arc->Shape();
  EXPECT_EQ(after.t1, shape.t1);
  EXPECT_EQ(after.t2, shape.t2);
  EXPECT_EQ(after.p, shape.p);
  for (size_t i = 0; i < coldest.size(); ++i) {
    const ForcedEviction<uint64_t> e = arc->ForceEvictOne();
    ASSERT_EQ(e.err, Error::kOk) << i;
    ASSERT_EQ(e.key, coldest[i]) << "eviction " << i;
  }
  EXPECT_EQ(arc->size(), 0u);
  // A bound below the resident count is honoured.
  arc->Set(TraceKey(1), 1);
  arc->Set(TraceKey(2), 2);
  coldest.clear();
  arc->ColdestKeys(1, &coldest);
  ASSERT_EQ(coldest.size(), 1u);
  EXPECT_EQ(coldest[0], Named(1));
}

TEST(ConcurrentArcTest, UpdateInPlaceChangesTheValueAndCountsAsAHit) {
  std::unique_ptr<Arc> arc = Make(4);
  EXPECT_EQ(arc->UpdateInPlace(TraceKey(1), [](uint64_t& v) { v = 5; }),
            Error::kKeyNotFound);
  arc->Set(TraceKey(1), 1);
  EXPECT_EQ(arc->UpdateInPlace(TraceKey(1), [](uint64_t& v) { v += 41; }),
            Error::kOk);
  EXPECT_EQ(arc->Find(TraceKey(1)), 42u);
  arc->DrainPromotions();
  EXPECT_EQ(arc->Where(TraceKey(1)), ArcList::kT2);
  EXPECT_EQ(arc->stats().hits_applied, 2u);
}

// Peek and UpdateInPlaceWithoutHit are for the engine's validation reads and
// relocation: same table operations, but no promotion is queued.
TEST(ConcurrentArcTest, PeekAndUpdateInPlaceWithoutHitAreNotReferences) {
  std::unique_ptr<Arc> arc = Make(4);
  EXPECT_FALSE(arc->Peek(TraceKey(1)).has_value());
  EXPECT_EQ(arc->UpdateInPlaceWithoutHit(TraceKey(1), [](uint64_t& v) { v = 5; }),
            Error::kKeyNotFound);
  arc->Set(TraceKey(1), 1);
  EXPECT_EQ(arc->Peek(TraceKey(1)), 1u);
  EXPECT_EQ(arc->UpdateInPlaceWithoutHit(TraceKey(1),
                                         [](uint64_t& v) { v += 41; }),
            Error::kOk);
  EXPECT_EQ(arc->Peek(TraceKey(1)), 42u);
  arc->DrainPromotions();
  EXPECT_EQ(arc->Where(TraceKey(1)), ArcList::kT1) << "still a one-hit key";
  EXPECT_EQ(arc->stats().hits_applied, 0u);
}

// kAbandonedSet paths. A writer inside UpdateInPlace holds the key's CMap
// slot; from inside its function, the same thread's Set / Erase /
// ForceEvictOne on that key must fail fast and change nothing.
TEST(ConcurrentArcTest, SetOfABusyKeyIsAbandonedAndChangesNothing) {
  std::unique_ptr<Arc> arc = Make(2);
  arc->Set(TraceKey(1), 1);
  CMapSetResult inner{Error::kOk, false};
  ASSERT_EQ(arc->UpdateInPlace(TraceKey(1),
                               [&](uint64_t& v) {
                                 inner = arc->Set(TraceKey(1), 99);
                                 v = 7;
                               }),
            Error::kOk);
  EXPECT_EQ(inner.err, Error::kAbandonedSet);
  EXPECT_EQ(arc->Find(TraceKey(1)), 7u);
  EXPECT_EQ(arc->stats().abandoned, 1u);
  EXPECT_EQ(arc->stats().updates, 0u);
}

TEST(ConcurrentArcTest, InsertWhoseVictimIsBusyIsAbandonedAndChangesNothing) {
  Recorder rec;
  std::unique_ptr<Arc> arc = Make(2, &rec);
  arc->Set(TraceKey(1), 1);
  arc->Set(TraceKey(1), 1);  // T2 = {1}
  arc->Set(TraceKey(2), 2);  // T1 = {2}: the next miss evicts 2
  arc->DrainPromotions();
  const ArcShape before = arc->Shape();
  CMapSetResult inner{Error::kOk, false};
  arc->UpdateInPlace(TraceKey(2), [&](uint64_t&) {
    inner = arc->Set(TraceKey(3), 3);
  });
  EXPECT_EQ(inner.err, Error::kAbandonedSet);
  EXPECT_FALSE(arc->Find(TraceKey(3)).has_value());
  EXPECT_EQ(arc->Where(TraceKey(3)), ArcList::kNone);
  EXPECT_EQ(arc->Where(TraceKey(2)), ArcList::kT1);
  const ArcShape after = arc->Shape();
  EXPECT_EQ(after.t1, before.t1);
  EXPECT_EQ(after.t2, before.t2);
  EXPECT_EQ(after.b1, before.b1);
  EXPECT_EQ(after.b2, before.b2);
  EXPECT_EQ(after.p, before.p);
  EXPECT_TRUE(rec.evicted.empty());
  EXPECT_EQ(arc->CheckInvariants(), "");

  // Once the slot is free the same insert succeeds.
  EXPECT_EQ(arc->Set(TraceKey(3), 3).err, Error::kOk);
  EXPECT_EQ(rec.evicted.size(), 1u);
}

TEST(ConcurrentArcTest, EraseOfABusyKeyIsAbandonedAndChangesNothing) {
  std::unique_ptr<Arc> arc = Make(2);
  arc->Set(TraceKey(1), 1);
  Error inner = Error::kOk;
  arc->UpdateInPlace(TraceKey(1),
                     [&](uint64_t&) { inner = arc->Erase(TraceKey(1)); });
  EXPECT_EQ(inner, Error::kAbandonedSet);
  EXPECT_TRUE(arc->Find(TraceKey(1)).has_value());
  EXPECT_TRUE(IsResident(arc->Where(TraceKey(1))));
  EXPECT_EQ(arc->CheckInvariants(), "");
}

TEST(ConcurrentArcTest, ForceEvictOfABusyVictimIsAbandonedAndChangesNothing) {
  Recorder rec;
  std::unique_ptr<Arc> arc = Make(2, &rec);
  arc->Set(TraceKey(1), 1);
  Error inner = Error::kOk;
  arc->UpdateInPlace(TraceKey(1),
                     [&](uint64_t&) { inner = arc->ForceEvictOne().err; });
  EXPECT_EQ(inner, Error::kAbandonedSet);
  EXPECT_EQ(arc->Where(TraceKey(1)), ArcList::kT1);
  EXPECT_TRUE(rec.evicted.empty());
  EXPECT_EQ(arc->CheckInvariants(), "");
}

}  // namespace
}  // namespace furrballs
