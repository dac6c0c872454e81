// Several threads run Find / Set / Erase / ForceEvictOne / UpdateInPlace on a
// small ConcurrentARC whose values check themselves. No read may be torn or
// belong to another key; afterwards ARC's bounds hold, T1 ∪ T2 and CMap hold
// the same keys, and every counter adds up. The same with a thread that
// grows c again and again meanwhile, and a run in which a set of keys that
// is never erased nor evicted must be found by every read across growths.
// Fixed operation counts, no sleeps, no timing assertions.
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "engine/arc/arc_trace.h"
#include "engine/arc/concurrent_arc.h"
#include "engine/common/error.h"
#include "engine/common/hash_pair.h"

namespace furrballs {
namespace {

// A value that names its key and carries a checksum over both fields, so a
// torn copy (fields from two writes) or a foreign one (another key's value)
// is detected on every read.
struct Checked {
  uint64_t tag;      // the key's h2
  uint64_t version;  // writer thread << 40 | per-thread sequence
  uint64_t check;    // Mix(tag ^ version)

  static Checked For(const HashPair& h, uint64_t version) {
    return Checked{h.h2, version, TraceRng::Mix(h.h2 ^ version)};
  }
  bool ValidFor(const HashPair& h) const {
    return tag == h.h2 && check == TraceRng::Mix(tag ^ version);
  }
};

constexpr int kThreads = 4;
constexpr uint32_t kCapacity = 48;
constexpr uint64_t kUniverse = 160;
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
constexpr int kOpsPerThread = 60000;
#else
constexpr int kOpsPerThread = 500000;
#endif

struct ThreadTally {
  uint64_t bad_reads = 0;
  uint64_t enqueued_hits = 0;  // Find hits + successful UpdateInPlaces
  uint64_t abandoned = 0;      // Set / Erase / ForceEvictOne only
  uint64_t ops = 0;
};

// Grows c `growths` times by `add` (doubling if 0), stepping each growth to
// its end (a node's worker), then returns.
void GrowRepeatedly(ConcurrentARC<Checked>& arc, int growths, uint32_t add,
                    const std::atomic<bool>& go, uint64_t* completed) {
  while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
  for (int g = 0; g < growths; ++g) {
    const uint32_t c = arc.capacity();
    const absl::Status grown = arc.Grow(add == 0 ? 2 * c : c + add);
    if (!grown.ok()) {
      ADD_FAILURE() << grown;
      return;
    }
    while (!arc.GrowStep(1)) std::this_thread::yield();
    ++*completed;
  }
}

// Doubles c and then shrinks it to a quarter of that, `cycles` times,
// stepping each to its end (a node's worker), while the request threads
// run: the shrink's trim evicts residents under their Sets, and ARC's slots
// are compacted while they are used.
void GrowAndShrinkRepeatedly(ConcurrentARC<Checked>& arc, int cycles,
                             const std::atomic<bool>& go,
                             uint64_t* completed) {
  while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
  for (int g = 0; g < cycles; ++g) {
    const uint32_t c = arc.capacity();
    for (const uint32_t to : {2 * c, c / 2}) {
      const absl::Status resized =
          to > arc.capacity() ? arc.Grow(to) : arc.Shrink(to);
      if (!resized.ok()) {
        ADD_FAILURE() << resized;
        return;
      }
      while (!arc.GrowStep(1)) std::this_thread::yield();
      ++*completed;
    }
  }
}

void RunStress(bool grow, bool shrink = false) {
  // Touched only inside callbacks, which run under the ARC SpinLock.
  uint64_t bad_evicted_values = 0;
  uint64_t evict_calls = 0;
  uint64_t promote_calls = 0;

  ConcurrentArcOptions<Checked> options;
  options.capacity = kCapacity;
  options.on_evict = [&](const HashPair& h, const Checked& v) {
    ++evict_calls;
    if (!v.ValidFor(h)) ++bad_evicted_values;
  };
  options.on_promote = [&](const HashPair&) { ++promote_calls; };
  absl::StatusOr<std::unique_ptr<ConcurrentARC<Checked>>> made =
      ConcurrentARC<Checked>::Create(options);
  ASSERT_TRUE(made.ok()) << made.status();
  ConcurrentARC<Checked>& arc = **made;

  std::vector<ThreadTally> tally(kThreads);
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  // 48 -> 78: well below the universe, so that REPLACE keeps evicting
  // however the growths and the workers interleave.
  constexpr int kGrowths = 5;
  constexpr uint32_t kGrowBy = 6;
  uint64_t growths_completed = 0;
  if (grow && !shrink) {
    threads.emplace_back([&] {
      GrowRepeatedly(arc, kGrowths, kGrowBy, go, &growths_completed);
    });
  }
  // 48 -> 96 -> 24 -> 48 -> 12 -> 24 -> 6.
  constexpr int kShrinkCycles = 3;
  if (shrink) {
    threads.emplace_back([&] {
      GrowAndShrinkRepeatedly(arc, kShrinkCycles, go, &growths_completed);
    });
  }
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      ThreadTally& mine = tally[t];
      ZipfianGenerator zipf(kUniverse, 0.9, /*seed=*/100 + t);
      TraceRng rng(200 + t);
      uint64_t version = uint64_t(t) << 40;
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      for (int i = 0; i < kOpsPerThread; ++i) {
        const HashPair k = TraceKey(zipf.Next());
        const uint64_t pick = rng.Below(100);
        ++mine.ops;
        if (pick < 60) {
          const std::optional<Checked> v = arc.Find(k);
          if (v.has_value()) {
            ++mine.enqueued_hits;
            if (!v->ValidFor(k)) ++mine.bad_reads;
          }
        } else if (pick < 85) {
          const CMapSetResult r = arc.Set(k, Checked::For(k, ++version));
          if (r.err == Error::kAbandonedSet) ++mine.abandoned;
          else if (r.err != Error::kOk) ++mine.bad_reads;
        } else if (pick < 92) {
          const uint64_t v = ++version;
          const Error e = arc.UpdateInPlace(k, [&](Checked& c) {
            if (!c.ValidFor(k)) ++mine.bad_reads;
            c = Checked::For(k, v);
          });
          if (e == Error::kOk) ++mine.enqueued_hits;
        } else if (pick < 97) {
          Checked erased{};
          const Error e = arc.Erase(k, &erased);
          if (e == Error::kOk && !erased.ValidFor(k)) ++mine.bad_reads;
          if (e == Error::kAbandonedSet) ++mine.abandoned;
        } else {
          const ForcedEviction<Checked> e = arc.ForceEvictOne();
          if (e.err == Error::kOk && !e.value->ValidFor(e.key)) {
            ++mine.bad_reads;
          }
          if (e.err == Error::kAbandonedSet) ++mine.abandoned;
        }
      }
    });
  }
  go.store(true, std::memory_order_release);
  for (auto& th : threads) th.join();
  if (grow && !shrink) {
    EXPECT_EQ(growths_completed, uint64_t{kGrowths});
    EXPECT_EQ(arc.capacity(), kCapacity + kGrowths * kGrowBy);
    EXPECT_FALSE(arc.growing());
  }
  if (shrink) {
    EXPECT_EQ(growths_completed, uint64_t{2 * kShrinkCycles});
    EXPECT_EQ(arc.capacity(), kCapacity >> kShrinkCycles);
    EXPECT_EQ(arc.stats().shrinks, uint64_t{kShrinkCycles});
    EXPECT_FALSE(arc.growing());
  }

  // Quiescent: resolve every queued promotion (a drain marks unclaimed
  // tickets, the next skips them).
  arc.DrainPromotions();
  arc.DrainPromotions();

  ThreadTally total;
  for (const ThreadTally& t : tally) {
    total.bad_reads += t.bad_reads;
    total.enqueued_hits += t.enqueued_hits;
    total.abandoned += t.abandoned;
    total.ops += t.ops;
  }
  EXPECT_EQ(total.ops, uint64_t{kThreads} * kOpsPerThread);
  EXPECT_EQ(total.bad_reads, 0u);
  EXPECT_EQ(bad_evicted_values, 0u);
  EXPECT_EQ(arc.CheckInvariants(), "");

  const ConcurrentArcStats s = arc.stats();
  // Every queued hit was applied, found stale, or counted as dropped.
  EXPECT_EQ(s.hits_applied + s.promotions_stale + s.promotions_dropped,
            total.enqueued_hits);
  // Only what a caller saw counts: a shrink's trim that meets a busy slot
  // retries at its next step and is not an abandoned write.
  EXPECT_EQ(s.abandoned, total.abandoned);
  // Every admitted entry is still resident or left exactly one way.
  EXPECT_EQ(s.inserts - s.evictions - s.forced_evictions - s.erases,
            arc.size());
  EXPECT_EQ(evict_calls, s.evictions + s.forced_evictions);
  EXPECT_EQ(promote_calls, s.promotions);
  // The run exercised what it claims to.
  EXPECT_GT(s.evictions, 0u);
  EXPECT_GT(s.forced_evictions, 0u);
  EXPECT_GT(s.erases, 0u);
  EXPECT_GT(s.hits_applied, 0u);
  EXPECT_GT(s.ghost_hits, 0u);

  // Every resident key still reads back valid.
  for (uint64_t id = 0; id < kUniverse; ++id) {
    const std::optional<Checked> v = arc.Find(TraceKey(id));
    if (v.has_value()) {
      EXPECT_TRUE(v->ValidFor(TraceKey(id)));
    }
  }
  std::printf("ops %llu, hits applied %llu, stale %llu, dropped %llu, "
              "evictions %llu, forced %llu, abandoned %llu\n",
              (unsigned long long)total.ops,
              (unsigned long long)s.hits_applied,
              (unsigned long long)s.promotions_stale,
              (unsigned long long)s.promotions_dropped,
              (unsigned long long)s.evictions,
              (unsigned long long)s.forced_evictions,
              (unsigned long long)s.abandoned);
}

TEST(ConcurrentArcStressTest, NoTornOrForeignReadsAndInvariantsHold) {
  RunStress(/*grow=*/false);
}

TEST(ConcurrentArcStressTest, NoTornOrForeignReadsAndInvariantsHoldWhileGrowing) {
  RunStress(/*grow=*/true);
}

TEST(ConcurrentArcStressTest,
     NoTornOrForeignReadsAndInvariantsHoldWhileShrinking) {
  RunStress(/*grow=*/true, /*shrink=*/true);
}

// kPinned keys are set once and never erased, and the cache never has to
// evict (the other keys, set and erased by writers, fit beside them), so
// every Find of a pinned key must hit, with a value of its own, while a
// grower doubles c five times with its worker stepping and UpdateInPlace
// rewrites the pinned values: no miss window in the table's rehash, none
// in ARC's (a lost ARC entry would let a Set evict a pinned key).
TEST(ConcurrentArcStressTest, KeysNeverErasedAreAlwaysFoundAcrossGrowths) {
  constexpr uint64_t kPinned = 24;
  constexpr uint64_t kOthers = 24;  // kPinned + kOthers <= kCapacity
  ConcurrentArcOptions<Checked> options;
  options.capacity = kCapacity;
  absl::StatusOr<std::unique_ptr<ConcurrentARC<Checked>>> made =
      ConcurrentARC<Checked>::Create(options);
  ASSERT_TRUE(made.ok()) << made.status();
  ConcurrentARC<Checked>& arc = **made;
  for (uint64_t id = 0; id < kPinned; ++id) {
    ASSERT_EQ(arc.Set(TraceKey(id), Checked::For(TraceKey(id), 0)).err,
              Error::kOk);
  }

  std::atomic<bool> go{false};
  std::vector<uint64_t> misses(kThreads, 0), bad(kThreads, 0);
  uint64_t growths_completed = 0;
  std::vector<std::thread> threads;
  threads.emplace_back([&] {
    GrowRepeatedly(arc, 5, /*add=*/0, go, &growths_completed);
  });
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      TraceRng rng(300 + t);
      uint64_t version = uint64_t(t + 1) << 40;
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      for (int i = 0; i < kOpsPerThread / 2; ++i) {
        const uint64_t pick = rng.Below(100);
        if (pick < 60) {
          const HashPair k = TraceKey(rng.Below(kPinned));
          const std::optional<Checked> v = arc.Find(k);
          if (!v.has_value()) ++misses[t];
          else if (!v->ValidFor(k)) ++bad[t];
        } else if (pick < 75) {
          const HashPair k = TraceKey(rng.Below(kPinned));
          const uint64_t v = ++version;
          const Error e = arc.UpdateInPlace(k, [&](Checked& c) {
            if (!c.ValidFor(k)) ++bad[t];
            c = Checked::For(k, v);
          });
          if (e == Error::kKeyNotFound) ++misses[t];
        } else if (pick < 90) {
          const HashPair k = TraceKey(kPinned + rng.Below(kOthers));
          const Error e = arc.Set(k, Checked::For(k, ++version)).err;
          if (e != Error::kOk && e != Error::kAbandonedSet) ++bad[t];
        } else {
          arc.Erase(TraceKey(kPinned + rng.Below(kOthers)));
        }
      }
    });
  }
  go.store(true, std::memory_order_release);
  for (auto& th : threads) th.join();
  uint64_t total_misses = 0, total_bad = 0;
  for (int t = 0; t < kThreads; ++t) {
    total_misses += misses[t];
    total_bad += bad[t];
  }
  EXPECT_EQ(total_misses, 0u);
  EXPECT_EQ(total_bad, 0u);
  EXPECT_EQ(growths_completed, 5u);
  EXPECT_EQ(arc.capacity(), kCapacity << 5);
  EXPECT_EQ(arc.stats().evictions, 0u);
  arc.DrainPromotions();
  EXPECT_EQ(arc.CheckInvariants(), "");
  for (uint64_t id = 0; id < kPinned; ++id) {
    const std::optional<Checked> v = arc.Find(TraceKey(id));
    ASSERT_TRUE(v.has_value()) << id;
    EXPECT_TRUE(v->ValidFor(TraceKey(id)));
  }
}

}  // namespace
}  // namespace furrballs
