// A chunked value stays readable while it is overwritten (chunked_value.h,
// "Grace"): a key that always holds a complete value never misses for a
// reader, however often writers replace it, and the replaced writes' chunks
// are deleted once no reader can need them.
#include <atomic>
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "engine/furrball/chunked_value.h"
#include "engine/furrball/chunked_value_testing.h"
#include "engine/furrball/furrball.h"
#include "engine/furrball/furrball_testing.h"
#include "tests/common/eventually.h"

namespace furrballs {
namespace furrball_internal {
namespace {

constexpr size_t kValueBytes = 1024 * 1024 - 64;  // 129 chunks at 64 KiB
constexpr uint64_t kStampsPerWriter = 1'000'000;

// 64 KiB pages, so that a value is many chunks and its read is long, in a
// budget that holds every value a test keeps alive without evicting any.
FurrBallOptions LargeBudgetSmallPages() {
  FurrBallOptions o = FourMiB();
  o.memory_budget_bytes = 128 * kMiB;
  o.page_size_bytes = 64 * 1024;
  return o;
}

// Writer `w`'s value number `i`: its size and every word say who wrote it
// (at most the default 1 MiB max_value_bytes).
std::string ValueOf(int w, uint64_t i) {
  return Stamped(kValueBytes + 8 * w, w * kStampsPerWriter + i);
}

// Expects a value read back to be one writer's whole value, unmixed;
// returns its stamp, or nullopt after a failure. Checks the words in place
// (StampOf builds a copy), which keeps the stress test short under TSAN.
std::optional<uint64_t> ExpectWhole(const std::string& got, int writers) {
  uint64_t first = 0;
  if (got.size() >= 8) std::memcpy(&first, got.data(), 8);
  const uint64_t stamp = first / 0x100000000ull;
  const uint64_t writer = stamp / kStampsPerWriter;
  bool whole = got.size() >= 8 && writer < uint64_t(writers) &&
               got.size() == kValueBytes + 8 * writer;
  for (size_t i = 0; whole && i * 8 < got.size(); ++i) {
    uint64_t word = 0;
    std::memcpy(&word, got.data() + i * 8, 8);
    whole = word == stamp * 0x100000000ull + i;
  }
  EXPECT_TRUE(whole) << "a mixed or partial value of " << got.size()
                     << " bytes";
  if (!whole) return std::nullopt;
  return stamp;
}

// Writers overwrite one key in a loop while a reader Gets it kReads times.
// The key always holds a complete value (written before the reader starts,
// never deleted), so every read must find one. The reader runs on node 1
// and the writers on node 0 of two simulated nodes with a remote access
// delay, so that about half of every read's chunk reads are slow (a
// reader on another socket) and the writers replace the value many times
// during a read; without grace such reads miss after following four heads.
// Each writer stays at most kAhead writes ahead of the reader's completed
// reads: the retire queue is bounded (a quarter of the pages, about 28
// values here), and a reader that the scheduler leaves off the CPU while
// writers fill that bound may lose its value, the bound's documented cost
// and not what this test is about.
TEST(ChunkedValueOverwriteTest, ReadersOfAKeyOverwrittenContinuouslyNeverMiss) {
  constexpr int kWriters = 2;
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
  constexpr int kReads = 250;  // 1,000 took 262 s under TSAN
#else
  constexpr int kReads = 1000;
#endif
  constexpr uint64_t kAhead = 8;
  FurrBallOptions o = LargeBudgetSmallPages();
  o.node_count = 2;
  o.simulated_remote_delay_ns = 20'000;
  std::unique_ptr<FurrBall> ball = MustOpen(o);
  ASSERT_NE(ball, nullptr);
  ASSERT_GT(kValueBytes / ChunkBytesFor(ball->memory_plan().page_size), 120u);
  ASSERT_EQ(ball->Set("hot", ValueOf(0, 0)).error, Error::kOk);
  const int64_t one_value = LiveKeys(*ball);  // every writer's: 129 chunks

  // Each writer cycles through kPool values of its own (building a 1 MiB
  // value per write would dominate the test under TSAN); a read mixing
  // chunks of two writes would still show, the pool's stamps all differ.
  constexpr uint64_t kPool = 8;
  std::vector<std::vector<std::string>> pool(kWriters);
  for (int w = 0; w < kWriters; ++w) {
    for (uint64_t i = 0; i < kPool; ++i) pool[w].push_back(ValueOf(w, i));
  }
  std::atomic<uint64_t> reads_done{0};
  std::atomic<bool> reader_done{false};
  std::atomic<uint64_t> writes{0};
  std::vector<std::thread> writers;
  for (int w = 0; w < kWriters; ++w) {
    writers.emplace_back([&, w] {
      EXPECT_TRUE(ball->PinCurrentThreadToNode(0).ok());
      for (uint64_t i = 1; !reader_done.load(); ++i) {
        while (i > reads_done.load() + kAhead && !reader_done.load()) {
          std::this_thread::yield();
        }
        const Error e = ball->Set("hot", pool[w][i % kPool]).error;
        EXPECT_EQ(e, Error::kOk);
        if (e != Error::kOk) break;
        writes.fetch_add(1);
      }
    });
  }
  EXPECT_TRUE(ball->PinCurrentThreadToNode(1).ok());
  int misses = 0;
  std::string got;
  for (int r = 0; r < kReads; ++r) {
    if (!ball->Get("hot", &got).found) {
      ++misses;
    } else if (!ExpectWhole(got, kWriters).has_value()) {
      break;
    }
    reads_done.fetch_add(1);
  }
  reader_done.store(true);
  for (std::thread& t : writers) t.join();
  EXPECT_EQ(misses, 0) << "of " << kReads << " reads, with " << writes.load()
                       << " overwrites";
  ASSERT_TRUE(ball->Get("hot", &got).found);
  ExpectWhole(got, kWriters);
  // With the readers gone every replaced write is deleted (by the last
  // writers' drains or the drain job the last reader queued).
  EXPECT_TRUE(test_support::Eventually([&] {
    return LiveKeys(*ball) == one_value;
  })) << LiveKeys(*ball) << " live entries, " << one_value << " expected";
}

// The cache's ChunkStore, with a hook run before each chunk read (on the
// reader's thread, holding no lock), so that a test can overwrite the key
// at a chosen point of a read.
class HookedStore final : public ChunkStore {
 public:
  explicit HookedStore(ChunkStore& real) : real_(real) {}
  std::function<void()> before_chunk_read;

  HashPair HashOf(std::string_view key) const override {
    return real_.HashOf(key);
  }
  GetResult GetEntry(const KeyRef& key, std::string* value, EntryKind wanted,
                     EntryKind* kind, bool read_disk) override {
    if (wanted == EntryKind::kChunk && before_chunk_read) before_chunk_read();
    return real_.GetEntry(key, value, wanted, kind, read_disk);
  }
  SetResult SetEntry(const KeyRef& key, std::string_view value,
                     const WriteOptions& options, EntryKind kind,
                     std::string* replaced_head) override {
    return real_.SetEntry(key, value, options, kind, replaced_head);
  }
  DeleteResult DeleteEntry(const HashPair& h, uint64_t if_version,
                           std::string* replaced_head) override {
    return real_.DeleteEntry(h, if_version, replaced_head);
  }
  bool RunSoon(void (*job)(void*), void* context) override {
    return real_.RunSoon(job, context);
  }

 private:
  ChunkStore& real_;
};

// A ChunkedValues of the test's own over a real one-node cache, reached
// through a HookedStore.
struct Harness {
  explicit Harness(uint64_t retired_bytes_limit)
      : ball(MustOpen(LargeBudgetSmallPages())),
        store(ChunkStoreForTesting(*ball)),
        values(&store, ball->memory_plan().page_size, 1,
               retired_bytes_limit) {}
  // The workers may run a drain job of `values`: stopped (running what is
  // queued) before `values` goes.
  ~Harness() { ball->Close(); }

  KeyRef Key(std::string_view key) const { return {ball->Hash(key), key}; }
  // A Get as FurrBall::Get does it: the head, then its chunks.
  GetResult Get(std::string_view key, std::string* value) {
    EntryKind kind = EntryKind::kValue;
    const GetResult r = store.GetEntry(Key(key), value, EntryKind::kValue,
                                       &kind, /*read_disk=*/true);
    if (!r.found || kind != EntryKind::kChunkedHead) return r;
    return values.Assemble(Key(key), r, value, /*read_disk=*/true);
  }
  // From now on, "hot" gets writer 0's next value before every `n`th chunk
  // read; writes, most_live and most_retired record what happened.
  void OverwriteBeforeEveryNthChunkRead(uint64_t n) {
    store.before_chunk_read = [this, n] {
      if (chunk_reads++ % n != 0) return;
      ASSERT_EQ(values.Set(Key("hot"), ValueOf(0, ++writes), {}).error,
                Error::kOk);
      most_live = std::max(most_live, LiveKeys(*ball));
      most_retired = std::max(most_retired, values.RetiredForTesting());
    };
  }

  std::unique_ptr<FurrBall> ball;
  HookedStore store;
  ChunkedValues values;
  uint64_t chunk_reads = 0;
  uint64_t writes = 0;
  int64_t most_live = 0;
  size_t most_retired = 0;
};

// One read during which the key is overwritten before every 16th chunk
// read, so that every head it reads is replaced before it has read that
// head's chunks: with grace it returns the value it started with, whole;
// without (a bound of 0 deletes every replaced write at once, as before
// grace) it misses, after following kMaxHeadReads heads. Then, with the
// reader gone, the replaced writes' chunks are deleted by the drain job
// its leaving scheduled, and only the last value's entries are left.
void OverwriteDuringOneRead(uint64_t retired_bytes_limit, bool expect_found) {
  Harness t(retired_bytes_limit);
  ASSERT_NE(t.ball, nullptr);
  ASSERT_EQ(t.values.Set(t.Key("hot"), ValueOf(0, 0), {}).error, Error::kOk);
  const int64_t one_value = LiveKeys(*t.ball);
  ASSERT_GT(one_value, 120);

  t.OverwriteBeforeEveryNthChunkRead(16);
  std::string got;
  const GetResult r = t.Get("hot", &got);
  t.store.before_chunk_read = nullptr;
  // At least one write per head followed (kMaxHeadReads is 4).
  ASSERT_GE(t.writes, 4u);
  EXPECT_EQ(r.found, expect_found) << t.writes << " overwrites";
  if (expect_found) {
    EXPECT_EQ(ExpectWhole(got, 1), 0u) << "the value the read started with";
    EXPECT_GT(t.most_live, 2 * one_value)
        << "replaced chunks stay while their reader reads";
  }
  EXPECT_TRUE(test_support::Eventually([&] {
    return LiveKeys(*t.ball) == one_value;
  })) << LiveKeys(*t.ball) << " live entries, " << one_value << " expected";
  EXPECT_EQ(t.values.RetiredForTesting(), 0u);
  ASSERT_TRUE(t.Get("hot", &got).found);
  EXPECT_EQ(ExpectWhole(got, 1), t.writes) << "the last write";
}

TEST(ChunkedValueOverwriteTest, AReadKeepsItsValueWhileWritersReplaceIt) {
  OverwriteDuringOneRead(/*retired_bytes_limit=*/64 * kMiB,
                         /*expect_found=*/true);
}

// The same read and writes miss without grace: the test above can fail.
TEST(ChunkedValueOverwriteTest, WithoutGraceTheSameReadMisses) {
  OverwriteDuringOneRead(/*retired_bytes_limit=*/0, /*expect_found=*/false);
}

// A head read before the read section began (as FurrBall::Get reads it)
// whose write is replaced and deleted before the section: its first chunk
// is gone, the head read again inside the section is followed and read
// whole.
TEST(ChunkedValueOverwriteTest, AHeadReplacedBeforeTheSectionIsFollowed) {
  Harness t(64 * kMiB);
  ASSERT_NE(t.ball, nullptr);
  ASSERT_EQ(t.values.Set(t.Key("hot"), ValueOf(0, 0), {}).error, Error::kOk);
  const int64_t one_value = LiveKeys(*t.ball);
  EntryKind kind = EntryKind::kValue;
  std::string got;
  const GetResult head = t.store.GetEntry(t.Key("hot"), &got,
                                          EntryKind::kValue, &kind, true);
  ASSERT_TRUE(head.found);
  ASSERT_EQ(kind, EntryKind::kChunkedHead);
  // No reader is inside: the replaced chunks go at once.
  ASSERT_EQ(t.values.Set(t.Key("hot"), ValueOf(0, 1), {}).error, Error::kOk);
  EXPECT_EQ(LiveKeys(*t.ball), one_value);
  const GetResult r = t.values.Assemble(t.Key("hot"), head, &got, true);
  ASSERT_TRUE(r.found);
  EXPECT_GT(r.version, head.version);
  EXPECT_EQ(ExpectWhole(got, 1), 1u);
}

// The bound: replaced writes wait for a reader only up to the limit; past
// it the oldest are deleted at once, so the entries left while a reader is
// inside never exceed the current value, the one being written and the
// limit's worth of replaced ones.
TEST(ChunkedValueOverwriteTest, RetiredChunksStayWithinTheBound) {
  Harness t(3 * kMiB);  // two 1 MiB values' chunks
  ASSERT_NE(t.ball, nullptr);
  ASSERT_EQ(t.values.Set(t.Key("hot"), ValueOf(0, 0), {}).error, Error::kOk);
  const int64_t one_value = LiveKeys(*t.ball);
  t.OverwriteBeforeEveryNthChunkRead(8);
  std::string got;
  t.Get("hot", &got);  // may miss: the bound dropped what it read
  t.store.before_chunk_read = nullptr;
  ASSERT_GT(t.writes, 8u);
  EXPECT_EQ(t.most_retired, 2u);
  EXPECT_LE(t.most_live, 3 * one_value);
  EXPECT_TRUE(test_support::Eventually([&] {
    return LiveKeys(*t.ball) == one_value;
  }));
}

}  // namespace
}  // namespace furrball_internal
}  // namespace furrballs
