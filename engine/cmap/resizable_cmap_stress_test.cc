// Concurrency stress for ResizableCMap: readers look up every key
// continuously while a writer (holding a std::mutex as the external lock)
// grows the table six times, 64 -> 4096 keys (24 times over), migrating a few keys per lock
// hold and inserting, overwriting and erasing between the steps, and an
// updater bumps values with UpdateInPlace. The second test then shrinks it
// twice, to room for the churn keys and then to a table just big enough
// for its keys, in the same way. The old table's pages behind the
// migration cursor, and retired tables, are released with madvise while the
// readers run.
//
// What must hold:
//   - a key that is never erased and was inserted before the read began is
//     found by every Find and TryVisit (no miss window while keys move or
//     the tables switch);
//   - every value found is whole (its check word matches) and belongs to the
//     key asked for;
//   - per reader and key, versions never go backwards (no stale copy is
//     read after a newer one: the old table's copy is gone once the new one
//     can be seen);
//   - no UpdateInPlace of a present key reports kKeyNotFound.
// Fixed operation counts, no sleeps, no timing.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <latch>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "engine/cmap/internal/test_meta.h"
#include "engine/cmap/resizable_cmap.h"
#include "engine/common/error.h"
#include "engine/common/hash_pair.h"
#include "engine/common/raw_allocator.h"

namespace furrballs {
namespace {

#if defined(__SANITIZE_THREAD__)
constexpr int kOpsDivisor = 4;
#else
constexpr int kOpsDivisor = 1;
#endif

using Meta = cmap_internal::TestMeta;
using cmap_internal::MakeTestMeta;
using cmap_internal::Mix;

HashPair Key(uint32_t id) { return HashPair{Mix(id), Mix(id ^ 0xabcdef)}; }

using Map = ResizableCMap<Meta>;

// Stable keys have ids [0, kMaxStable); churn keys from kChurnBase on.
constexpr uint32_t kMaxStable = 2500;
constexpr uint32_t kChurnBase = 1'000'000;
constexpr uint32_t kChurnKeys = 400;

struct Failures {
  std::atomic<uint64_t> missed{0};      // a stable key not found
  std::atomic<uint64_t> torn{0};        // a value not whole or foreign
  std::atomic<uint64_t> backwards{0};   // a version older than one seen
  std::atomic<uint64_t> update_lost{0}; // UpdateInPlace: kKeyNotFound
  std::atomic<uint64_t> reads{0};
};

class Stress {
 public:
  explicit Stress(bool shrink)
      : map_(64, RawAllocator::Mapped()), shrink_(shrink) {}

  void Run() {
    ASSERT_TRUE(map_.ok());
    // A first batch of stable keys before anyone reads.
    for (uint32_t id = 0; id < 40; ++id) InsertStable(id);
    std::vector<std::thread> threads;
    std::latch started(3);  // the writer waits until all three run
    for (int r = 0; r < 2; ++r) {
      threads.emplace_back([this, &started] {
        started.count_down();
        Reader();
      });
    }
    threads.emplace_back([this, &started] {
      started.count_down();
      Updater();
    });
    started.wait();
    Writer();
    done_.store(true, std::memory_order_release);
    for (std::thread& t : threads) t.join();

    EXPECT_EQ(failures_.missed.load(), 0u) << "stable keys missed";
    EXPECT_EQ(failures_.torn.load(), 0u) << "torn or foreign values";
    EXPECT_EQ(failures_.backwards.load(), 0u) << "versions went backwards";
    EXPECT_EQ(failures_.update_lost.load(), 0u)
        << "UpdateInPlace lost a present key";
    EXPECT_GT(failures_.reads.load(), 0u);
    ::testing::Test::RecordProperty("reads", static_cast<int>(failures_.reads.load()));
    EXPECT_EQ(grows_, 6);
    if (shrink_) {
      EXPECT_EQ(shrinks_, 2);
      EXPECT_LT(map_.capacity(), 4096u);
    } else {
      EXPECT_EQ(map_.capacity(), 4096u);
    }
    // Quiescent: everything present with its last value.
    for (uint32_t id = 0; id < stable_.load(); ++id) {
      const std::optional<Meta> m = map_.Find(Key(id));
      ASSERT_TRUE(m.has_value()) << id;
      ASSERT_TRUE(cmap_internal::IsWholeFor(*m, id)) << id;
    }
  }

 private:
  // REQUIRES: called before readers start, or by the writer under lock_.
  void InsertStable(uint32_t id) {
    const CMapSetResult r = map_.Set(Key(id), MakeTestMeta(id, 1));
    ASSERT_EQ(r.err, Error::kOk);
    ASSERT_TRUE(r.inserted);
    // Release: a reader that sees the count sees the insert.
    stable_.store(id + 1, std::memory_order_release);
  }

  // One churn step on key `c`, under lock_: erase if present, else insert;
  // or overwrite. Versions of a churn key only grow.
  void Churn(uint32_t c, bool overwrite) {
    const uint32_t id = kChurnBase + c;
    const uint32_t v = ++churn_version_[c];
    if (overwrite && churn_present_[c]) {
      const CMapSetResult r = map_.Set(Key(id), MakeTestMeta(id, v));
      if (r.err == Error::kOk) {
        EXPECT_FALSE(r.inserted);
      }
      return;
    }
    if (churn_present_[c]) {
      const FindAndEraseResult<Meta> r = map_.FindAndEraseByHash(Key(id));
      if (r.err == Error::kOk) {
        EXPECT_TRUE(cmap_internal::IsWholeFor(*r.value, id));
        churn_present_[c] = false;
      }
      return;
    }
    const CMapSetResult r = map_.Set(Key(id), MakeTestMeta(id, v));
    if (r.err == Error::kOk) {
      EXPECT_TRUE(r.inserted);
      churn_present_[c] = true;
    }
  }

  void Writer() {
    uint64_t rng = 1;
    const auto next = [&rng] { return rng = Mix(rng); };
    const int steps_between = 600 / kOpsDivisor;
    for (size_t cap = 64; cap < 4096; cap *= 2) {
      // Fill towards 3/4 of the capacity, churning as we go.
      for (int i = 0; i < steps_between; ++i) {
        std::lock_guard<std::mutex> hold(lock_);
        if (map_.size() + 1 < cap * 3 / 4 && stable_.load() < kMaxStable) {
          InsertStable(stable_.load());
        }
        if (map_.size() + 1 < cap) Churn(next() % kChurnKeys, next() % 3 == 0);
      }
      // Grow: allocate without the lock, switch and migrate under it, a
      // few keys per hold, with inserts, overwrites and erases between.
      std::unique_ptr<Map::Table> bigger =
          Map::AllocateTable(cap * 2, RawAllocator::Mapped());
      {
        std::lock_guard<std::mutex> hold(lock_);
        ASSERT_EQ(map_.BeginGrow(std::move(bigger)), Error::kOk);
        ++grows_;
      }
      Migrate(cap, next, /*insert_stable=*/true);
    }
    if (!shrink_) return;
    // Shrink: to room for every churn key and 100 more (so the keys, which
    // can grow by at most the churn keys, stay below it), then to a table
    // with room for 16 more keys (inserts beyond it are refused,
    // kCacheFull, while the migrator moves keys into it). Only this thread
    // changes the key set.
    for (size_t room : {size_t{kChurnKeys + 100}, size_t{16}}) {
      size_t target;
      {
        std::lock_guard<std::mutex> hold(lock_);
        target = map_.size() + room;
      }
      std::unique_ptr<Map::Table> smaller =
          Map::AllocateTable(target, RawAllocator::Mapped());
      {
        std::lock_guard<std::mutex> hold(lock_);
        ASSERT_EQ(map_.BeginShrink(std::move(smaller)), Error::kOk);
        ++shrinks_;
      }
      Migrate(target, next, /*insert_stable=*/false);
    }
  }

  // Migrates a few keys per lock hold until the growth (or shrink) to a
  // table of `cap` keys ends, inserting (stable keys only if
  // `insert_stable`, so that a shrink's room is left to the churn keys),
  // overwriting and erasing between.
  template <typename Next>
  void Migrate(size_t cap, const Next& next, bool insert_stable) {
    for (bool more = true; more;) {
      {
        std::lock_guard<std::mutex> hold(lock_);
        more = map_.MigrateSome(1 + next() % 8) > 0;
        if (insert_stable && stable_.load() < kMaxStable &&
            map_.size() + 1 < cap) {
          InsertStable(stable_.load());
        }
        Churn(next() % kChurnKeys, next() % 2 == 0);
      }
      // The old table's pages behind the cursor, without the lock, while
      // readers probe it.
      if (next() % 4 == 0) map_.ReleaseRetired();
    }
    EXPECT_FALSE(map_.growing());
    map_.ReleaseRetired();  // without the lock, while readers run
  }

  void Reader() {
    std::vector<uint32_t> seen(kMaxStable, 0);
    std::vector<uint32_t> churn_seen(kChurnKeys, 0);
    uint64_t reads = 0;
    for (uint32_t pass = 0; !done_.load(std::memory_order_acquire); ++pass) {
      const uint32_t n = stable_.load(std::memory_order_acquire);
      for (uint32_t id = 0; id < n; ++id) {
        const bool visit = (id + pass) % 4 == 0;
        std::optional<Meta> got;
        if (visit) {
          Meta copy;
          const Map::VisitOutcome o =
              map_.TryVisit(Key(id), [&](const Meta& m) { copy = m; });
          if (o == Map::VisitOutcome::kChanged) continue;
          if (o == Map::VisitOutcome::kVisited) got = copy;
        } else {
          got = map_.Find(Key(id));
        }
        ++reads;
        if (!got.has_value()) {
          failures_.missed.fetch_add(1);
          continue;
        }
        Note(*got, id, seen[id]);
      }
      for (uint32_t c = 0; c < kChurnKeys; c += 3) {
        const uint32_t id = kChurnBase + c;
        if (std::optional<Meta> got = map_.Find(Key(id))) {
          Note(*got, id, churn_seen[c]);
        }
      }
    }
    failures_.reads.fetch_add(reads);
  }

  void Note(const Meta& m, uint32_t id, uint32_t& last) {
    if (!cmap_internal::IsWholeFor(m, id)) {
      failures_.torn.fetch_add(1);
      return;
    }
    if (m.version < last) failures_.backwards.fetch_add(1);
    last = std::max(last, m.version);
  }

  void Updater() {
    for (uint32_t pass = 0; !done_.load(std::memory_order_acquire); ++pass) {
      const uint32_t n = stable_.load(std::memory_order_acquire);
      for (uint32_t id = pass % 2; id < n; id += 2) {
        const Error err = map_.UpdateInPlace(Key(id), [](Meta& m) {
          m = MakeTestMeta(m.id, m.version + 1);
        });
        if (err == Error::kKeyNotFound) failures_.update_lost.fetch_add(1);
      }
    }
  }

  Map map_;
  const bool shrink_;
  std::mutex lock_;  // the external write lock
  std::atomic<uint32_t> stable_{0};
  std::atomic<bool> done_{false};
  Failures failures_;
  int grows_ = 0;
  int shrinks_ = 0;
  uint32_t churn_version_[kChurnKeys] = {};
  bool churn_present_[kChurnKeys] = {};
};

// Each round grows a fresh map from 64 to 4096 keys (tens of milliseconds).
TEST(ResizableCMapStressTest, ReadersNeverMissWhileTheTableGrows) {
  const int rounds = 24 / kOpsDivisor;
  for (int round = 0; round < rounds && !HasFailure(); ++round) {
    Stress stress(/*shrink=*/false);
    stress.Run();
  }
}

// Each round grows a fresh map from 64 to 4096 keys and shrinks it twice.
TEST(ResizableCMapStressTest, ReadersNeverMissWhileTheTableShrinks) {
  const int rounds = 24 / kOpsDivisor;
  for (int round = 0; round < rounds && !HasFailure(); ++round) {
    Stress stress(/*shrink=*/true);
    stress.Run();
  }
}

}  // namespace
}  // namespace furrballs
