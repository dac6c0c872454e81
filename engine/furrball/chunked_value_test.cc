// Tests of values stored in chunks (chunked_value.h) through a real
// FurrBall: round trips in small budgets, lost chunks, concurrent writers of
// one key, the conditional modes, TTLs, and the spill tier.
#include "engine/furrball/chunked_value.h"

#include <atomic>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "engine/furrball/clock.h"
#include "engine/furrball/furrball.h"
#include "engine/furrball/furrball_testing.h"

namespace furrballs {
namespace furrball_internal {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

std::unique_ptr<FurrBall> MustOpen(const FurrBallOptions& o) {
  absl::StatusOr<std::unique_ptr<FurrBall>> ball = FurrBall::Open(o);
  EXPECT_TRUE(ball.ok()) << ball.status();
  return ball.ok() ? std::move(*ball) : nullptr;
}

// A value of `size` bytes whose every 8-byte word is `stamp` + its index,
// so a value assembled from the wrong chunks, or in the wrong order, shows.
std::string Stamped(size_t size, uint64_t stamp) {
  std::string v(size, '\0');
  for (size_t i = 0; i * 8 < size; ++i) {
    const uint64_t w = stamp * 0x100000000ull + i;
    std::memcpy(v.data() + i * 8, &w, std::min<size_t>(8, size - i * 8));
  }
  return v;
}

// The stamp of a value made by Stamped, or nullopt if its words disagree.
std::optional<uint64_t> StampOf(const std::string& v) {
  if (v.size() < 8) return std::nullopt;
  uint64_t first;
  std::memcpy(&first, v.data(), 8);
  const uint64_t stamp = first / 0x100000000ull;
  if (v != Stamped(v.size(), stamp)) return std::nullopt;
  return stamp;
}

int64_t LiveKeys(const FurrBall& ball) {
  int64_t n = 0;
  for (const NodeStatsSnapshot& s : ball.Stats()) n += s.live_keys;
  return n;
}

uint64_t Hits(const FurrBall& ball) {
  uint64_t n = 0;
  for (const NodeStatsSnapshot& s : ball.Stats()) {
    n += s.hits_local + s.hits_remote;
  }
  return n;
}

// The smallest budget the issue names, with every default else: 1 MiB
// values, automatic page size.
FurrBallOptions FourMiB() {
  FurrBallOptions o;
  o.memory_budget_bytes = 4 * kMiB;
  o.node_count = 1;
  o.simulate_topology = true;
  return o;
}

TEST(ChunkedHeadTest, RoundTripsAndRejectsSizesThatDoNotAddUp) {
  const ChunkedHead head{100'000, 13, 8'000, 42};
  const std::optional<ChunkedHead> back =
      DecodeChunkedHead(EncodeChunkedHead(head));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->value_size, 100'000u);
  EXPECT_EQ(back->chunk_count, 13u);
  EXPECT_EQ(back->write_id, 42u);
  EXPECT_EQ(back->ChunkSize(0), 8'000u);
  EXPECT_EQ(back->ChunkSize(12), 4'000u);

  for (const ChunkedHead& bad :
       {ChunkedHead{100'000, 12, 8'000, 1}, ChunkedHead{96'000, 13, 8'000, 1},
        ChunkedHead{1, 0, 8'000, 1}, ChunkedHead{1, 1, 0, 1}}) {
    EXPECT_FALSE(DecodeChunkedHead(EncodeChunkedHead(bad)).has_value())
        << bad.value_size << " in " << bad.chunk_count;
  }
  EXPECT_FALSE(DecodeChunkedHead("short").has_value());
}

TEST(ChunkedHeadTest, AChunkEntryFitsTheLargestWholeEntry) {
  for (uint32_t page : {64u << 10, 2u << 20, 64u << 20}) {
    EXPECT_LE(EntryFootprint(PayloadSize(kChunkKeyBytes, ChunkBytesFor(page))),
              MaxWholeEntryBytes(page));
    EXPECT_GT(ChunkBytesFor(page), MaxWholeEntryBytes(page) * 9 / 10);
  }
}

TEST(ChunkedValueTest, AOneMiBValueRoundTripsInAFourMiBBudget) {
  std::unique_ptr<FurrBall> ball = MustOpen(FourMiB());
  ASSERT_NE(ball, nullptr);
  ASSERT_LT(ball->memory_plan().page_size, 1u << 20)
      << ball->memory_plan().Summary();
  const std::string value = Stamped(kMiB, 7);
  const SetResult set = ball->Set("big", value);
  ASSERT_EQ(set.error, Error::kOk);
  // Chunks are entries of their own.
  EXPECT_GT(LiveKeys(*ball), 16);

  const uint64_t hits_before = Hits(*ball);
  std::string got;
  const GetResult get = ball->Get("big", &got);
  ASSERT_TRUE(get.found);
  EXPECT_EQ(get.version, set.version);
  EXPECT_TRUE(got == value);
  EXPECT_EQ(Hits(*ball), hits_before + 1) << "chunk reads are not hits";

  // A value of every size around the chunk boundary.
  const uint32_t chunk = ChunkBytesFor(ball->memory_plan().page_size);
  for (size_t size : {size_t{chunk} - 1, size_t{chunk}, size_t{chunk} + 1,
                      size_t{2} * chunk, size_t{3} * chunk + 5}) {
    const std::string v = Stamped(size, size);
    ASSERT_EQ(ball->Set("edge", v).error, Error::kOk) << size;
    ASSERT_TRUE(ball->Get("edge", &got).found) << size;
    EXPECT_TRUE(got == v) << size;
  }
}

TEST(ChunkedValueTest, DeleteAndOverwritesRemoveTheChunks) {
  std::unique_ptr<FurrBall> ball = MustOpen(FourMiB());
  ASSERT_NE(ball, nullptr);
  ASSERT_EQ(ball->Set("big", Stamped(kMiB / 2, 1)).error, Error::kOk);
  const int64_t one_value = LiveKeys(*ball);
  ASSERT_GT(one_value, 2);
  // A big value over a big value: the old chunks go.
  ASSERT_EQ(ball->Set("big", Stamped(kMiB / 2, 2)).error, Error::kOk);
  EXPECT_EQ(LiveKeys(*ball), one_value);
  // A small value over a big one: one entry left.
  ASSERT_EQ(ball->Set("big", "small").error, Error::kOk);
  EXPECT_EQ(LiveKeys(*ball), 1);
  ASSERT_EQ(ball->Set("big", Stamped(kMiB / 2, 3)).error, Error::kOk);
  const DeleteResult d = ball->Delete("big");
  EXPECT_TRUE(d.deleted);
  EXPECT_EQ(LiveKeys(*ball), 0);
  std::string got;
  EXPECT_FALSE(ball->Get("big", &got).found);
}

TEST(ChunkedValueTest, ConditionalModesTtlAndTouchActOnTheHead) {
  ManualClock clock;
  FurrBallOptions o = FourMiB();
  o.clock = &clock;
  std::unique_ptr<FurrBall> ball = MustOpen(o);
  ASSERT_NE(ball, nullptr);
  const std::string v1 = Stamped(300'000, 1), v2 = Stamped(300'000, 2);
  WriteOptions add;
  add.mode = SetMode::kIfAbsent;
  const SetResult first = ball->Set("k", v1, add);
  ASSERT_EQ(first.error, Error::kOk);
  const int64_t keys = LiveKeys(*ball);
  EXPECT_EQ(ball->Set("k", v2, add).error, Error::kAlreadyExists);
  EXPECT_EQ(LiveKeys(*ball), keys) << "a refused write leaves no chunks";

  WriteOptions cas;
  cas.mode = SetMode::kIfVersion;
  cas.expected_version = first.version + 1000;
  EXPECT_EQ(ball->Set("k", v2, cas).error, Error::kVersionMismatch);
  cas.expected_version = first.version;
  cas.ttl_ms = 1000;
  const SetResult second = ball->Set("k", v2, cas);
  ASSERT_EQ(second.error, Error::kOk);
  EXPECT_GT(second.version, first.version);
  std::string got;
  GetResult r = ball->Get("k", &got);
  ASSERT_TRUE(r.found);
  EXPECT_TRUE(got == v2);
  EXPECT_EQ(r.ttl_remaining_ms, 1000u);

  clock.AdvanceMs(600);
  ASSERT_EQ(ball->Touch("k", 1000), Error::kOk);
  clock.AdvanceMs(600);
  r = ball->Get("k", &got);
  ASSERT_TRUE(r.found) << "Touch extended the value, chunks included";
  EXPECT_TRUE(got == v2);
  clock.AdvanceMs(500);
  EXPECT_FALSE(ball->Get("k", &got).found);
  EXPECT_EQ(ball->Set("k", v1, add).error, Error::kOk);

  cas.expected_version = 1;
  EXPECT_EQ(ball->Set("absent", v1, cas).error, Error::kKeyNotFound);
}

// A chunk that is gone (here deleted by its internal key's hash, as an
// eviction would) makes the value a miss, and the Get removes the rest.
TEST(ChunkedValueTest, ALostChunkIsAMissAndTheRestIsCleanedUp) {
  constexpr uint64_t kBase = 1'000'000;
  SetChunkWriteIdBaseForTesting(kBase);
  std::unique_ptr<FurrBall> ball = MustOpen(FourMiB());
  SetChunkWriteIdBaseForTesting(0);
  ASSERT_NE(ball, nullptr);
  const std::string value = Stamped(kMiB / 4, 5);
  ASSERT_EQ(ball->Set("big", value).error, Error::kOk);
  const uint32_t chunks = static_cast<uint32_t>(
      (value.size() + ChunkBytesFor(ball->memory_plan().page_size) - 1) /
      ChunkBytesFor(ball->memory_plan().page_size));
  ASSERT_EQ(LiveKeys(*ball), int64_t{chunks} + 1);

  auto chunk_hash = [&](uint32_t i) {
    const ChunkKey name = MakeChunkKey(ball->Hash("big"), kBase, i);
    return ball->Hash(std::string_view(name.data(), name.size()));
  };
  // A client cannot read a chunk by naming its internal key's bytes.
  {
    const ChunkKey name = MakeChunkKey(ball->Hash("big"), kBase, 0);
    std::string got;
    EXPECT_FALSE(ball->Get(std::string_view(name.data(), name.size()), &got)
                     .found);
  }
  ASSERT_TRUE(ball->Delete(chunk_hash(chunks / 2)).deleted);
  std::string got = "stale";
  EXPECT_FALSE(ball->Get("big", &got).found);
  EXPECT_TRUE(got.empty());
  EXPECT_EQ(LiveKeys(*ball), 0) << "head and remaining chunks removed";
  WriteOptions add;
  add.mode = SetMode::kIfAbsent;
  EXPECT_EQ(ball->Set("big", value, add).error, Error::kOk);
}

// Memory pressure evicts chunks and heads in any order: every Get is the
// whole value it asked for or a miss, never a part of one.
TEST(ChunkedValueTest, EvictionNeverYieldsAPartialValue) {
  for (bool spill : {false, true}) {
    SCOPED_TRACE(spill ? "spill" : "no spill");
    FurrBallOptions o = FourMiB();
    const std::filesystem::path dir =
        std::filesystem::path(::testing::TempDir()) / "chunked_eviction";
    std::filesystem::remove_all(dir);
    if (spill) o.spill_dir = dir.string();
    std::unique_ptr<FurrBall> ball = MustOpen(o);
    ASSERT_NE(ball, nullptr);
    int hits = 0, misses = 0;
    std::string got;
    for (int round = 0; round < 40; ++round) {
      const std::string key = "big" + std::to_string(round % 10);
      ASSERT_EQ(ball->Set(key, Stamped(200'000 + round, round)).error,
                Error::kOk);
      for (int k = 0; k < 10; ++k) {
        const std::string other = "big" + std::to_string(k);
        if (!ball->Get(other, &got).found) {
          ++misses;
          continue;
        }
        ++hits;
        const std::optional<uint64_t> stamp = StampOf(got);
        ASSERT_TRUE(stamp.has_value()) << other << " came back mixed";
        EXPECT_EQ(*stamp % 10, static_cast<uint64_t>(k)) << other;
        EXPECT_EQ(got.size(), 200'000 + *stamp) << other;
      }
    }
    // 2 MB of values in a 4 MiB budget: some stay, some go.
    EXPECT_GT(hits, 0);
    EXPECT_GT(misses, 0);
  }
}

// Concurrent Sets of one key never mix their chunks: every Get returns one
// writer's whole value.
TEST(ChunkedValueTest, ConcurrentWritersOfOneKeyNeverMixChunks) {
  FurrBallOptions o = FourMiB();
  o.node_count = 2;  // chunks spread over two shards
  o.memory_budget_bytes = 8 * kMiB;
  std::unique_ptr<FurrBall> ball = MustOpen(o);
  ASSERT_NE(ball, nullptr);
  constexpr int kWriters = 3;
  constexpr int kWrites = 30;
  std::atomic<int> writers_done{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&, w] {
      for (int i = 0; i < kWrites; ++i) {
        const uint64_t stamp = uint64_t(w) * 1000 + i;
        EXPECT_EQ(ball->Set("contended", Stamped(150'000 + 8 * w, stamp))
                      .error,
                  Error::kOk);
      }
      writers_done.fetch_add(1);
    });
  }
  int reads = 0, found = 0;
  std::string got;
  while (writers_done.load() < kWriters || reads < 50) {
    ++reads;
    if (!ball->Get("contended", &got).found) continue;
    ++found;
    const std::optional<uint64_t> stamp = StampOf(got);
    ASSERT_TRUE(stamp.has_value()) << "a mixed value of " << got.size();
    EXPECT_EQ(got.size(), 150'000 + 8 * (*stamp / 1000));
  }
  for (std::thread& t : threads) t.join();
  ASSERT_TRUE(ball->Get("contended", &got).found);
  EXPECT_TRUE(StampOf(got).has_value());
  EXPECT_GT(found, 0);
}

// The spill tier: chunks and heads spill and reload like any key, and a
// deleted big value never comes back from disk.
TEST(ChunkedValueTest, SpilledChunksReloadAndDeletedValuesStayDeleted) {
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / "chunked_spill";
  std::filesystem::remove_all(dir);
  FurrBallOptions o = FourMiB();
  o.spill_dir = dir.string();
  std::unique_ptr<FurrBall> ball = MustOpen(o);
  ASSERT_NE(ball, nullptr);
  const std::string kept = Stamped(400'000, 1), gone = Stamped(400'000, 2);
  ASSERT_EQ(ball->Set("kept", kept).error, Error::kOk);
  ASSERT_EQ(ball->Set("gone", gone).error, Error::kOk);
  ASSERT_TRUE(ball->Delete("gone").deleted);
  // Push both out of memory with 6 MB of small values.
  for (int i = 0; i < 6000; ++i) {
    ASSERT_EQ(ball->Set("filler" + std::to_string(i), Stamped(1000, i)).error,
              Error::kOk);
  }
  uint64_t spilled = 0;
  for (const NodeStatsSnapshot& s : ball->Stats()) {
    spilled += s.spill_keys_written;
  }
  EXPECT_GT(spilled, 0u);
  std::string got;
  const GetResult r = ball->Get("kept", &got);
  ASSERT_TRUE(r.found) << "the spill tier keeps what memory drops";
  EXPECT_TRUE(got == kept);
  EXPECT_FALSE(ball->Get("gone", &got).found);
}

}  // namespace
}  // namespace furrball_internal
}  // namespace furrballs
