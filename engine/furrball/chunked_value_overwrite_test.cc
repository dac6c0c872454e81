// A chunked value stays readable while it is overwritten (chunked_value.h,
// "Grace"): a key that always holds a complete value never misses for a
// reader, however often writers replace it, and the replaced writes' chunks
// are deleted once no reader can need them.
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "engine/furrball/chunked_value.h"
#include "engine/furrball/chunked_value_testing.h"
#include "engine/furrball/furrball.h"

namespace furrballs {
namespace furrball_internal {
namespace {

constexpr size_t kValueBytes = 1024 * 1024 - 64;  // 129 chunks at 64 KiB pages
constexpr int kWriters = 2;
constexpr uint64_t kStampsPerWriter = 1'000'000;

// 64 KiB pages, so that a value is many chunks and its read is long, in a
// budget that holds every value the test keeps alive without evicting any.
FurrBallOptions SixtyFourMiB() {
  FurrBallOptions o = FourMiB();
  o.memory_budget_bytes = 64 * kMiB;
  o.page_size_bytes = 64 * 1024;
  if (getenv("NODES")) { o.node_count = 2; o.simulated_remote_delay_ns = atoi(getenv("NODES")); }
  return o;
}

// Writer `w`'s value number `i`: its size and every word say who wrote it.
std::string ValueOf(int w, uint64_t i) {
  return Stamped(kValueBytes + 8 * w, w * kStampsPerWriter + i);
}

// Checks a value read back: whole, unmixed, one writer's. Returns false
// (after a failure) otherwise.
bool ExpectWhole(const std::string& got) {
  const std::optional<uint64_t> stamp = StampOf(got);
  EXPECT_TRUE(stamp.has_value()) << "a mixed or partial value of "
                                 << got.size() << " bytes";
  if (!stamp.has_value()) return false;
  const uint64_t writer = *stamp / kStampsPerWriter;
  EXPECT_LT(writer, uint64_t{kWriters});
  EXPECT_EQ(got.size(), kValueBytes + 8 * writer);
  return got.size() == kValueBytes + 8 * writer;
}

// Writers overwrite one key in a loop while a reader Gets it kReads times.
// The key always holds a complete value (it is written before the reader
// starts and never deleted), so every read must find one. Each writer stays
// at most kAhead writes ahead of the reader's completed reads: the retire
// queue is bounded (chunked_value.h), and a reader the scheduler leaves off
// the CPU while writers fill that bound may lose its value, which is the
// bound's documented cost and not what this test is about. kAhead is far
// above the writes that land during one read, so the writers overwrite the
// key throughout every read.
TEST(ChunkedValueOverwriteTest, ReadersOfAKeyOverwrittenContinuouslyNeverMiss) {
  constexpr int kReads = 4000;
  constexpr uint64_t kAhead = 6;
  std::unique_ptr<FurrBall> ball = MustOpen(SixtyFourMiB());
  ASSERT_NE(ball, nullptr);
  ASSERT_GT(kValueBytes / ChunkBytesFor(ball->memory_plan().page_size), 120u);
  ASSERT_EQ(ball->Set("hot", ValueOf(0, 0)).error, Error::kOk);

  std::atomic<uint64_t> reads_done{0};
  std::atomic<bool> reader_done{false};
  std::atomic<uint64_t> writes{0};
  std::vector<std::thread> writers;
  for (int w = 0; w < kWriters; ++w) {
    writers.emplace_back([&, w] {
      if (getenv("NODES")) (void)ball->PinCurrentThreadToNode(0);
      for (uint64_t i = 1; !reader_done.load(); ++i) {
        while (i > reads_done.load() + kAhead && !reader_done.load()) {
          std::this_thread::yield();
        }
        EXPECT_EQ(ball->Set("hot", ValueOf(w, i)).error, Error::kOk);
        writes.fetch_add(1);
      }
    });
  }
  int misses = 0;
  if (getenv("NODES")) (void)ball->PinCurrentThreadToNode(1);
  std::string got;
  for (int r = 0; r < kReads; ++r) {
    if (!ball->Get("hot", &got).found) {
      ++misses;
    } else if (!ExpectWhole(got)) {
      break;
    }
    reads_done.fetch_add(1);
  }
  reader_done.store(true);
  for (std::thread& t : writers) t.join();
  std::printf("misses %d of %d reads, %llu overwrites\n", misses, kReads, (unsigned long long)writes.load());
  EXPECT_EQ(misses, 0) << "of " << kReads << " reads, with " << writes.load()
                       << " overwrites";
  ASSERT_TRUE(ball->Get("hot", &got).found);
  ExpectWhole(got);
}

}  // namespace
}  // namespace furrball_internal
}  // namespace furrballs
