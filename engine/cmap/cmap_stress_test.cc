// Concurrency stress for CMap: readers, writers, updaters, erasers and
// re-inserters on a table small enough that slots are reused constantly, with
// values that validate themselves. Each test runs a fixed number of
// operations; nothing is timed and nothing sleeps.
//
// Every key shares one control byte, so each probe candidate could be any
// key: only the fingerprint re-check inside the seqlock window stands between
// a reader and a foreign value, and only the seq re-check between it and a
// torn one. Removing either makes MixedWorkloadOnASmallTable fail (see
// docs/cmap.md, "Testing").
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <latch>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "engine/cmap/cmap.h"
#include "engine/cmap/internal/cmap_test_peer.h"
#include "engine/cmap/internal/test_meta.h"
#include "engine/common/error.h"
#include "engine/common/hash_pair.h"

namespace furrballs {
namespace {

using cmap_internal::CMapTestPeer;
using cmap_internal::Mix;

// ThreadSanitizer runs ~10x slower; keep its runs in the same wall-clock
// budget. The interleavings it checks do not need more iterations.
#if defined(__SANITIZE_THREAD__)
constexpr int kOpsDivisor = 8;
#else
constexpr int kOpsDivisor = 1;
#endif

// 16 bytes: two words; a slot is 32 bytes, two to a cache line, so writers
// of neighbouring slots share lines.
struct SmallStressValue {
  uint32_t tag;
  uint32_t version;
  uint64_t check;
};
// 128 bytes: sixteen words; a slot straddles cache lines, so a torn copy
// can mix lines.
struct LargeStressValue {
  uint32_t tag;
  uint32_t version;
  uint64_t body[14];
  uint64_t check;
};
// 20 bytes, the engine KeyMeta's size: two words and a 4-byte tail in the
// seq word (internal/slot.h), so a copy that mixes the words of one version
// with the tail of another fails the checksum, which is the tail.
struct TailStressValue {
  uint32_t tag;
  uint32_t version;
  uint32_t body[2];
  uint32_t check;
};
static_assert(sizeof(SmallStressValue) == 16 && sizeof(LargeStressValue) == 128 &&
              sizeof(TailStressValue) == 20);

// The checksum covers every word, so a copy mixing two versions (torn) fails
// it; the tag says which key the value belongs to (foreign).
template <typename V>
V Make(uint32_t tag, uint32_t version) {
  V v;
  std::memset(&v, 0, sizeof(v));
  v.tag = tag;
  v.version = version;
  const uint64_t head = (uint64_t{tag} << 32) | version;
  uint64_t check = Mix(head);
  if constexpr (std::is_same_v<V, LargeStressValue>) {
    for (size_t i = 0; i < std::size(v.body); ++i) {
      v.body[i] = Mix(head + i + 1);
      check = Mix(check ^ v.body[i]);
    }
  } else if constexpr (std::is_same_v<V, TailStressValue>) {
    for (size_t i = 0; i < std::size(v.body); ++i) {
      v.body[i] = static_cast<uint32_t>(Mix(head + i + 1));
      check = Mix(check ^ v.body[i]);
    }
  }
  v.check = static_cast<decltype(v.check)>(check);
  return v;
}

template <typename V>
bool Intact(const V& v) {
  const V expected = Make<V>(v.tag, v.version);
  return std::memcmp(&v, &expected, sizeof(V)) == 0;
}

// All keys share control byte 0x2A. The tag is derived from the hash, so a
// reader can tell whose value it got from the hash it looked up.
constexpr uint8_t kSharedH2Short = 0x2A;

HashPair StressKey(uint32_t index, size_t home_group) {
  return HashPair{(Mix(index) << 8) | home_group,
                  (uint64_t{kSharedH2Short} << 57) | (uint64_t{index} << 8) |
                      0x5A};
}
uint32_t TagOf(const HashPair& h) { return static_cast<uint32_t>(h.h2 >> 8); }

// Tallies of what the threads saw. Failures must stay zero; the rest shows
// that the run exercised what it claims to.
struct Tally {
  std::atomic<uint64_t> torn{0};
  std::atomic<uint64_t> foreign{0};
  std::atomic<uint64_t> unexpected_error{0};
  std::atomic<uint64_t> over_capacity{0};
  std::atomic<uint64_t> hits{0};
  std::atomic<uint64_t> inserts{0};
  std::atomic<uint64_t> erases{0};
  std::atomic<uint64_t> abandoned{0};
  std::atomic<uint64_t> full{0};

  template <typename V>
  void Check(const V& v, const HashPair& h) {
    if (!Intact(v)) {
      torn.fetch_add(1, std::memory_order_relaxed);
    } else if (v.tag != TagOf(h)) {
      foreign.fetch_add(1, std::memory_order_relaxed);
    }
  }
  void Count(std::atomic<uint64_t>& c) { c.fetch_add(1, std::memory_order_relaxed); }
};

template <typename V, typename G>
struct Config {
  using Value = V;
  using Map = CMap<V, G>;
};

template <typename C>
class CMapStressTest : public ::testing::Test {};

using Configs = ::testing::Types<
#if defined(__SSE2__)
    Config<SmallStressValue, GroupSse2>, Config<LargeStressValue, GroupSse2>,
#endif
    // The tail is independent of the group implementation: one config.
    Config<TailStressValue, GroupPortable>,
    Config<SmallStressValue, GroupPortable>,
    Config<LargeStressValue, GroupPortable>>;
TYPED_TEST_SUITE(CMapStressTest, Configs);

// 96 keys compete for 48 admissions in 64 slots (4 groups). Keys are homed
// in the last and the first group, so probes wrap and overflow constantly.
TYPED_TEST(CMapStressTest, MixedWorkloadOnASmallTable) {
  using Value = typename TypeParam::Value;
  using Map = typename TypeParam::Map;
  constexpr size_t kCapacity = 48;
  constexpr uint32_t kKeys = 96, kHotKeys = 8;
  constexpr int kOps = 300000 / kOpsDivisor;

  Map m(kCapacity);
  ASSERT_EQ(m.slot_count(), 64u);
  const size_t last_group = m.slot_count() / cmap_internal::kGroupWidth - 1;
  std::vector<HashPair> keys;
  for (uint32_t i = 0; i < kKeys; ++i) {
    keys.push_back(StressKey(i, i % 2 == 0 ? last_group : 0));
  }

  Tally t;
  auto expect_ok_or = [&t](Error err, std::initializer_list<Error> allowed) {
    if (err == Error::kAbandonedSet) t.Count(t.abandoned);
    if (err == Error::kCacheFull) t.Count(t.full);
    if (err == Error::kOk) return;
    for (Error a : allowed) {
      if (err == a) return;
    }
    t.Count(t.unexpected_error);
  };

  // Start full, so that readers have something to find from the first op.
  for (uint32_t i = 0; i < kCapacity; ++i) {
    ASSERT_TRUE(m.Set(keys[i], Make<Value>(TagOf(keys[i]), 0)).inserted);
  }

  // Writers run kOps operations each; readers run at least kOps and until
  // the last writer is done, so that they overlap the writers even when the
  // scheduler runs the threads one after another on a small machine.
  constexpr int kWriters = 4;
  std::atomic<int> writers_running{kWriters};
  std::latch start(kWriters + 2);
  std::vector<std::thread> threads;
  auto spawn = [&](bool reader, uint64_t seed, auto body) {
    threads.emplace_back([&, reader, seed, body] {
      std::mt19937_64 rng(seed);
      start.arrive_and_wait();
      for (int op = 0; op < kOps || (reader && writers_running.load() > 0);
           ++op) {
        // Half the operations go to 8 hot keys, so that readers and
        // writers meet on the same slots often.
        const uint64_t r = rng();
        body(rng, keys[(r & 1) ? (r >> 1) % kHotKeys : (r >> 1) % kKeys]);
        if (m.size() > kCapacity) t.Count(t.over_capacity);
      }
      if (!reader) writers_running.fetch_sub(1);
    });
  };

  // Two readers.
  for (uint64_t seed : {1, 2}) {
    spawn(true, seed, [&](std::mt19937_64&, const HashPair& h) {
      if (const std::optional<Value> v = m.Find(h)) {
        t.Count(t.hits);
        t.Check(*v, h);
      }
    });
  }
  // A setter: inserts and overwrites with fresh versions.
  spawn(false, 3, [&](std::mt19937_64& rng, const HashPair& h) {
    const CMapSetResult r =
        m.Set(h, Make<Value>(TagOf(h), static_cast<uint32_t>(rng())));
    expect_ok_or(r.err, {Error::kAbandonedSet, Error::kCacheFull});
    if (r.inserted) t.Count(t.inserts);
  });
  // An updater: checks what it is given, then bumps the version.
  spawn(false, 4, [&](std::mt19937_64&, const HashPair& h) {
    const Error err = m.UpdateInPlace(h, [&](Value& v) {
      t.Check(v, h);
      v = Make<Value>(TagOf(h), v.version + 1);
    });
    expect_ok_or(err, {Error::kKeyNotFound, Error::kAbandonedSet});
  });
  // An eraser and a re-inserter: erase, then put the key straight back, so
  // the same slots cycle between keys.
  spawn(false, 5, [&](std::mt19937_64&, const HashPair& h) {
    const FindAndEraseResult<Value> r = m.FindAndEraseByHash(h);
    expect_ok_or(r.err, {Error::kKeyNotFound, Error::kAbandonedSet});
    if (r.err == Error::kOk) {
      t.Count(t.erases);
      t.Check(*r.value, h);
    }
  });
  spawn(false, 6, [&](std::mt19937_64& rng, const HashPair& h) {
    if (m.FindAndEraseByHash(h).err == Error::kOk) t.Count(t.erases);
    const CMapSetResult r =
        m.Set(h, Make<Value>(TagOf(h), static_cast<uint32_t>(rng())));
    expect_ok_or(r.err, {Error::kAbandonedSet, Error::kCacheFull});
    if (r.inserted) t.Count(t.inserts);
  });
  for (auto& th : threads) th.join();

  EXPECT_EQ(t.torn.load(), 0u);
  EXPECT_EQ(t.foreign.load(), 0u);
  EXPECT_EQ(t.unexpected_error.load(), 0u);
  EXPECT_EQ(t.over_capacity.load(), 0u);
  EXPECT_GT(t.hits.load(), 0u);
  EXPECT_GT(t.inserts.load(), 0u);
  EXPECT_GT(t.erases.load(), 0u);
  this->RecordProperty("abandoned", std::to_string(t.abandoned.load()));
  this->RecordProperty("cache_full", std::to_string(t.full.load()));

  // Quiescent: every present key holds its own intact value, exactly once,
  // and erasing everything returns every counter to zero.
  size_t present = 0;
  for (const HashPair& h : keys) {
    if (const std::optional<Value> v = m.Find(h)) {
      ++present;
      EXPECT_TRUE(Intact(*v));
      EXPECT_EQ(v->tag, TagOf(h));
    }
  }
  EXPECT_EQ(present, m.size());
  for (const HashPair& h : keys) {
    int copies = 0;
    for (;;) {
      const Error err = m.FindAndEraseByHash(h).err;
      if (err != Error::kOk) {
        EXPECT_EQ(err, Error::kKeyNotFound);
        break;
      }
      ++copies;
    }
    EXPECT_LE(copies, 1) << "duplicate of key " << TagOf(h);
  }
  EXPECT_EQ(m.size(), 0u);
  EXPECT_EQ(CMapTestPeer::OverflowTotal(m), 0u);
  EXPECT_EQ(CMapTestPeer::CountCtrl(m, cmap_internal::IsOccupied), 0u);
  EXPECT_TRUE(CMapTestPeer::SentinelIntact(m));
}

// One slot, two keys with the same home group and control byte, and a writer
// that keeps moving the slot between them (update, erase, insert the other)
// while two readers look both keys up. The tightest test of the seqlock: a
// reader that mixed fields of two states, or trusted the control byte alone,
// would return a torn or foreign value here within a few thousand rounds.
TYPED_TEST(CMapStressTest, SlotHandedBetweenKeysUnderReaders) {
  using Value = typename TypeParam::Value;
  using Map = typename TypeParam::Map;
  constexpr int kRounds = 1000000 / kOpsDivisor;

  Map m(16);
  const HashPair a = StressKey(1, 0), b = StressKey(2, 0);
  ASSERT_TRUE(m.Set(a, Make<Value>(TagOf(a), 0)).inserted);
  const size_t slot = CMapTestPeer::SlotOf(m, a);

  Tally t;
  std::atomic<bool> writing{true};
  std::latch start(3);
  std::thread writer([&] {
    start.arrive_and_wait();
    for (int round = 0; round < kRounds; ++round) {
      const HashPair& from = round % 2 == 0 ? a : b;
      const HashPair& to = round % 2 == 0 ? b : a;
      const uint32_t version = static_cast<uint32_t>(round);
      if (m.Set(from, Make<Value>(TagOf(from), version)).err != Error::kOk ||
          m.FindAndEraseByHash(from).err != Error::kOk ||
          !m.Set(to, Make<Value>(TagOf(to), version)).inserted) {
        t.Count(t.unexpected_error);
      }
    }
    writing.store(false);
  });
  auto reader = [&] {
    start.arrive_and_wait();
    while (writing.load()) {
      for (const HashPair* h : {&a, &b}) {
        if (const std::optional<Value> v = m.Find(*h)) {
          t.Count(t.hits);
          t.Check(*v, *h);
        }
      }
    }
  };
  std::thread r1(reader), r2(reader);
  writer.join();
  r1.join();
  r2.join();

  EXPECT_EQ(t.torn.load(), 0u);
  EXPECT_EQ(t.foreign.load(), 0u);
  EXPECT_EQ(t.unexpected_error.load(), 0u);
  EXPECT_GT(t.hits.load(), 0u);
  EXPECT_EQ(CMapTestPeer::SlotOf(m, kRounds % 2 == 0 ? a : b), slot)
      << "every insert reused the one tombstone";
}

// Visit's contract: a writer changes a value and the data it describes
// together under UpdateInPlace (here: eight atomic words outside the map
// that must all equal the value's version), and readers that copy that data
// inside Visit never see it disagree with the value.
TYPED_TEST(CMapStressTest, VisitSeesOutsideDataConsistentWithTheValue) {
  using Value = typename TypeParam::Value;
  using Map = typename TypeParam::Map;
  constexpr int kWrites = 1000000 / kOpsDivisor;

  Map m(16);
  const HashPair h = StressKey(7, 0);
  ASSERT_TRUE(m.Set(h, Make<Value>(TagOf(h), 0)).inserted);
  std::atomic<uint64_t> outside[8] = {};

  Tally t;
  std::atomic<uint64_t> mismatched{0};
  std::atomic<bool> writing{true};
  std::latch start(3);
  std::thread writer([&] {
    start.arrive_and_wait();
    for (int i = 0; i < kWrites; ++i) {
      const Error err = m.UpdateInPlace(h, [&](Value& v) {
        v = Make<Value>(TagOf(h), v.version + 1);
        for (auto& w : outside) w.store(v.version, std::memory_order_relaxed);
      });
      if (err != Error::kOk) t.Count(t.unexpected_error);
    }
    writing.store(false);
  });
  auto reader = [&] {
    start.arrive_and_wait();
    while (writing.load()) {
      bool agree = false;  // the verdict of fn's last run, the validated one
      const bool found = m.Visit(h, [&](const Value& v) {
        t.Check(v, h);
        agree = true;
        for (auto& w : outside) {
          agree &= w.load(std::memory_order_relaxed) == v.version;
        }
      });
      if (!found) t.Count(t.unexpected_error);
      if (!agree) mismatched.fetch_add(1);
      t.Count(t.hits);
    }
  };
  std::thread r1(reader), r2(reader);
  writer.join();
  r1.join();
  r2.join();

  EXPECT_EQ(t.torn.load(), 0u);
  EXPECT_EQ(t.foreign.load(), 0u);
  EXPECT_EQ(t.unexpected_error.load(), 0u);
  EXPECT_EQ(mismatched.load(), 0u);
  EXPECT_GT(t.hits.load(), 0u);
}

// A barrier whose waiters spin (yielding) instead of sleeping, so that the
// threads of a round start within microseconds of each other and their
// operations actually overlap.
class SpinBarrier {
 public:
  explicit SpinBarrier(int parties) : parties_(parties) {}

  void ArriveAndWait() {
    const int generation = generation_.load(std::memory_order_acquire);
    if (arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 == parties_) {
      arrived_.store(0, std::memory_order_relaxed);
      generation_.fetch_add(1, std::memory_order_release);
      return;
    }
    while (generation_.load(std::memory_order_acquire) == generation) {
      std::this_thread::yield();
    }
  }

 private:
  const int parties_;
  std::atomic<int> arrived_{0};
  std::atomic<int> generation_{0};
};

// Two threads insert the same absent keys at once while a third erases the
// keys around them, so that tombstones appear on the path between the two
// inserters' probes and they pick different slots. Insert step 5 must leave
// exactly one copy whenever some Set reported success, and none otherwise.
TYPED_TEST(CMapStressTest, RacingInsertsOfOneKeyLeaveOneCopy) {
  using Value = typename TypeParam::Value;
  using Map = typename TypeParam::Map;
  constexpr size_t kCapacity = 48;
  constexpr uint32_t kTargets = 8, kFillers = 30;
  constexpr int kRounds = 8000 / kOpsDivisor;

  Map m(kCapacity);
  std::vector<HashPair> targets, fillers;
  for (uint32_t i = 0; i < kTargets; ++i) targets.push_back(StressKey(i, 1));
  for (uint32_t i = 0; i < kFillers; ++i) {
    fillers.push_back(StressKey(1000 + i, i % 2));
  }

  // ok[thread][target]: whether that thread's Set of the target returned kOk.
  bool ok[2][kTargets];
  SpinBarrier sync(4);
  std::atomic<uint64_t> extra_copies{0}, lost_copies{0};
  auto inserter = [&](int self, uint64_t seed) {
    std::mt19937_64 rng(seed);
    for (int round = 0; round < kRounds; ++round) {
      sync.ArriveAndWait();  // round begins
      uint32_t order[kTargets];
      for (uint32_t i = 0; i < kTargets; ++i) order[i] = i;
      std::shuffle(order, order + kTargets, rng);
      for (uint32_t i : order) {
        const HashPair& h = targets[i];
        ok[self][i] = m.Set(h, Make<Value>(TagOf(h), round)).err == Error::kOk;
      }
      sync.ArriveAndWait();  // round ends
    }
  };
  std::thread a(inserter, 0, 11), b(inserter, 1, 12);
  std::thread eraser([&] {
    std::mt19937_64 rng(13);
    for (int round = 0; round < kRounds; ++round) {
      sync.ArriveAndWait();
      std::vector<HashPair> order = fillers;
      std::shuffle(order.begin(), order.end(), rng);
      for (const HashPair& h : order) m.FindAndEraseByHash(h);
      sync.ArriveAndWait();
    }
  });

  for (int round = 0; round < kRounds; ++round) {
    // Refill around the targets so that the inserters' paths are crowded.
    for (const HashPair& h : fillers) m.Set(h, Make<Value>(TagOf(h), 0));
    sync.ArriveAndWait();
    sync.ArriveAndWait();
    for (uint32_t i = 0; i < kTargets; ++i) {
      int copies = 0;
      while (m.FindAndEraseByHash(targets[i]).err == Error::kOk) ++copies;
      const int expected = (ok[0][i] || ok[1][i]) ? 1 : 0;
      if (copies > expected) extra_copies.fetch_add(1);
      if (copies < expected) lost_copies.fetch_add(1);
    }
    for (const HashPair& h : fillers) m.FindAndEraseByHash(h);
  }
  a.join();
  b.join();
  eraser.join();

  EXPECT_EQ(extra_copies.load(), 0u);
  EXPECT_EQ(lost_copies.load(), 0u);
  EXPECT_EQ(m.size(), 0u);
  EXPECT_EQ(CMapTestPeer::OverflowTotal(m), 0u);
}

}  // namespace
}  // namespace furrballs
