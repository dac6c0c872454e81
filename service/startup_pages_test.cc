// ReleaseStartUpPages drops the resident pages of read-only file mappings
// that are the file's, and never a mapping that holds private copies: a
// real file mapped twice, one mapping left clean, one with a page written
// before it was made read-only (as the dynamic linker does to relocated
// data, RELRO).
#include "service/startup_pages.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#include "engine/common/read_file.h"

namespace furrballs::service {
namespace {

TEST(ParseSmapsTest, OnlyReadOnlyPrivateFileMappingsWithoutCopiesAreDroppable) {
  const std::string smaps =
      "1000-3000 r-xp 00000000 fe:01 42    /usr/bin/server\n"
      "Rss:                   8 kB\n"
      "Anonymous:             0 kB\n"
      "3000-4000 r--p 00002000 fe:01 42    /usr/bin/server\n"
      "Rss:                   4 kB\n"
      "Anonymous:             4 kB\n"
      "4000-5000 rw-p 00003000 fe:01 42    /usr/bin/server\n"
      "Rss:                   4 kB\n"
      "Anonymous:             0 kB\n"
      "5000-6000 r--p 00000000 00:00 0 \n"
      "Rss:                   4 kB\n"
      "Anonymous:             0 kB\n"
      "6000-7000 r--s 00000000 fe:01 43    /dev/shm/x\n"
      "Rss:                   4 kB\n"
      "Anonymous:             0 kB\n"
      "7000-8000 r-xp 00000000 00:00 0     [vdso]\n"
      "Rss:                   4 kB\n"
      "Anonymous:             0 kB\n";
  const std::vector<SmapsMapping> m = ParseSmaps(smaps);
  ASSERT_EQ(m.size(), 6u);
  EXPECT_EQ(m[0].begin, 0x1000u);
  EXPECT_EQ(m[0].end, 0x3000u);
  EXPECT_EQ(m[0].resident_bytes, 8192u);
  EXPECT_TRUE(m[0].droppable);    // code
  EXPECT_FALSE(m[1].droppable);   // read-only, but relocated: a private copy
  EXPECT_FALSE(m[2].droppable);   // writable
  EXPECT_FALSE(m[3].droppable);   // anonymous
  EXPECT_FALSE(m[4].droppable);   // shared
  EXPECT_FALSE(m[5].droppable);   // no inode
}

// The resident bytes smaps gives for the mapping that starts at `p`.
uint64_t ResidentBytesAt(const void* p) {
  absl::StatusOr<std::string> smaps = ReadFileToString("/proc/self/smaps");
  EXPECT_TRUE(smaps.ok()) << smaps.status();
  for (const SmapsMapping& m : ParseSmaps(*smaps)) {
    if (m.begin == reinterpret_cast<uintptr_t>(p)) return m.resident_bytes;
  }
  ADD_FAILURE() << "no mapping at " << p;
  return 0;
}

TEST(ReleaseStartUpPagesTest, DropsTheFilesPagesAndKeepsPrivateCopies) {
  const size_t page = sysconf(_SC_PAGESIZE);
  const size_t bytes = 16 * page;
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(dir != nullptr ? dir : "/tmp") +
                           "/startup_pages_test_file";
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
  ASSERT_GE(fd, 0);
  std::string contents(bytes, 'f');
  ASSERT_EQ(write(fd, contents.data(), bytes), static_cast<ssize_t>(bytes));

  // Clean: read-only, every page read.
  auto* clean = static_cast<const char*>(
      mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE, fd, 0));
  ASSERT_NE(clean, MAP_FAILED);
  // Copied: written (a private copy of page 0), then made read-only.
  auto* copied = static_cast<char*>(
      mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0));
  ASSERT_NE(copied, MAP_FAILED);
  copied[0] = 'c';
  ASSERT_EQ(mprotect(copied, bytes, PROT_READ), 0);
  uint64_t sum = 0;
  for (size_t i = 0; i < bytes; i += page) sum += clean[i] + copied[i];
  EXPECT_EQ(sum, 2 * 'f' * (bytes / page) - 'f' + 'c');
  ASSERT_GT(ResidentBytesAt(clean), 0u);

  absl::StatusOr<ReleasedPages> released = ReleaseStartUpPages();
  ASSERT_TRUE(released.ok()) << released.status();
  EXPECT_GE(released->mappings, 1u);
  EXPECT_GE(released->resident_bytes, bytes);

  EXPECT_EQ(ResidentBytesAt(clean), 0u);
  EXPECT_GT(ResidentBytesAt(copied), 0u);
  EXPECT_EQ(copied[0], 'c') << "a private copy was dropped";
  EXPECT_EQ(clean[0], 'f');
  EXPECT_EQ(clean[bytes - 1], 'f');

  munmap(const_cast<char*>(clean), bytes);
  munmap(copied, bytes);
  close(fd);
  unlink(path.c_str());
}

}  // namespace
}  // namespace furrballs::service
