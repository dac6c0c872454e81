#include <cstdint>
#include <memory_resource>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "engine/common/byte_codec.h"
#include "engine/common/error.h"
#include "engine/common/hash_pair.h"
#include "engine/common/raw_allocator.h"
#include "engine/common/spin_lock.h"

namespace furrballs {
namespace {

TEST(KeyHasherTest, SameSecretSameHash) {
  KeyHasher a(42), b(42);
  EXPECT_EQ(a.Hash("user:1"), b.Hash("user:1"));
  EXPECT_NE(a.Hash("user:1"), a.Hash("user:2"));
}

TEST(KeyHasherTest, DifferentSecretsGiveDifferentIdentities) {
  KeyHasher a(1), b(2);
  EXPECT_NE(a.Hash("user:1"), b.Hash("user:1"));
}

TEST(KeyHasherTest, SecretRoundTripsThroughExplicitConstructor) {
  KeyHasher a(7);
  KeyHasher restored(a.secret());
  EXPECT_EQ(a.Hash("k"), restored.Hash("k"));
}

TEST(ErrorTest, CategoryComesFromHighNibble) {
  EXPECT_EQ(CategoryOf(Error::kOk), ErrorCategory::kNone);
  EXPECT_EQ(CategoryOf(Error::kCacheFull), ErrorCategory::kCache);
  EXPECT_EQ(CategoryOf(Error::kStorageCorrupt), ErrorCategory::kStorage);
  EXPECT_EQ(ErrorName(Error::kAbandonedSet), "ABANDONED_SET");
}

TEST(SpinLockTest, MutualExclusionUnderContention) {
  SpinLock lock;
  int64_t counter = 0;  // deliberately non-atomic: the lock must protect it
  constexpr int kThreads = 4, kIters = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kIters; ++i) {
        SpinLockHolder h(lock);
        ++counter;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(counter, int64_t{kThreads} * kIters);
}

TEST(SpinLockTest, TryLockFailsWhileHeld) {
  SpinLock lock;
  lock.lock();
  EXPECT_FALSE(lock.try_lock());
  lock.unlock();
  EXPECT_TRUE(lock.try_lock());
  lock.unlock();
}

TEST(RawAllocatorTest, DefaultIsCacheLineAligned) {
  RawAllocator a = RawAllocator::Default();
  void* p = a.Allocate(1000);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % kCacheLineSize, 0u);
  a.Deallocate(p, 1000);
}

TEST(RawAllocatorTest, FromResourceUsesTheResource) {
  std::pmr::monotonic_buffer_resource arena;
  RawAllocator a = RawAllocator::FromResource(&arena);
  void* p = a.Allocate(256);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % kCacheLineSize, 0u);
  a.Deallocate(p, 256);
}

TEST(ByteCodecTest, ReadsBackWhatWasAppended) {
  std::string bytes;
  AppendLe<uint32_t>(bytes, 0xdeadbeef);
  AppendLe<uint64_t>(bytes, 42);
  bytes.append("xyz");
  ByteReader r(bytes);
  uint32_t a = 0;
  uint64_t b = 0;
  char c[3];
  ASSERT_TRUE(r.Read(&a));
  ASSERT_TRUE(r.Read(&b));
  EXPECT_EQ(r.rest(), "xyz");
  ASSERT_TRUE(r.Bytes(c, 3));
  EXPECT_EQ(a, 0xdeadbeefu);
  EXPECT_EQ(b, 42u);
  EXPECT_EQ(std::string(c, 3), "xyz");
  EXPECT_TRUE(r.done());
}

TEST(ByteCodecTest, AShortReadFailsAndConsumesNothing) {
  const std::string bytes = "1234567";  // one byte short of a u64
  ByteReader r(bytes);
  uint64_t v = 9;
  EXPECT_FALSE(r.Read(&v));
  EXPECT_EQ(v, 9u);
  EXPECT_EQ(r.remaining(), 7u);
  uint32_t w = 0;
  EXPECT_TRUE(r.Read(&w));
  EXPECT_FALSE(r.Bytes(&w, 4));
  EXPECT_EQ(r.remaining(), 3u);
}

}  // namespace
}  // namespace furrballs
