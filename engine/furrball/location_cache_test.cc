#include "engine/furrball/location_cache.h"

#include <cstdlib>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

namespace furrballs {
namespace furrball_internal {
namespace {

// Heap memory, not zeroed, so the cache must initialize its entries; or an
// allocator that always fails.
void* HeapAllocate(void*, size_t bytes) {
  void* p = std::aligned_alloc(kCacheLineSize, (bytes + 63) / 64 * 64);
  // Garbage where the entries will be: the cache must not trust it.
  if (p != nullptr) std::memset(p, 0xA5, bytes);
  return p;
}
void HeapDeallocate(void*, void* p, size_t) { std::free(p); }
void* FailAllocate(void*, size_t) { return nullptr; }

RawAllocator Heap() { return RawAllocator{&HeapAllocate, &HeapDeallocate}; }

std::vector<RawAllocator> Heaps(int n) {
  return std::vector<RawAllocator>(n, Heap());
}

// A hash whose home (NodeRouter::HomeIndex, the slice) on 2 nodes is
// `home`, with the given entry index bits and tag.
HashPair Key(int home, uint64_t index, uint64_t tag) {
  HashPair h;
  h.h1 = static_cast<uint64_t>(home) << 63;
  h.h2 = (tag << (64 - LocationCache::kTagBits)) |
         (index << LocationCache::kIndexShift) | 0x3;
  return h;
}

TEST(LocationCacheTest, SizedFromTheKeySlots) {
  EXPECT_EQ(LocationCache::EntriesFor(1), LocationCache::kMinEntries);
  EXPECT_EQ(LocationCache::EntriesFor(1000), 1024u);
  EXPECT_EQ(LocationCache::EntriesFor(1024), 1024u);
  EXPECT_EQ(LocationCache::BytesFor(1000), 2048u);
}

TEST(LocationCacheTest, RemembersWhereAKeyIsAndNothingElse) {
  NodeRouter router({0, 1});
  LocationCache cache(&router, Heaps(2), 1024);
  ASSERT_TRUE(cache.ok());
  const HashPair a = Key(0, 5, 7);
  const HashPair b = Key(1, 9, 3);
  EXPECT_EQ(cache.Hint(a), -1);
  EXPECT_EQ(cache.Hint(b), -1);
  cache.Remember(a, 1);
  cache.Remember(b, 0);
  EXPECT_EQ(cache.Hint(a), 1);
  EXPECT_EQ(cache.Hint(b), 0);
  cache.Remember(a, 0);  // the key moved
  EXPECT_EQ(cache.Hint(a), 0);
}

TEST(LocationCacheTest, IndexCollisionsWithAnotherTagAreNoHint) {
  NodeRouter router({0, 1});
  LocationCache cache(&router, Heaps(2), 1024);
  const HashPair a = Key(0, 5, 7);
  const HashPair b = Key(0, 5, 8);  // same slice and entry, another tag
  cache.Remember(a, 1);
  EXPECT_EQ(cache.Hint(b), -1);
  cache.Remember(b, 0);  // b takes the entry
  EXPECT_EQ(cache.Hint(a), -1);
  EXPECT_EQ(cache.Hint(b), 0);
  // Index bits beyond the slice's size wrap onto the same entry.
  const HashPair c = Key(0, 5 + 1024, 9);
  cache.Remember(c, 1);
  EXPECT_EQ(cache.Hint(b), -1);
  EXPECT_EQ(cache.Hint(c), 1);
}

TEST(LocationCacheTest, SlicesAreSeparate) {
  NodeRouter router({0, 1});
  LocationCache cache(&router, Heaps(2), 1024);
  const HashPair a = Key(0, 5, 7);
  const HashPair b = Key(1, 5, 7);  // same entry and tag in the other slice
  cache.Remember(a, 1);
  cache.Remember(b, 0);
  EXPECT_EQ(cache.Hint(a), 1);
  EXPECT_EQ(cache.Hint(b), 0);
}

TEST(LocationCacheTest, AFullCollisionNamesTheOtherKeysNode) {
  // Same slice, entry and tag: the cache cannot tell the keys apart. This
  // is why a hint is only probed, never trusted (furrball_locate_test's
  // AStaleOrCollidingHintIsNeverAWrongAnswer).
  NodeRouter router({0, 1});
  LocationCache cache(&router, Heaps(2), 1024);
  HashPair a = Key(0, 5, 7);
  HashPair b = a;
  b.h2 ^= 0x1;  // differs only in bits the cache does not look at
  cache.Remember(a, 1);
  EXPECT_EQ(cache.Hint(b), 1);
}

TEST(LocationCacheTest, ForgetClearsOnlyTheHintItNames) {
  NodeRouter router({0, 1, 2});
  LocationCache cache(&router, Heaps(3), 256);
  const HashPair a = Key(0, 5, 7);
  cache.Remember(a, 2);
  cache.Forget(a, 1);  // a stale view: the hint has moved on
  EXPECT_EQ(cache.Hint(a), 2);
  cache.Forget(a, 2);
  EXPECT_EQ(cache.Hint(a), -1);
  // Another key now in the entry keeps it.
  const HashPair b = Key(0, 5, 8);
  cache.Remember(a, 1);
  cache.Remember(b, 0);
  cache.Forget(a, 1);
  EXPECT_EQ(cache.Hint(b), 0);
}

TEST(LocationCacheTest, EveryNodeIndexRoundTrips) {
  std::vector<int> ids;
  for (int i = 0; i < LocationCache::kMaxNodes; ++i) ids.push_back(i);
  NodeRouter router(ids);
  LocationCache cache(&router, Heaps(LocationCache::kMaxNodes), 64);
  ASSERT_TRUE(cache.ok());
  HashPair h;
  h.h2 = ~uint64_t{0};  // the largest tag
  for (int i = 0; i < LocationCache::kMaxNodes; ++i) {
    cache.Remember(h, i);
    EXPECT_EQ(cache.Hint(h), i);
  }
}

TEST(LocationCacheTest, AnAllocationFailureIsReported) {
  NodeRouter router({0, 1});
  std::vector<RawAllocator> allocators = {
      Heap(), RawAllocator{&FailAllocate, &HeapDeallocate}};
  LocationCache cache(&router, allocators, 1024);
  EXPECT_FALSE(cache.ok());
}

}  // namespace
}  // namespace furrball_internal
}  // namespace furrballs
