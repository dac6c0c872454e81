#include "engine/arc/arc_policy.h"

#include <algorithm>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/arc/arc_trace.h"
#include "engine/arc/reference_arc.h"
#include "engine/arc/retired_memory.h"
#include "engine/common/hash_pair.h"
#include "engine/common/raw_allocator.h"

namespace furrballs {
namespace {

constexpr ArcList kLists[] = {ArcList::kT1, ArcList::kT2, ArcList::kB1,
                              ArcList::kB2};
constexpr uint32_t kCapacities[] = {1, 2, 3, 7, 64, 1000};

std::string Name(ArcList l) {
  switch (l) {
    case ArcList::kT1: return "T1";
    case ArcList::kT2: return "T2";
    case ArcList::kB1: return "B1";
    case ArcList::kB2: return "B2";
    case ArcList::kNone: return "dropped";
  }
  return "?";
}

// Whether list `l` of the production core holds `keys` in this order (MRU
// first), by fingerprint, and each key is found in its own slot.
bool Holds(const ArcPolicy& arc, ArcList l, const std::vector<HashPair>& keys) {
  const auto& lists = arc.lists();
  uint32_t s = lists.mru(l);
  for (const HashPair& k : keys) {
    if (s == kArcNil || lists.Find(k) != s || lists.fingerprint(s) != k.h2) {
      return false;
    }
    s = lists.next(s);
  }
  return s == kArcNil;
}

ArcPolicy Make(uint32_t capacity) {
  absl::StatusOr<ArcPolicy> arc =
      ArcPolicy::Create(capacity, RawAllocator::Default());
  EXPECT_TRUE(arc.ok()) << arc.status();
  return *std::move(arc);
}

// Which of the paper's cases each access took (classified on the reference
// before the access), so that tests can show they exercised all of them.
struct CaseCounts {
  uint64_t hits = 0;          // Case I
  uint64_t b1_hits = 0;       // Case II
  uint64_t b2_hits = 0;       // Case III
  uint64_t misses = 0;        // Case IV
  uint64_t drops = 0;         // Case IV A, LRU of T1 dropped (Finding 18)
  uint64_t guarded_decrements = 0;  // Case III with delta > p (§3.19)
  uint32_t max_size[4] = {0, 0, 0, 0};
  uint32_t max_tracked = 0;
  uint32_t max_resident = 0;
  uint64_t ops_while_growing = 0;  // accesses made while the index rehashed
};

// The ARC bounds, on the production core.
std::string CheckBounds(const ArcPolicy& arc) {
  const auto& l = arc.lists();
  const uint64_t c = arc.capacity();
  const uint64_t t1 = l.size(ArcList::kT1), t2 = l.size(ArcList::kT2);
  const uint64_t b1 = l.size(ArcList::kB1), b2 = l.size(ArcList::kB2);
  std::ostringstream out;
  if (t1 + t2 > c) out << "|T1|+|T2| = " << t1 + t2 << " > c; ";
  if (t1 + b1 > c) out << "|T1|+|B1| = " << t1 + b1 << " > c; ";
  if (t1 + t2 + b1 + b2 > 2 * c) out << "total > 2c; ";
  if (arc.p() > c) out << "p = " << arc.p() << " > c; ";
  return out.str();
}

// Runs `trace` through the production core and the reference, comparing
// every step: hit or miss, which key left the cache and where it went, and p.
// Returns an empty string, or a description of the first divergence.
// A growth of c to `to` before access number `op`, rehashed over the
// following accesses at `moves_per_op` index entries each.
struct GrowAt {
  size_t op;
  uint32_t to;
  size_t moves_per_op;
};

// Runs a started growth to its end and frees what it retired.
void FinishGrowth(ArcPolicy& arc) {
  while (!arc.GrowStep(1)) {
  }
  RetiredMemory retired;
  arc.TakeRetired(&retired);
}

std::string Compare(const std::vector<HashPair>& trace, uint32_t c,
                    CaseCounts* counts,
                    const std::vector<GrowAt>& growths = {}) {
  ArcPolicy arc = Make(c);
  ReferenceArc ref(c);
  auto next_growth = growths.begin();
  size_t moves_per_op = 0;
  for (size_t i = 0; i < trace.size(); ++i) {
    if (next_growth != growths.end() && next_growth->op == i) {
      if (arc.growing()) FinishGrowth(arc);
      absl::StatusOr<ArcPolicy::Growth> g =
          arc.AllocateGrowth(next_growth->to);
      if (!g.ok()) return g.status().ToString();
      arc.BeginGrow(*std::move(g));
      ref.Grow(next_growth->to);
      moves_per_op = next_growth->moves_per_op;
      ++next_growth;
    }
    const HashPair& x = trace[i];
    const ArcList before = ref.Where(x);
    const uint64_t p_before = ref.p();
    const uint64_t b1 = ref.size(ArcList::kB1), b2 = ref.size(ArcList::kB2);

    const ArcAccessResult want = ref.Access(x);
    const ArcAccessResult got = arc.Access(x);

    std::ostringstream where;
    where << "op " << i << " (key " << x.h2 << ", was "
          << (before == ArcList::kNone ? "untracked" : "in " + Name(before))
          << "): ";
    if (got.hit != want.hit) {
      return where.str() + (want.hit ? "reference hit, production missed"
                                     : "reference missed, production hit");
    }
    if (got.evicted != want.evicted) {
      return where.str() + (want.evicted ? "only the reference evicted"
                                         : "only production evicted");
    }
    if (want.evicted && (got.evicted_fingerprint != want.evicted_fingerprint ||
                         got.evicted_to != want.evicted_to)) {
      std::ostringstream o;
      o << "reference evicted " << want.evicted_fingerprint << " to "
        << Name(want.evicted_to) << ", production evicted "
        << got.evicted_fingerprint << " to " << Name(got.evicted_to);
      return where.str() + o.str();
    }
    if (arc.p() != ref.p()) {
      std::ostringstream o;
      o << "p " << arc.p() << " vs reference " << ref.p();
      return where.str() + o.str();
    }
    if (const std::string bad = CheckBounds(arc); !bad.empty()) {
      return where.str() + bad;
    }
    if (!IsResident(arc.lists().Where(x))) {
      return where.str() + "accessed key is not resident afterwards";
    }

    switch (before) {
      case ArcList::kT1:
      case ArcList::kT2: ++counts->hits; break;
      case ArcList::kB1: ++counts->b1_hits; break;
      case ArcList::kB2:
        ++counts->b2_hits;
        if ((b2 >= b1 ? 1 : b1 / b2) > p_before) ++counts->guarded_decrements;
        break;
      case ArcList::kNone: ++counts->misses; break;
    }
    if (want.evicted && want.evicted_to == ArcList::kNone) ++counts->drops;
    for (ArcList l : kLists) {
      uint32_t& m = counts->max_size[static_cast<int>(l)];
      m = std::max(m, arc.lists().size(l));
    }
    counts->max_tracked = std::max(counts->max_tracked, arc.lists().tracked());
    counts->max_resident = std::max(counts->max_resident, arc.resident());
    if (arc.growing()) {
      ++counts->ops_while_growing;
      if (arc.GrowStep(moves_per_op)) {
        RetiredMemory retired;
        arc.TakeRetired(&retired);
      }
    }
  }
  for (ArcList l : kLists) {
    if (!Holds(arc, l, ref.Contents(l))) {
      return "final contents of " + Name(l) + " differ";
    }
  }
  return "";
}

uint64_t UniverseFor(uint32_t c) {
  return c >= 1000 ? 10 * uint64_t{c} : std::max<uint64_t>(10 * c, 8);
}
size_t OpsFor(uint32_t c) { return c >= 1000 ? 100000 : 30000; }

class ArcEquivalenceTest
    : public ::testing::TestWithParam<std::tuple<TraceKind, uint32_t>> {};

TEST_P(ArcEquivalenceTest, SameHitsEvictionsAndPAsTheReference) {
  const auto [kind, c] = GetParam();
  const std::vector<HashPair> trace =
      MakeTrace(kind, UniverseFor(c), OpsFor(c), /*seed=*/42 + c);
  CaseCounts counts;
  const std::string divergence = Compare(trace, c, &counts);
  EXPECT_EQ(divergence, "") << TraceName(kind) << " c=" << c;

  // The traces are only meaningful if they do what their names say.
  if (kind == TraceKind::kScan) {
    EXPECT_EQ(counts.hits, 0u);
    EXPECT_GT(counts.drops, 0u);  // T1 fills, B1 stays empty: Case IV A drop
  } else if (kind == TraceKind::kZipfian || kind == TraceKind::kRandomMix ||
             kind == TraceKind::kTemporalShift) {
    EXPECT_GT(counts.hits, 0u);
    EXPECT_GT(counts.b1_hits + counts.b2_hits, 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllTracesAndCapacities, ArcEquivalenceTest,
    ::testing::Combine(::testing::ValuesIn(kAllTraceKinds),
                       ::testing::ValuesIn(kCapacities)),
    [](const auto& info) {
      return std::string(TraceName(std::get<0>(info.param))) + "_c" +
             std::to_string(std::get<1>(info.param));
    });

// Growth of c: at a quarter of the trace c doubles, at half it grows to
// 3 * 2c + 1 (not a doubling); each index rehash is spread over many accesses
// (one entry moved per access), so accesses run against both index tables.
// Hits, evictions and p match the reference (which grows c at the same
// points) at every step, and the cache fills to its new c.
class ArcGrowthEquivalenceTest : public ArcEquivalenceTest {};

TEST_P(ArcGrowthEquivalenceTest, SameHitsEvictionsAndPAsTheReference) {
  const auto [kind, c] = GetParam();
  const size_t ops = OpsFor(c);
  const uint32_t final_c = 3 * (2 * c) + 1;
  const std::vector<HashPair> trace =
      MakeTrace(kind, UniverseFor(final_c), ops, /*seed=*/7 + c);
  CaseCounts counts;
  const std::string divergence =
      Compare(trace, c, &counts,
              {GrowAt{ops / 4, 2 * c, 1}, GrowAt{ops / 2, final_c, 1}});
  EXPECT_EQ(divergence, "") << TraceName(kind) << " c=" << c;
  EXPECT_GT(counts.ops_while_growing, 0u);
  if (kind != TraceKind::kLoop) {
    // A loop over 10 * final_c keys fills too, but every kind but one is
    // enough to show that the grown cache is used.
    EXPECT_EQ(counts.max_resident, final_c) << TraceName(kind);
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllTracesAndCapacities, ArcGrowthEquivalenceTest,
    ::testing::Combine(::testing::ValuesIn(kAllTraceKinds),
                       ::testing::Values(1u, 3u, 64u, 1000u)),
    [](const auto& info) {
      return std::string(TraceName(std::get<0>(info.param))) + "_c" +
             std::to_string(std::get<1>(info.param));
    });

// Random growths at random points of random traces at small capacities:
// at full load, with the ghost lists full, while the previous rehash is
// still running (it is finished first), with 1 to 3 index moves per access.
TEST(ArcPolicyTest, RandomGrowthsMatchTheReference) {
  for (uint32_t c : {1u, 2u, 3u, 5u}) {
    CaseCounts counts;
    TraceRng rng(100 + c);
    for (int round = 0; round < 100; ++round) {
      std::vector<GrowAt> growths;
      uint32_t to = c;
      for (size_t op = rng.Below(50); op < 600; op += 1 + rng.Below(150)) {
        to += 1 + static_cast<uint32_t>(rng.Below(2 * to));
        growths.push_back(GrowAt{op, to, 1 + rng.Below(3)});
      }
      const uint64_t universe = to + 1 + rng.Below(3 * to + 2);
      std::vector<HashPair> trace;
      for (int i = 0; i < 600; ++i) {
        trace.push_back(TraceKey(rng.Below(universe)));
      }
      ASSERT_EQ(Compare(trace, c, &counts, growths), "")
          << "c=" << c << " round " << round;
    }
    EXPECT_GT(counts.ops_while_growing, 0u);
    EXPECT_GT(counts.b1_hits, 0u);
    EXPECT_GT(counts.b2_hits, 0u);
  }
}

// A growth allocates with no lock needed and then nothing more: the new
// arena and index; its retired memory is exactly the old ones;
// nothing is allocated or freed by the steps.
TEST(ArcPolicyTest, GrowthAllocatesOnlyInAllocateGrowth) {
  struct Counts {
    int allocations = 0;
    int deallocations = 0;
    size_t bytes = 0;
  } n;
  RawAllocator counting{
      [](void* ctx, size_t bytes) -> void* {
        auto* c = static_cast<Counts*>(ctx);
        ++c->allocations;
        c->bytes += bytes;
        return RawAllocator::Default().Allocate(bytes);
      },
      [](void* ctx, void* p, size_t bytes) {
        auto* c = static_cast<Counts*>(ctx);
        ++c->deallocations;
        c->bytes -= bytes;
        RawAllocator::Default().Deallocate(p, bytes);
      },
      &n};
  absl::StatusOr<ArcPolicy> arc = ArcPolicy::Create(3000, counting);
  ASSERT_TRUE(arc.ok());
  EXPECT_EQ(n.bytes, ArcFlatLists<>::BytesFor(3000));
  const std::vector<HashPair> trace =
      MakeTrace(TraceKind::kZipfian, 100000, 20000, 3);
  for (size_t i = 0; i < 10000; ++i) arc->Access(trace[i]);
  ASSERT_EQ(arc->resident(), 3000u);

  EXPECT_EQ(arc->AllocateGrowth(3000).status().code(),
            absl::StatusCode::kInvalidArgument);
  absl::StatusOr<ArcPolicy::Growth> g = arc->AllocateGrowth(7000);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(n.allocations, 2 + 2);  // arena, index
  EXPECT_EQ(n.bytes, ArcFlatLists<>::GrowthPeakBytes(3000, 7000));
  arc->BeginGrow(*std::move(g));
  EXPECT_EQ(arc->capacity(), 7000u);
  EXPECT_EQ(arc->memory_bytes(), ArcFlatLists<>::GrowthPeakBytes(3000, 7000));
  for (size_t i = 10000; i < 20000; ++i) {
    arc->Access(trace[i]);
    if (arc->GrowStep(1)) break;
  }
  while (!arc->GrowStep(4)) {
  }
  EXPECT_EQ(n.allocations, 4);
  EXPECT_EQ(n.deallocations, 0);
  {
    RetiredMemory retired;
    arc->TakeRetired(&retired);
    EXPECT_FALSE(arc->growing());
    EXPECT_EQ(retired.bytes(), ArcFlatLists<>::GrowthPeakBytes(3000, 7000) -
                                   ArcFlatLists<>::BytesFor(7000));
  }
  EXPECT_EQ(n.deallocations, 2);
  EXPECT_EQ(n.bytes, ArcFlatLists<>::BytesFor(7000));
  EXPECT_EQ(arc->memory_bytes(), ArcFlatLists<>::BytesFor(7000));
}

// An allocation failure during AllocateGrowth changes nothing.
TEST(ArcPolicyTest, AFailedGrowthChangesNothing) {
  struct Budget {
    int left = 2;
  } budget;
  RawAllocator limited{
      [](void* ctx, size_t bytes) -> void* {
        auto* b = static_cast<Budget*>(ctx);
        if (b->left == 0) return nullptr;
        --b->left;
        return RawAllocator::Default().Allocate(bytes);
      },
      [](void* ctx, void* p, size_t bytes) {
        ++static_cast<Budget*>(ctx)->left;
        RawAllocator::Default().Deallocate(p, bytes);
      },
      &budget};
  absl::StatusOr<ArcPolicy> arc = ArcPolicy::Create(2000, limited);
  ASSERT_TRUE(arc.ok());
  for (int allowed = 0; allowed < 2; ++allowed) {
    budget.left = allowed;
    absl::StatusOr<ArcPolicy::Growth> g = arc->AllocateGrowth(5000);
    EXPECT_EQ(g.status().code(), absl::StatusCode::kResourceExhausted);
    EXPECT_EQ(budget.left, allowed) << "a failed growth kept memory";
    EXPECT_EQ(arc->capacity(), 2000u);
    EXPECT_FALSE(arc->growing());
  }
}

// Many short random traces at small capacities: every list reaches its
// largest possible size (c each; T1+T2+B1+B2 = 2c) without the arena running
// out, every case of the paper occurs, and the p guard fires.
TEST(ArcPolicyTest, ExtremeOccupancyAndAllCasesOnRandomTraces) {
  for (uint32_t c : {1u, 2u, 3u, 4u, 7u}) {
    CaseCounts counts;
    TraceRng rng(c);
    for (int round = 0; round < 200; ++round) {
      const uint64_t universe = c + 1 + rng.Below(3 * c + 2);
      std::vector<HashPair> trace;
      for (int i = 0; i < 300; ++i) trace.push_back(TraceKey(rng.Below(universe)));
      ASSERT_EQ(Compare(trace, c, &counts), "") << "c=" << c;
    }
    for (ArcList l : kLists) {
      EXPECT_EQ(counts.max_size[static_cast<int>(l)], c)
          << Name(l) << " c=" << c;
    }
    EXPECT_EQ(counts.max_tracked, 2 * c) << "c=" << c;
    EXPECT_GT(counts.b1_hits, 0u);
    EXPECT_GT(counts.b2_hits, 0u);
    EXPECT_GT(counts.drops, 0u);
    if (c > 1) {
      EXPECT_GT(counts.guarded_decrements, 0u) << "c=" << c;
    }
  }
}

// The report's crash: with per-list arenas of c, T2 overflowed at c = 1000.
// Drive T2 and B2 to c each (the directory to 2c) and keep going.
TEST(ArcPolicyTest, T2AndB2AtTheirMaximaAtCapacity1000) {
  constexpr uint32_t c = 1000;
  std::vector<HashPair> trace;
  for (int pass = 0; pass < 2; ++pass) {
    for (uint64_t i = 0; i < c; ++i) trace.push_back(TraceKey(i));  // T2 = c
  }
  // Each round: a new key (REPLACE pushes LRU of T2 into B2, since T1 is
  // empty), then a hit that moves it on into T2, leaving T1 empty again.
  for (uint64_t i = c; i < 4 * c; ++i) {
    trace.push_back(TraceKey(i));
    trace.push_back(TraceKey(i));
  }
  CaseCounts counts;
  ASSERT_EQ(Compare(trace, c, &counts), "");
  EXPECT_EQ(counts.max_size[static_cast<int>(ArcList::kT2)], c);
  EXPECT_EQ(counts.max_size[static_cast<int>(ArcList::kB2)], c);
  EXPECT_EQ(counts.max_tracked, 2 * c);
}

// §3.19: p is unsigned; a decrement larger than p must clamp to 0, not wrap
// (`std::max(0, p - d)` on size_t would leave p at SIZE_MAX).
TEST(ArcPolicyTest, PDecrementClampsAtZero) {
  ArcPolicy arc = Make(2);
  ReferenceArc ref(2);
  auto both = [&](uint64_t id) {
    const HashPair k = TraceKey(id);
    EXPECT_EQ(arc.Access(k).hit, ref.Access(k).hit);
    EXPECT_EQ(arc.p(), ref.p());
  };
  // 1, 1, 2, 2: T2 = {2, 1}. 3 (new): T1 is empty, so REPLACE moves 1, the
  // LRU of T2, to B2.
  for (uint64_t id : {1, 1, 2, 2, 3}) both(id);
  ASSERT_EQ(arc.lists().Where(TraceKey(1)), ArcList::kB2);
  ASSERT_EQ(arc.p(), 0u);
  both(1);  // Case III with p == 0 and delta == 1
  EXPECT_EQ(arc.p(), 0u);
  EXPECT_EQ(arc.lists().Where(TraceKey(1)), ArcList::kT2);
}

TEST(ArcPolicyTest, PIncrementSaturatesAtC) {
  ArcPolicy arc = Make(3);
  TraceRng rng(5);
  for (int i = 0; i < 100000; ++i) {
    arc.Access(TraceKey(rng.Below(12)));
    ASSERT_LE(arc.p(), 3u);
  }
}

TEST(ArcPolicyTest, NoAllocationAfterCreate) {
  int allocations = 0;
  RawAllocator counting{
      [](void* ctx, size_t bytes) -> void* {
        ++*static_cast<int*>(ctx);
        return RawAllocator::Default().Allocate(bytes);
      },
      [](void*, void* p, size_t bytes) {
        RawAllocator::Default().Deallocate(p, bytes);
      },
      &allocations};
  absl::StatusOr<ArcPolicy> arc = ArcPolicy::Create(100, counting);
  ASSERT_TRUE(arc.ok());
  EXPECT_EQ(allocations, 2);  // the index and the arena
  for (const HashPair& k : MakeTrace(TraceKind::kRandomMix, 1000, 50000, 1)) {
    arc->Access(k);
  }
  EXPECT_EQ(allocations, 2);
}

TEST(ArcPolicyTest, ForceEvictOnEmptyCacheFindsNothing) {
  ArcPolicy arc = Make(4);
  EXPECT_EQ(arc.PlanForceEvict().slot, kArcNil);
}

// ForceEvict follows REPLACE (LRU of T1 while |T1| > p) into the ghosts, and
// the cache then refills without evicting: the "REPLACE only when full" rule.
TEST(ArcPolicyTest, ForceEvictMovesToGhostsAndTheCacheRefills) {
  ArcPolicy arc = Make(4);
  for (uint64_t id = 0; id < 4; ++id) arc.Access(TraceKey(id));  // T1 = 3210
  const ArcVictim v = arc.PlanForceEvict();
  ASSERT_NE(v.slot, kArcNil);
  EXPECT_EQ(arc.lists().fingerprint(v.slot), TraceKey(0).h2);
  EXPECT_EQ(v.to, ArcList::kB1);
  arc.CommitForceEvict(v);
  EXPECT_EQ(arc.resident(), 3u);
  EXPECT_EQ(arc.lists().Where(TraceKey(0)), ArcList::kB1);

  const ArcAccessResult r = arc.Access(TraceKey(10));
  EXPECT_FALSE(r.evicted);
  EXPECT_EQ(arc.resident(), 4u);
  EXPECT_EQ(CheckBounds(arc), "");
}

TEST(ArcPolicyTest, ForceEvictTakesT2WhenT1IsWithinP) {
  ArcPolicy arc = Make(2);
  // 1, 1: T2 = {1}. 2, 3: REPLACE moves 2 (T1 > p = 0) to B1. 2 again: a B1
  // hit raises p to 1 and REPLACE takes 1 from T2. Now T1 = {3}, T2 = {2}.
  for (uint64_t id : {1, 1, 2, 3, 2}) arc.Access(TraceKey(id));
  ASSERT_EQ(arc.p(), 1u);
  ASSERT_EQ(arc.lists().size(ArcList::kT1), 1u);
  const ArcVictim v = arc.PlanForceEvict();  // |T1| == p: not > p
  ASSERT_NE(v.slot, kArcNil);
  EXPECT_EQ(arc.lists().fingerprint(v.slot), TraceKey(2).h2);
  EXPECT_EQ(v.to, ArcList::kB2);
  arc.CommitForceEvict(v);
  EXPECT_EQ(arc.lists().Where(TraceKey(2)), ArcList::kB2);
  EXPECT_EQ(CheckBounds(arc), "");
}

// Keys are 64-bit fingerprints (H2), as in the key table. A new key that
// shares a ghost's fingerprint is taken for that ghost: a B1 hit that
// raises p and admits it to T2 (where textbook ARC would put it in T1
// without moving p), in the ghost's slot.
TEST(ArcPolicyTest, AFingerprintCollisionIsAGhostHitForTheNewKey) {
  ArcPolicy arc = Make(2);
  const HashPair a{1, 0xfeedface12345678ULL};
  const HashPair twin{2, a.h2};  // a's fingerprint, another h1
  // 1, 1: T2 = {1}. a: T1 = {a}. 3: REPLACE moves a (T1 > p = 0) to B1.
  for (uint64_t id : {1, 1}) arc.Access(TraceKey(id));
  arc.Access(a);
  const ArcAccessResult r = arc.Access(TraceKey(3));
  ASSERT_TRUE(r.evicted);
  ASSERT_EQ(r.evicted_fingerprint, a.h2);
  ASSERT_EQ(r.evicted_to, ArcList::kB1);
  EXPECT_EQ(arc.lists().Where(twin), ArcList::kB1) << "a ghost is its H2";
  ASSERT_EQ(arc.p(), 0u);

  const ArcAccessResult hit = arc.Access(twin);
  EXPECT_FALSE(hit.hit);
  EXPECT_EQ(arc.p(), 1u) << "the match adapts p like a B1 hit (Case II)";
  ASSERT_TRUE(hit.evicted);  // |T1| = p = 1: REPLACE takes T2's LRU
  EXPECT_EQ(hit.evicted_fingerprint, TraceKey(1).h2);
  EXPECT_EQ(hit.evicted_to, ArcList::kB2);
  EXPECT_EQ(arc.lists().Where(twin), ArcList::kT2);
  EXPECT_EQ(arc.lists().fingerprint(arc.lists().Find(twin)), a.h2);
  EXPECT_EQ(arc.lists().size(ArcList::kB1), 0u) << "the ghost was used up";
  EXPECT_EQ(CheckBounds(arc), "");
}

// A key that shares a resident's fingerprint is that resident to ARC, as
// its Set is an overwrite of the resident's entry to the key table: a hit
// (Case I, T1 -> T2), nothing evicted, p unchanged.
TEST(ArcPolicyTest, AFingerprintCollisionWithAResidentIsAHit) {
  ArcPolicy arc = Make(2);
  const HashPair a{1, 0xfeedface12345678ULL};
  const HashPair twin{2, a.h2};
  // 1, 1: T2 = {1}. a: T1 = {a}.
  for (uint64_t id : {1, 1}) arc.Access(TraceKey(id));
  arc.Access(a);
  ASSERT_EQ(arc.lists().Where(twin), ArcList::kT1);
  const uint64_t p = arc.p();
  const ArcAccessResult r = arc.Access(twin);
  EXPECT_TRUE(r.hit);
  EXPECT_FALSE(r.evicted);
  EXPECT_EQ(arc.p(), p);
  EXPECT_EQ(arc.lists().Where(a), ArcList::kT2);
  EXPECT_EQ(arc.resident(), 2u);
  EXPECT_EQ(arc.lists().tracked(), 2u);
  EXPECT_EQ(CheckBounds(arc), "");
}

// A forgotten key is neither resident nor a ghost: touching it again is a
// plain miss (Case IV) and does not move p.
TEST(ArcPolicyTest, ForgetLeavesNoGhost) {
  ArcPolicy arc = Make(2);
  for (uint64_t id : {1, 1, 2, 3}) arc.Access(TraceKey(id));
  ASSERT_EQ(arc.lists().Where(TraceKey(2)), ArcList::kB1);
  EXPECT_EQ(arc.Forget(TraceKey(2)), ArcList::kB1);  // a ghost
  EXPECT_EQ(arc.Forget(TraceKey(1)), ArcList::kT2);  // a resident
  EXPECT_EQ(arc.Forget(TraceKey(1)), ArcList::kNone);
  EXPECT_EQ(arc.lists().Where(TraceKey(1)), ArcList::kNone);
  const uint64_t p = arc.p();
  EXPECT_FALSE(arc.Access(TraceKey(2)).hit);
  EXPECT_EQ(arc.p(), p);
  EXPECT_EQ(arc.lists().Where(TraceKey(2)), ArcList::kT1);
}

// Access, Forget and ForceEvict interleaved at random: the bounds hold and
// every admitted key really is resident (the arena never runs out).
TEST(ArcPolicyTest, BoundsHoldUnderForgetAndForceEvict) {
  for (uint32_t c : {1u, 2u, 5u, 64u}) {
    ArcPolicy arc = Make(c);
    TraceRng rng(c * 31);
    for (int op = 0; op < 60000; ++op) {
      const HashPair k = TraceKey(rng.Below(4 * c + 4));
      const uint64_t pick = rng.Below(20);
      if (pick == 0) {
        arc.Forget(k);
      } else if (pick == 1) {
        const ArcVictim v = arc.PlanForceEvict();
        if (v.slot != kArcNil) arc.CommitForceEvict(v);
      } else {
        arc.Access(k);
        ASSERT_TRUE(IsResident(arc.lists().Where(k))) << "op " << op;
      }
      ASSERT_EQ(CheckBounds(arc), "") << "c=" << c << " op " << op;
    }
  }
}

}  // namespace
}  // namespace furrballs
