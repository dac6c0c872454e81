#include "service/malloc_settings.h"

#include <malloc.h>

#include <cstdlib>
#include <cstring>

#include <gtest/gtest.h>

namespace furrballs::service {
namespace {

// Bytes glibc holds in allocations that have their own mapping.
size_t MappedChunkBytes() { return mallinfo2().hblkhd; }

// The failure the settings prevent: with glibc's adapting threshold, the
// free of a 2 MiB block raises the threshold past 1 MiB, and the next 1 MiB
// block then comes from an arena's heap, where it stays resident after its
// free. With the thresholds fixed, it has its own mapping again (the
// threshold applies when no free chunk of the heap fits: a fresh process's
// heap has no free megabyte).
TEST(MallocSettingsTest, LargeBlocksKeepTheirOwnMappingAfterALargerFree) {
  ASSERT_TRUE(FixMallocThresholds().ok());
  void* big = std::malloc(size_t{2} << 20);
  ASSERT_NE(big, nullptr);
  std::memset(big, 1, size_t{2} << 20);
  std::free(big);
  const size_t before = MappedChunkBytes();
  void* next = std::malloc(size_t{1} << 20);
  ASSERT_NE(next, nullptr);
  std::memset(next, 1, size_t{1} << 20);
  EXPECT_GE(MappedChunkBytes(), before + (size_t{1} << 20));
  std::free(next);
  EXPECT_EQ(MappedChunkBytes(), before);
}

}  // namespace
}  // namespace furrballs::service
