#include "engine/arc/arc_index.h"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <unordered_map>
#include <vector>

#include <gtest/gtest.h>

#include "engine/arc/arc_trace.h"
#include "engine/common/hash_pair.h"
#include "engine/common/raw_allocator.h"

namespace furrballs {
namespace {

// The arena stand-in: slot -> key, as ArcFlatLists provides it.
class Harness {
 public:
  explicit Harness(uint32_t max_keys)
      : index_(*ArcIndex::Create(max_keys, RawAllocator::Default())),
        keys_(max_keys) {
    for (uint32_t s = 0; s < max_keys; ++s) free_.push_back(s);
  }

  uint32_t Find(const HashPair& k) const {
    return index_.Find(k.h2, [this, &k](uint32_t s) {
      ++const_cast<Harness*>(this)->matches_asked_;
      return keys_[s] == k ? ArcMatch::kKey : ArcMatch::kNo;
    });
  }
  void Insert(const HashPair& k) {
    const uint32_t s = free_.back();
    free_.pop_back();
    keys_[s] = k;
    index_.Insert(k.h2, s);
    model_[k] = s;
  }
  void Erase(const HashPair& k) {
    const uint32_t s = model_.at(k);
    index_.Erase(ArcIndex::HighOf(k.h2), s, [this](uint32_t slot) {
      ++high_asked_;
      return ArcIndex::HighOf(keys_[slot].h2);
    });
    model_.erase(k);
    free_.push_back(s);
  }
  // Starts growing the index to `max_keys` (slots up to it become usable).
  void Grow(uint32_t max_keys) {
    absl::StatusOr<ArcIndex> bigger =
        ArcIndex::Create(max_keys, RawAllocator::Default());
    ASSERT_TRUE(bigger.ok());
    for (uint32_t s = keys_.size(); s < max_keys; ++s) free_.push_back(s);
    keys_.resize(max_keys);
    index_.BeginGrow(*std::move(bigger));
  }
  // One migration step; frees the old table once it is done.
  bool Step(size_t max_moves) {
    const bool done = index_.MigrateSome(max_moves, [this](uint32_t slot) {
      ++high_asked_;
      return ArcIndex::HighOf(keys_[slot].h2);
    });
    if (done) {
      const auto [p, bytes] = index_.TakeRetired();
      retired_bytes_ += bytes;
      if (p != nullptr) RawAllocator::Default().Deallocate(p, bytes);
    }
    return done;
  }
  size_t retired_bytes() const { return retired_bytes_; }
  // Inserts a new key with a random fingerprint, or erases a random key:
  // ARC's churn at a size near `max_keys`.
  void Churn(TraceRng& rng, uint32_t max_keys, uint64_t* next_id) {
    if (model_.size() < max_keys && (model_.empty() || rng.Below(2))) {
      Insert(HashPair{*next_id, rng.Next()});
      ++*next_id;
    } else {
      auto it = model_.begin();
      std::advance(it, rng.Below(std::min<size_t>(model_.size(), 8)));
      Erase(it->first);
    }
  }

  // How often the index asked the arena stand-in for a key's home (only
  // for keys 7 or more buckets past it) or to confirm a tag match.
  uint64_t high_asked() const { return high_asked_; }
  uint64_t matches_asked() const { return matches_asked_; }
  // Every key the model holds is found at its slot.
  void ExpectAllFound() const {
    for (const auto& [k, s] : model_) ASSERT_EQ(Find(k), s);
  }
  size_t size() const { return model_.size(); }
  bool Has(const HashPair& k) const { return model_.count(k) != 0; }
  const ArcIndex& index() const { return index_; }

 private:
  struct PairHash {
    size_t operator()(const HashPair& h) const { return h.h2; }
  };
  ArcIndex index_;
  std::vector<HashPair> keys_;
  std::vector<uint32_t> free_;
  std::unordered_map<HashPair, uint32_t, PairHash> model_;
  uint64_t high_asked_ = 0;
  uint64_t matches_asked_ = 0;
  size_t retired_bytes_ = 0;
};

// Eight keys in one cluster of a table of n buckets that wraps from its
// last bucket to its first: homes last-1, last, 0, 1, last, last-1, ...
std::vector<HashPair> WrappedClusterKeys(uint64_t n) {
  const uint64_t last = n - 1;
  std::vector<HashPair> keys;
  for (uint64_t i = 0; i < 8; ++i) {
    const uint64_t home = (last - 1 + (i * 5) % 4) % n;
    // A tag whose multiply-shift home is `home` (the smallest such tag plus
    // i, far below the next home's), distinct per key.
    const uint64_t tag = ((home << 32) + n - 1) / n + i;
    keys.push_back(HashPair{i, (tag << 32) | i});
  }
  return keys;
}

TEST(ArcIndexTest, RejectsCapacitiesOutsideTheSlotEncoding) {
  EXPECT_FALSE(ArcIndex::Create(0, RawAllocator::Default()).ok());
  EXPECT_FALSE(ArcIndex::Create(ArcIndex::kMaxKeys + 1, RawAllocator::Default())
                   .ok());
}

TEST(ArcIndexTest, ReportsAllocationFailure) {
  RawAllocator failing{[](void*, size_t) -> void* { return nullptr; },
                       [](void*, void*, size_t) {}, nullptr};
  absl::StatusOr<ArcIndex> index = ArcIndex::Create(16, failing);
  ASSERT_FALSE(index.ok());
  EXPECT_EQ(index.status().code(), absl::StatusCode::kResourceExhausted);
}

TEST(ArcIndexTest, LoadFactorIsAtMostThreeQuarters) {
  for (uint32_t n : {1u, 2u, 3u, 7u, 1000u, 2000u}) {
    absl::StatusOr<ArcIndex> index = ArcIndex::Create(n, RawAllocator::Default());
    ASSERT_TRUE(index.ok());
    EXPECT_GE(3 * index->bucket_count(), 4u * n);
    EXPECT_LE(3 * index->bucket_count(), 4u * n + 3 + 3 * 8);
    EXPECT_EQ(index->bucket_count() * 8, ArcIndex::BytesFor(n));
  }
}

TEST(ArcIndexTest, FindsInsertedKeysAndMissesOthers) {
  Harness h(64);
  for (uint64_t i = 0; i < 64; ++i) h.Insert(TraceKey(i));
  h.ExpectAllFound();
  for (uint64_t i = 64; i < 1000; ++i) EXPECT_EQ(h.Find(TraceKey(i)), kArcNil);
}

// Keys sharing the high half of H2 share a home bucket, and keys sharing
// the low half (the tag) compare equal on it; only the caller's check tells
// them apart, even keys with one whole fingerprint.
// FirstTagged (the promotion drain's prefetch hint) names the slot a Find
// reaches first among those with the key's tag: the key's own slot when no
// other key with its tag sits earlier in its cluster, and kArcNil when the
// cluster has no such tag.
TEST(ArcIndexTest, FirstTaggedNamesTheSlotAFindReachesFirst) {
  Harness h(64);
  for (uint64_t i = 0; i < 48; ++i) h.Insert(TraceKey(i));
  for (uint64_t i = 0; i < 48; ++i) {
    EXPECT_EQ(h.index().FirstTagged(TraceKey(i).h2), h.Find(TraceKey(i)))
        << "key " << i;
  }
  for (uint64_t i = 48; i < 1000; ++i) {
    EXPECT_EQ(h.index().FirstTagged(TraceKey(i).h2), kArcNil) << "key " << i;
  }
}

TEST(ArcIndexTest, KeysWithTheSameTagCoexist) {
  Harness h(16);
  std::vector<HashPair> keys;
  for (uint64_t i = 0; i < 16; ++i) {
    keys.push_back(HashPair{i, (uint64_t{0xdeadbeef} << 32) | (i % 3)});
  }
  for (const HashPair& k : keys) h.Insert(k);
  h.ExpectAllFound();
  // Erase from the middle of the shared cluster, then the ends.
  for (int i : {7, 0, 15, 3, 8}) {
    h.Erase(keys[i]);
    EXPECT_EQ(h.Find(keys[i]), kArcNil);
    h.ExpectAllFound();
  }
}

// A bucket keeps its distance from home up to 6; keys further away make the
// backward shift ask the arena for their home. One cluster of 40 keys with
// one home, erased from the front: every erase shifts the whole cluster,
// and the keys 7 or more buckets out must be asked about, the others not.
TEST(ArcIndexTest, FarKeysAskTheArenaForTheirHome) {
  Harness h(64);
  std::vector<HashPair> keys;
  for (uint64_t i = 0; i < 40; ++i) {
    keys.push_back(HashPair{i, (uint64_t{0x80000000} << 32) | (i + 1)});
  }
  for (const HashPair& k : keys) h.Insert(k);
  h.ExpectAllFound();
  EXPECT_EQ(h.high_asked(), 0u);
  h.Erase(keys[0]);
  // Keys 1..39 sit 1..39 buckets out; those at 7 or more (7..39) are asked.
  EXPECT_EQ(h.high_asked(), 33u);
  h.ExpectAllFound();
  for (size_t i = 1; i < keys.size(); ++i) {
    h.Erase(keys[i]);
    EXPECT_EQ(h.Find(keys[i]), kArcNil);
    h.ExpectAllFound();
  }
  EXPECT_EQ(h.size(), 0u);
}

// A tag match alone is not a find: the caller's check is asked once per
// candidate with the key's tag and refuses the others.
TEST(ArcIndexTest, ATagMatchIsConfirmedByTheCaller) {
  Harness h(8);
  const HashPair a{1, 0x1111111122222222ULL};
  const HashPair same_tag{2, 0x3333333322222222ULL};
  h.Insert(a);
  const uint64_t before = h.matches_asked();
  EXPECT_EQ(h.Find(HashPair{9, a.h2}), kArcNil);
  EXPECT_EQ(h.matches_asked(), before + 1);
  EXPECT_EQ(h.Find(same_tag), kArcNil);
  EXPECT_EQ(h.Find(a), h.Find(a));
  EXPECT_NE(h.Find(a), kArcNil);
}

// A fingerprint match is only kept as a fallback: a whole-key match later
// in the cluster wins, and without one the first fingerprint match is
// returned.
TEST(ArcIndexTest, AWholeKeyMatchWinsOverAnEarlierFingerprintMatch) {
  ArcIndex index = *ArcIndex::Create(8, RawAllocator::Default());
  const uint64_t fp = 0x1234567890abcdefULL;
  index.Insert(fp, 3);  // a ghost
  index.Insert(fp, 5);  // another ghost
  index.Insert(fp, 4);  // the resident key
  auto find = [&](uint32_t key_slot) {
    return index.Find(fp, [key_slot](uint32_t s) {
      return s == key_slot ? ArcMatch::kKey
             : s == 4      ? ArcMatch::kNo
                           : ArcMatch::kFingerprint;
    });
  };
  EXPECT_EQ(find(4), 4u);
  EXPECT_EQ(find(kArcNil), 3u);
}

// Clusters that wrap from the last bucket to the first exercise the modular
// distance arithmetic of the backward shift.
TEST(ArcIndexTest, BackwardShiftAcrossTheTableEnd) {
  Harness h(8);
  const std::vector<HashPair> keys =
      WrappedClusterKeys(h.index().bucket_count());
  for (const HashPair& k : keys) h.Insert(k);
  h.ExpectAllFound();
  for (size_t i = 0; i < keys.size(); ++i) {
    h.Erase(keys[i]);
    EXPECT_EQ(h.Find(keys[i]), kArcNil);
    h.ExpectAllFound();
    h.Insert(keys[i]);
    h.ExpectAllFound();
  }
}

// ARC's churn pattern: the table stays near its maximum while keys are
// erased and inserted forever. Without tombstones, every key stays findable
// and no erase leaves a hole that breaks a probe chain.
TEST(ArcIndexTest, ChurnAtFullLoadMatchesAModel) {
  constexpr uint32_t kMax = 128;
  Harness h(kMax);
  TraceRng rng(7);
  uint64_t next_id = 0;
  std::vector<HashPair> live;
  for (int op = 0; op < 100000; ++op) {
    const bool insert = live.size() < kMax && (live.empty() || rng.Below(2));
    if (insert) {
      // A narrow tag range makes long clusters likely.
      const HashPair k{next_id, (rng.Below(64) << 32) | next_id};
      ++next_id;
      h.Insert(k);
      live.push_back(k);
    } else {
      const size_t i = rng.Below(live.size());
      h.Erase(live[i]);
      live[i] = live.back();
      live.pop_back();
    }
    if (op % 4096 == 0) h.ExpectAllFound();
  }
  h.ExpectAllFound();
  EXPECT_EQ(h.size(), live.size());
}

// Growth at full load (3/4 of the old table's buckets): every key stays
// findable at every step of the incremental rehash while keys are inserted
// (into the new table) and erased (from either), and each step moves at
// most the entries it is given.
TEST(ArcIndexTest, GrowthAtFullLoadKeepsEveryKeyFindable) {
  constexpr uint32_t kOld = 300, kNew = 700;
  Harness h(kOld);
  TraceRng rng(11);
  uint64_t next_id = 0;
  while (h.size() < kOld) h.Insert(HashPair{next_id++, rng.Next()});
  const size_t old_buckets = h.index().bucket_count();
  h.Grow(kNew);
  EXPECT_TRUE(h.index().growing());
  EXPECT_EQ(h.index().bucket_count(), ArcIndex::BucketsFor(kNew));
  EXPECT_EQ(h.index().memory_bytes(),
            ArcIndex::BytesFor(kOld) + ArcIndex::BytesFor(kNew));
  h.ExpectAllFound();
  EXPECT_FALSE(h.Step(0));  // no moves allowed: nothing happens
  h.ExpectAllFound();
  size_t steps = 0;
  for (bool done = false; !done; ++steps) {
    done = h.Step(1);
    h.Churn(rng, kNew, &next_id);
    h.ExpectAllFound();
    ASSERT_LT(steps, 10 * old_buckets) << "the rehash does not end";
  }
  EXPECT_GE(steps, kOld / 2) << "a step moved more than one entry";
  EXPECT_FALSE(h.index().growing());
  EXPECT_EQ(h.retired_bytes(), ArcIndex::BytesFor(kOld));
  EXPECT_EQ(h.index().memory_bytes(), ArcIndex::BytesFor(kNew));
  // The grown index keeps working at its new maximum.
  for (int op = 0; op < 20000; ++op) h.Churn(rng, kNew, &next_id);
  h.ExpectAllFound();
}

// A cluster that wraps from the old table's last bucket to its first: the
// scan starts at bucket 0, in the middle of that cluster, and a backward
// shift late in the scan walks past the end into buckets already emptied.
TEST(ArcIndexTest, GrowthMovesAClusterThatWrapsTheTableEnd) {
  Harness h(8);
  const std::vector<HashPair> keys =
      WrappedClusterKeys(h.index().bucket_count());
  for (const HashPair& k : keys) h.Insert(k);
  h.Grow(64);
  h.ExpectAllFound();
  while (!h.Step(1)) h.ExpectAllFound();
  h.ExpectAllFound();
  for (const HashPair& k : keys) h.Erase(k);
  EXPECT_EQ(h.size(), 0u);
}

// Growing again after a growth, with churn between and during.
TEST(ArcIndexTest, RepeatedGrowthsUnderChurn) {
  Harness h(4);
  TraceRng rng(12);
  uint64_t next_id = 0;
  uint32_t max_keys = 4;
  for (int growth = 0; growth < 8; ++growth) {
    for (int op = 0; op < 2000; ++op) h.Churn(rng, max_keys, &next_id);
    max_keys = 2 * max_keys + 1;
    h.Grow(max_keys);
    while (!h.Step(2)) h.Churn(rng, max_keys, &next_id);
    h.ExpectAllFound();
  }
  EXPECT_EQ(h.index().bucket_count(), ArcIndex::BucketsFor(max_keys));
}

}  // namespace
}  // namespace furrballs
