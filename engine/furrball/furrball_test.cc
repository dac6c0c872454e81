// Unit tests of the FurrBall API: results, limits, every error path, TTL and
// versions with an injected clock, routing, SubmitToNode and statistics.
#include "engine/furrball/furrball.h"
#include "engine/common/proc_status_testing.h"

#include <atomic>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <absl/strings/str_cat.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>


#include "engine/furrball/clock.h"
#include "engine/furrball/furrball_testing.h"
#include "engine/furrball/key_meta.h"
#include "engine/furrball/node_thread_testing.h"
#include "engine/furrball/sync.h"
#include "engine/numatic/error_status.h"
#include "engine/numatic/numatic.h"

namespace furrballs {
namespace {

FurrBallOptions SmallOptions(int nodes = 2) {
  FurrBallOptions o;
  o.memory_budget_bytes = size_t{8} << 20;
  o.page_size_bytes = size_t{64} << 10;
  o.max_value_bytes = size_t{32} << 10;
  o.node_count = nodes;
  o.simulate_topology = true;
  return o;
}

std::unique_ptr<FurrBall> MustOpen(const FurrBallOptions& o) {
  absl::StatusOr<std::unique_ptr<FurrBall>> ball = FurrBall::Open(o);
  EXPECT_TRUE(ball.ok()) << ball.status();
  return ball.ok() ? std::move(*ball) : nullptr;
}

NodeStatsSnapshot Sum(const std::vector<NodeStatsSnapshot>& nodes) {
  NodeStatsSnapshot t;
  for (const NodeStatsSnapshot& s : nodes) {
    t.hits_local += s.hits_local;
    t.hits_remote += s.hits_remote;
    t.misses += s.misses;
    t.sets += s.sets;
    t.in_place_sets += s.in_place_sets;
    t.deletes += s.deletes;
    t.touches += s.touches;
    t.live_keys += s.live_keys;
    t.live_bytes += s.live_bytes;
    t.ttl_expirations += s.ttl_expirations;
    t.memory_limit_bytes += s.memory_limit_bytes;
    t.evictions_capacity += s.evictions_capacity;
    t.evictions_keys += s.evictions_keys;
  }
  return t;
}

// ---- Options --------------------------------------------------------------

TEST(OptionsTest, DefaultsAreValid) {
  EXPECT_TRUE(ValidateOptions(FurrBallOptions{}).ok());
}

TEST(OptionsTest, EveryBadFieldIsNamed) {
  struct Case {
    const char* field;
    void (*mutate)(FurrBallOptions&);
  };
  const Case cases[] = {
      {"page_size_bytes", [](FurrBallOptions& o) { o.page_size_bytes = 3 << 20; }},
      {"page_size_bytes", [](FurrBallOptions& o) { o.page_size_bytes = 4096; }},
      // Larger than an entry header describes (entry.h): 32 MiB at most.
      {"page_size_bytes",
       [](FurrBallOptions& o) { o.page_size_bytes = size_t{64} << 20; }},
      {"max_value_bytes",
       [](FurrBallOptions& o) { o.max_value_bytes = size_t{2} << 30; }},
      {"max_key_bytes", [](FurrBallOptions& o) { o.max_key_bytes = 0; }},
      // The header's key-size field has 14 bits (entry.h).
      {"max_key_bytes", [](FurrBallOptions& o) { o.max_key_bytes = 16384; }},
      {"node_count", [](FurrBallOptions& o) { o.node_count = -1; }},
      {"simulate_topology", [](FurrBallOptions& o) { o.simulate_topology = true; }},
      {"memory_budget_bytes", [](FurrBallOptions& o) { o.memory_budget_bytes = 0; }},
      {"maintenance_interval",
       [](FurrBallOptions& o) { o.maintenance_interval = std::chrono::milliseconds(0); }},
      {"job_queue_capacity", [](FurrBallOptions& o) { o.job_queue_capacity = 0; }},
      {"simulated_node_ids",
       [](FurrBallOptions& o) { o.simulated_node_ids = {1}; }},
  };
  for (const Case& c : cases) {
    FurrBallOptions o;
    c.mutate(o);
    const absl::Status s = ValidateOptions(o);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.field;
    EXPECT_NE(s.message().find(c.field), std::string::npos)
        << c.field << ": " << s.message();
    EXPECT_FALSE(FurrBall::Open(o).ok()) << c.field;
  }
}

TEST(OptionsTest, TooFewPagesPerNodeIsRejectedWithAReason) {
  FurrBallOptions o = SmallOptions(4);
  o.memory_budget_bytes = size_t{4} * 3 * (64 << 10);  // 3 pages per node
  absl::StatusOr<std::unique_ptr<FurrBall>> ball = FurrBall::Open(o);
  ASSERT_FALSE(ball.ok());
  EXPECT_EQ(ErrorOf(ball.status()), Error::kInvalidArgument);
  EXPECT_NE(ball.status().message().find("4 pages"), std::string::npos)
      << ball.status();
}

TEST(OptionsTest, MoreNodesThanTheMachineHasNeedsSimulation) {
  FurrBallOptions o = SmallOptions(64);
  o.simulate_topology = false;
  absl::StatusOr<std::unique_ptr<FurrBall>> ball = FurrBall::Open(o);
  ASSERT_FALSE(ball.ok());
  EXPECT_EQ(ErrorOf(ball.status()), Error::kInvalidTopology) << ball.status();
}

// §3.4: if one node cannot be built, Open fails, names the node, and frees
// what the other nodes (built in parallel on their workers) allocated.
// Measured as what Numatic has mapped: pages are mapped at Open but enter
// the RSS only when written (numatic.h).
TEST(OptionsTest, StartUpIsAllOrNothing) {
  FurrBallOptions o = SmallOptions(4);
  o.memory_budget_bytes = size_t{256} << 20;  // 64 MiB mapped per node
  const uint64_t mapped_before = Numatic::ProcessMappedBytes();
  SetNodeInitFailureForTesting(2);
  absl::StatusOr<std::unique_ptr<FurrBall>> ball = FurrBall::Open(o);
  SetNodeInitFailureForTesting(-1);
  ASSERT_FALSE(ball.ok());
  EXPECT_EQ(ErrorOf(ball.status()), Error::kAllocationFailed);
  EXPECT_NE(ball.status().message().find("node 2"), std::string::npos)
      << ball.status();
  // Three nodes had mapped 64 MiB each; all of it is gone.
  EXPECT_EQ(Numatic::ProcessMappedBytes(), mapped_before);
  ball = FurrBall::Open(o);
  ASSERT_TRUE(ball.ok()) << ball.status();
  EXPECT_GT(Numatic::ProcessMappedBytes(), mapped_before + (size_t{200} << 20))
      << "a successful Open does map the pages";
}

// Issue 13 goal 2: memory is touched when used, so an idle cache is small
// whatever its budget, and writing data makes the RSS grow.
TEST(OptionsTest, IdleCacheIsSmallAndRssFollowsData) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "RSS is meaningless with sanitizer shadow memory";
#endif
  FurrBallOptions o = SmallOptions(2);
  o.memory_budget_bytes = size_t{256} << 20;
  const size_t rss_before = ProcStatusBytes("VmRSS");
  std::unique_ptr<FurrBall> ball = MustOpen(o);
  const size_t idle = ProcStatusBytes("VmRSS") - rss_before;
  EXPECT_LT(idle, size_t{16} << 20) << "idle RSS of a 256 MiB cache";
  const std::string value(1000, 'v');
  for (int i = 0; i < 64 * 1024; ++i) {
    ASSERT_EQ(ball->Set(absl::StrCat("key", i), value).error, Error::kOk);
  }
  EXPECT_GT(ProcStatusBytes("VmRSS"), rss_before + idle + (size_t{60} << 20))
      << "64 MiB of values written";
}

// ---- Basic operations -------------------------------------------------------

TEST(FurrBallTest, SetGetDeleteRoundTrip) {
  std::unique_ptr<FurrBall> ball = MustOpen(SmallOptions());
  std::string v;
  GetResult g = ball->Get("k", &v);
  EXPECT_EQ(g.error, Error::kOk) << "a miss is not an error";
  EXPECT_FALSE(g.found);

  SetResult s1 = ball->Set("k", "hello");
  ASSERT_EQ(s1.error, Error::kOk);
  g = ball->Get("k", &v);
  ASSERT_TRUE(g.found);
  EXPECT_EQ(v, "hello");
  EXPECT_EQ(g.version, s1.version);
  EXPECT_EQ(g.ttl_remaining_ms, 0u);

  // Larger value: out of place; smaller: in place. Each write bumps the
  // version.
  SetResult s2 = ball->Set("k", std::string(1000, 'x'));
  ASSERT_EQ(s2.error, Error::kOk);
  EXPECT_GT(s2.version, s1.version);
  SetResult s3 = ball->Set("k", "tiny");
  ASSERT_EQ(s3.error, Error::kOk);
  EXPECT_GT(s3.version, s2.version);
  g = ball->Get("k", &v);
  EXPECT_EQ(v, "tiny");
  EXPECT_EQ(g.version, s3.version);

  DeleteResult d = ball->Delete("k");
  EXPECT_EQ(d.error, Error::kOk);
  EXPECT_TRUE(d.deleted);
  EXPECT_FALSE(ball->Get("k", &v).found);
  EXPECT_FALSE(ball->Delete("k").deleted);
}

// PrefetchGet is a hint: every step, on keys present and absent, leaves
// every Get's answer as it was.
TEST(FurrBallTest, PrefetchGetChangesNoAnswer) {
  std::unique_ptr<FurrBall> ball = MustOpen(SmallOptions());
  for (int i = 0; i < 50; ++i) {
    ASSERT_EQ(ball->Set("k" + std::to_string(i), "v" + std::to_string(i)).error,
              Error::kOk);
  }
  for (int step = 0; step < FurrBall::kPrefetchSteps; ++step) {
    for (int i = 0; i < 100; ++i) {
      ball->PrefetchGet(ball->Hash("k" + std::to_string(i)), step);
    }
  }
  std::string v;
  for (int i = 0; i < 100; ++i) {
    const GetResult g = ball->Get("k" + std::to_string(i), &v);
    ASSERT_EQ(g.error, Error::kOk);
    ASSERT_EQ(g.found, i < 50) << i;
    if (g.found) EXPECT_EQ(v, "v" + std::to_string(i));
  }
}

TEST(FurrBallTest, ValuesAreArbitraryBytesIncludingEmptyAndNul) {
  std::unique_ptr<FurrBall> ball = MustOpen(SmallOptions());
  const std::string binary("\0\x01\xff\0abc\0", 8);
  ASSERT_EQ(ball->Set("bin", binary).error, Error::kOk);
  ASSERT_EQ(ball->Set("empty", "").error, Error::kOk);
  std::string v = "junk";
  ASSERT_TRUE(ball->Get("bin", &v).found);
  EXPECT_EQ(v, binary);
  ASSERT_TRUE(ball->Get("empty", &v).found);
  EXPECT_EQ(v, "");
}

TEST(FurrBallTest, DefaultLimitsAcceptTheirMaximaAndRejectOneMore) {
  FurrBallOptions o;  // defaults: 250-byte keys, 1 MiB values, 2 MiB pages
  o.memory_budget_bytes = size_t{16} << 20;
  o.node_count = 1;
  o.simulate_topology = true;
  std::unique_ptr<FurrBall> ball = MustOpen(o);
  const std::string key250(250, 'k'), key251(251, 'k');
  const std::string mib(size_t{1} << 20, 'v');
  const std::string mib1((size_t{1} << 20) + 1, 'v');

  ASSERT_EQ(ball->Set(key250, mib).error, Error::kOk);
  std::string v;
  ASSERT_TRUE(ball->Get(key250, &v).found);
  EXPECT_EQ(v, mib);

  EXPECT_EQ(ball->Set(key251, "x").error, Error::kKeyTooLarge);
  EXPECT_EQ(ball->Get(key251, &v).error, Error::kKeyTooLarge);
  EXPECT_EQ(ball->Delete(key251).error, Error::kKeyTooLarge);
  EXPECT_EQ(ball->Touch(key251, 1), Error::kKeyTooLarge);
  EXPECT_EQ(ball->Set("", "x").error, Error::kEmptyKey);
  EXPECT_EQ(ball->Get("", &v).error, Error::kEmptyKey);
  EXPECT_EQ(ball->Delete("").error, Error::kEmptyKey);
  EXPECT_EQ(ball->Touch("", 1), Error::kEmptyKey);

  // Over-size values are rejected whole, never truncated, and leave the old
  // value in place.
  EXPECT_EQ(ball->Set(key250, mib1).error, Error::kValueTooLarge);
  EXPECT_EQ(ball->Set(ball->Ref(key250), mib1).error,
            Error::kValueTooLarge);
  ASSERT_TRUE(ball->Get(key250, &v).found);
  EXPECT_EQ(v.size(), mib.size());
}

// ---- Conditional writes and versions ----------------------------------------

TEST(FurrBallTest, CompareAndSetOnVersion) {
  std::unique_ptr<FurrBall> ball = MustOpen(SmallOptions());
  WriteOptions cas;
  cas.mode = SetMode::kIfVersion;
  cas.expected_version = 12345;
  EXPECT_EQ(ball->Set("c", "x", cas).error, Error::kKeyNotFound);

  const SetResult first = ball->Set("c", "v1");
  cas.expected_version = first.version + 1;
  EXPECT_EQ(ball->Set("c", "v2", cas).error, Error::kVersionMismatch);
  cas.expected_version = first.version;
  const SetResult second = ball->Set("c", "v2", cas);
  ASSERT_EQ(second.error, Error::kOk);
  EXPECT_GT(second.version, first.version);
  // The old version no longer matches.
  EXPECT_EQ(ball->Set("c", "v3", cas).error, Error::kVersionMismatch);
  std::string v;
  ball->Get("c", &v);
  EXPECT_EQ(v, "v2");
}

TEST(FurrBallTest, SetIfAbsent) {
  std::unique_ptr<FurrBall> ball = MustOpen(SmallOptions());
  WriteOptions add;
  add.mode = SetMode::kIfAbsent;
  ASSERT_EQ(ball->Set("a", "first", add).error, Error::kOk);
  EXPECT_EQ(ball->Set("a", "second", add).error, Error::kAlreadyExists);
  std::string v;
  ball->Get("a", &v);
  EXPECT_EQ(v, "first");
  ball->Delete("a");
  EXPECT_EQ(ball->Set("a", "third", add).error, Error::kOk);
}

TEST(FurrBallTest, DeletedAndReinsertedKeyNeverReusesAVersion) {
  std::unique_ptr<FurrBall> ball = MustOpen(SmallOptions());
  std::set<uint64_t> seen;
  for (int i = 0; i < 100; ++i) {
    const SetResult s = ball->Set("aba", "v");
    ASSERT_EQ(s.error, Error::kOk);
    EXPECT_TRUE(seen.insert(s.version).second);
    ball->Delete("aba");
  }
  // A stale CAS from before the delete cannot hit the new incarnation.
  const SetResult old = ball->Set("aba", "a");
  ball->Delete("aba");
  ball->Set("aba", "b");
  WriteOptions cas;
  cas.mode = SetMode::kIfVersion;
  cas.expected_version = old.version;
  EXPECT_EQ(ball->Set("aba", "c", cas).error, Error::kVersionMismatch);
}

// Versions are per key (node_shard.h, "Versions"): writes of other keys do
// not show in a key's versions, because an overwrite takes the key's next
// version instead of a fetch_add on the node's shared counter.
TEST(FurrBallTest, AnOverwriteTakesTheKeysNextVersion) {
  std::unique_ptr<FurrBall> ball = MustOpen(SmallOptions(1));
  const SetResult a1 = ball->Set("a", "1");
  ASSERT_EQ(ball->Set("b", "1").error, Error::kOk);
  ASSERT_EQ(ball->Set("c", "1").error, Error::kOk);
  const SetResult a2 = ball->Set("a", "2");
  ASSERT_EQ(a2.error, Error::kOk);
  EXPECT_EQ(a2.version, a1.version + 1);
}

// A hot key's versions run past the node's counter (it then reserves
// versions from it); deleted and written again, the key still gets a higher
// version than any it had, and so does a new key.
TEST(FurrBallTest, AHotKeysVersionsStayIncreasingAcrossADelete) {
  std::unique_ptr<FurrBall> ball = MustOpen(SmallOptions(1));
  uint64_t last = 0;
  for (int i = 0; i < 100; ++i) {
    const SetResult s = ball->Set("hot", absl::StrCat(i));
    ASSERT_EQ(s.error, Error::kOk);
    EXPECT_GT(s.version, last) << "write " << i;
    last = s.version;
  }
  ASSERT_TRUE(ball->Delete("hot").deleted);
  const SetResult again = ball->Set("hot", "x");
  EXPECT_GT(again.version, last);
  EXPECT_GT(ball->Set("new", "x").version, again.version);
}

TEST(FurrBallTest, SupersededWritesConsumeVersionsJustBefore) {
  std::unique_ptr<FurrBall> ball = MustOpen(SmallOptions(1));
  const SetResult a = ball->Set("w", "1");
  WriteOptions merged;
  merged.superseded_writes = 3;
  const SetResult b = ball->Set("w", "5", merged);
  ASSERT_EQ(b.error, Error::kOk);
  EXPECT_EQ(b.version, a.version + 4)
      << "versions a+1..a+3 belong to the three merged writes";
  const SetResult c = ball->Set("w", "6");
  EXPECT_EQ(c.version, b.version + 1);
}

// ---- TTL (injected clock, no sleeps) -------------------------------------------

TEST(FurrBallTest, TtlExpiresOnTheInjectedClock) {
  ManualClock clock;
  FurrBallOptions o = SmallOptions();
  o.clock = &clock;
  std::unique_ptr<FurrBall> ball = MustOpen(o);
  WriteOptions ttl;
  ttl.ttl_ms = 1000;
  ASSERT_EQ(ball->Set("t", "v", ttl).error, Error::kOk);
  std::string v;
  GetResult g = ball->Get("t", &v);
  ASSERT_TRUE(g.found);
  EXPECT_EQ(g.ttl_remaining_ms, 1000u);
  clock.AdvanceMs(400);
  EXPECT_EQ(ball->Get("t", &v).ttl_remaining_ms, 600u);

  // Touch resets the deadline from now.
  EXPECT_EQ(ball->Touch("t", 1000), Error::kOk);
  clock.AdvanceMs(999);
  g = ball->Get("t", &v);
  ASSERT_TRUE(g.found);
  EXPECT_EQ(g.ttl_remaining_ms, 1u);
  clock.AdvanceMs(1);
  EXPECT_FALSE(ball->Get("t", &v).found) << "expired at the deadline";

  // An expired key is absent for every operation.
  EXPECT_EQ(ball->Touch("t", 1000), Error::kKeyNotFound);
  WriteOptions cas;
  cas.mode = SetMode::kIfVersion;
  cas.expected_version = g.version;
  EXPECT_EQ(ball->Set("t", "x", cas).error, Error::kKeyNotFound);
  EXPECT_FALSE(ball->Delete("t").deleted);
  ASSERT_EQ(ball->Set("t", "again", ttl).error, Error::kOk);
  WriteOptions add;
  add.mode = SetMode::kIfAbsent;
  clock.AdvanceMs(1000);
  EXPECT_EQ(ball->Set("t", "fresh", add).error, Error::kOk)
      << "if-absent treats an expired key as absent";
  ASSERT_TRUE(ball->Get("t", &v).found);
  EXPECT_EQ(v, "fresh");
}

// An expired key is counted once as an expiration and leaves live_keys and
// live_bytes, whichever operation meets it first: a Get, a Delete (which
// deletes nothing), or a Set that replaces it (in place or not). It used to
// stay live and uncounted until the worker's walk reached its page, which
// skips the open page where these keys are.
TEST(FurrBallTest, ExpiredKeysAreCountedOnceAndLeaveTheLiveCounts) {
  ManualClock clock;
  FurrBallOptions o = SmallOptions(1);
  o.clock = &clock;
  std::unique_ptr<FurrBall> ball = MustOpen(o);
  WriteOptions ttl;
  ttl.ttl_ms = 150;
  ASSERT_EQ(ball->Set("keep", "forever").error, Error::kOk);
  for (const char* k : {"e1", "e2", "e3", "deleted", "in-place", "moved"}) {
    ASSERT_EQ(ball->Set(k, "abc", ttl).error, Error::kOk);
  }
  NodeStatsSnapshot s = Sum(ball->Stats());
  ASSERT_EQ(s.live_keys, 7u);
  clock.AdvanceMs(450);

  std::string v;
  for (const char* k : {"e1", "e2", "e3"}) EXPECT_FALSE(ball->Get(k, &v).found);
  for (const char* k : {"e1", "e2", "e3"}) EXPECT_FALSE(ball->Get(k, &v).found);
  s = Sum(ball->Stats());
  EXPECT_EQ(s.misses, 6u);
  EXPECT_EQ(s.ttl_expirations, 3u) << "each expired key counted once";
  EXPECT_EQ(s.live_keys, 4u);
  // Live bytes are payloads: the key with the value (until 2026-11-25 also
  // the key's 2-byte size, now in the entry header).
  EXPECT_EQ(s.live_bytes, (4 + 7u) + (7 + 3u) + (8 + 3u) + (5 + 3u));

  EXPECT_FALSE(ball->Delete("deleted").deleted);
  s = Sum(ball->Stats());
  EXPECT_EQ(s.deletes, 0u) << "deleting an expired key deletes nothing";
  EXPECT_EQ(s.ttl_expirations, 4u);
  EXPECT_EQ(s.live_keys, 3u);

  ASSERT_EQ(ball->Set("in-place", "xyz").error, Error::kOk);
  ASSERT_EQ(ball->Set("moved", std::string(500, 'm')).error, Error::kOk);
  s = Sum(ball->Stats());
  EXPECT_EQ(s.ttl_expirations, 6u);
  EXPECT_EQ(s.live_keys, 3u) << "two expired keys left, two fresh came in";
  EXPECT_EQ(s.live_bytes, (4 + 7u) + (8 + 3u) + (5 + 500u));
  EXPECT_EQ(s.sets, 9u);
}

TEST(FurrBallTest, HugeTtlSaturatesInsteadOfWrapping) {
  ManualClock clock(1000);
  FurrBallOptions o = SmallOptions();
  o.clock = &clock;
  std::unique_ptr<FurrBall> ball = MustOpen(o);
  WriteOptions w;
  w.ttl_ms = UINT64_MAX;
  ASSERT_EQ(ball->Set("forever", "v", w).error, Error::kOk);
  std::string v;
  const GetResult g = ball->Get("forever", &v);
  ASSERT_TRUE(g.found);
  // The largest deadline KeyMeta holds (34 years of a boot-based clock).
  EXPECT_EQ(g.ttl_remaining_ms, kMaxExpiryMs - 1000);
  // Touch saturates the same way, and the key lives on far into the future.
  ASSERT_EQ(ball->Touch("forever", UINT64_MAX - 7), Error::kOk);
  clock.AdvanceMs(kMaxExpiryMs / 4);
  EXPECT_TRUE(ball->Get("forever", &v).found);
}

TEST(FurrBallTest, AClockPastTheDeadlineRangeIsRefused) {
  // KeyMeta keeps 40 bits of deadline; a clock that already reads more than
  // half of that would leave TTLs no room, so Open says so instead.
  ManualClock clock(kMaxExpiryMs / 2 + 1);
  FurrBallOptions o = SmallOptions();
  o.clock = &clock;
  const absl::StatusOr<std::unique_ptr<FurrBall>> ball = FurrBall::Open(o);
  ASSERT_FALSE(ball.ok());
  EXPECT_EQ(ball.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(ball.status().message()),
              ::testing::HasSubstr("the clock reads"));
}

TEST(FurrBallTest, TouchWithZeroRemovesTheDeadline) {
  ManualClock clock;
  FurrBallOptions o = SmallOptions();
  o.clock = &clock;
  std::unique_ptr<FurrBall> ball = MustOpen(o);
  WriteOptions ttl;
  ttl.ttl_ms = 10;
  ball->Set("p", "v", ttl);
  EXPECT_EQ(ball->Touch("p", 0), Error::kOk);
  clock.AdvanceMs(1'000'000);
  std::string v;
  GetResult g = ball->Get("p", &v);
  ASSERT_TRUE(g.found);
  EXPECT_EQ(g.ttl_remaining_ms, 0u);
}

TEST(FurrBallTest, TouchOfAMissingKeyIsNotFound) {
  std::unique_ptr<FurrBall> ball = MustOpen(SmallOptions());
  EXPECT_EQ(ball->Touch("nobody", 100), Error::kKeyNotFound);
}

// ---- Memory limits --------------------------------------------------------------

TEST(FurrBallTest, FullCacheWithEvictionDisabledFailsWithNoMemory) {
  FurrBallOptions o = SmallOptions(1);
  o.memory_budget_bytes = size_t{8} * (64 << 10);  // 8 pages of 64 KiB
  o.eviction_enabled = false;
  std::unique_ptr<FurrBall> ball = MustOpen(o);
  const std::string value(4000, 'v');
  int stored = 0;
  Error last = Error::kOk;
  for (int i = 0; i < 1000; ++i) {
    last = ball->Set("key" + std::to_string(i), value).error;
    if (last != Error::kOk) break;
    ++stored;
  }
  EXPECT_EQ(last, Error::kNoMemory);
  // Everything acknowledged is still there: nothing was evicted.
  std::string v;
  for (int i = 0; i < stored; ++i) {
    ASSERT_TRUE(ball->Get("key" + std::to_string(i), &v).found) << i;
  }
  // Most of the value pages were filled before the first refusal.
  EXPECT_GT(uint64_t{4000} * stored, ball->memory_plan().value_bytes() / 2);
  EXPECT_EQ(Sum(ball->Stats()).evictions_capacity, 0u);
  // Deleting makes room again (drain compacts the dead bytes).
  for (int i = 0; i < stored; i += 2) ball->Delete("key" + std::to_string(i));
  EXPECT_EQ(ball->Set("after-delete", value).error, Error::kOk);
}

TEST(FurrBallTest, FullKeyTableWithEvictionDisabledFailsWithNoMemory) {
  FurrBallOptions o = SmallOptions(1);
  o.max_keys_per_node = 100;
  o.eviction_enabled = false;
  std::unique_ptr<FurrBall> ball = MustOpen(o);
  for (int i = 0; i < 100; ++i) {
    ASSERT_EQ(ball->Set("k" + std::to_string(i), "v").error, Error::kOk) << i;
  }
  EXPECT_EQ(ball->Set("one-more", "v").error, Error::kNoMemory);
  EXPECT_EQ(ball->Set("k7", "overwrite is fine").error, Error::kOk);
  ball->Delete("k0");
  EXPECT_EQ(ball->Set("one-more", "v").error, Error::kOk);
}

TEST(FurrBallTest, FullKeyTableWithEvictionEvictsByArc) {
  FurrBallOptions o = SmallOptions(1);
  o.max_keys_per_node = 100;
  std::unique_ptr<FurrBall> ball = MustOpen(o);
  for (int i = 0; i < 300; ++i) {
    ASSERT_EQ(ball->Set("k" + std::to_string(i), "v").error, Error::kOk);
  }
  const NodeStatsSnapshot s = Sum(ball->Stats());
  EXPECT_LE(s.live_keys, 100u);
  EXPECT_GE(s.evictions_keys, 200u);
}

// ---- SubmitToNode ----------------------------------------------------------------

TEST(FurrBallTest, SubmitToNodeRunsOnThatNodeAndReportsAFullQueue) {
  FurrBallOptions o = SmallOptions(2);
  o.job_queue_capacity = 8;
  std::unique_ptr<FurrBall> ball = MustOpen(o);
  EXPECT_EQ(ball->SubmitToNode(7, [](void*) {}, nullptr), Error::kNoSuchNode);

  struct Gate {
    furrball_internal::Notification entered, release;
  } gate;
  ASSERT_EQ(ball->SubmitToNode(
                1,
                [](void* p) {
                  Gate* g = static_cast<Gate*>(p);
                  g->entered.Notify();
                  g->release.WaitForNotification();
                },
                &gate),
            Error::kOk);
  gate.entered.WaitForNotification();
  std::atomic<int> ran{0};
  auto job = [](void* p) { static_cast<std::atomic<int>*>(p)->fetch_add(1); };
  for (int i = 0; i < 8; ++i) {
    ASSERT_EQ(ball->SubmitToNode(1, job, &ran), Error::kOk);
  }
  EXPECT_EQ(ball->SubmitToNode(1, job, &ran), Error::kQueueFull);
  // Node 0's queue is independent.
  EXPECT_EQ(ball->SubmitToNode(0, job, &ran), Error::kOk);
  gate.release.Notify();
  ball->Close();
  EXPECT_EQ(ran.load(), 9) << "jobs queued before Close all ran";
  EXPECT_EQ(ball->SubmitToNode(0, job, &ran), Error::kShuttingDown);
  // Still usable after Close until destroyed.
  EXPECT_EQ(ball->Set("after-close", "v").error, Error::kOk);
}

// ---- Routing ------------------------------------------------------------------------

// Issue 13 goal 5: two keys forced onto one hash (KeyRef lets a test pick
// the hash). The key is stored with its value, so a Get of the other key is
// a miss, never the stored key's value, whatever path found the entry.
TEST(FurrBallTest, AHashCollisionIsAMissNeverAnotherKeysValue) {
  for (RoutingPolicy routing :
       {RoutingPolicy::kHash, RoutingPolicy::kRoundRobin}) {
    FurrBallOptions o = SmallOptions(2);
    o.routing = routing;
    std::unique_ptr<FurrBall> ball = MustOpen(o);
    const HashPair h = ball->Hash("alice");
    const KeyRef alice{h, "alice"};
    const KeyRef mallory{h, "mallory"};
    ASSERT_EQ(ball->Set(alice, "alice's secret").error, Error::kOk);
    std::string v = "untouched";
    const GetResult miss = ball->Get(mallory, &v);
    EXPECT_FALSE(miss.found);
    EXPECT_NE(v, "alice's secret");
    EXPECT_FALSE(ball->GetFromMemory(mallory, &v).found);
    ASSERT_TRUE(ball->Get(alice, &v).found);
    EXPECT_EQ(v, "alice's secret");
    EXPECT_EQ(Sum(ball->Stats()).misses, 2u);

    // Conditions are about the key: alice's entry is not mallory's.
    WriteOptions if_version;
    if_version.mode = SetMode::kIfVersion;
    if_version.expected_version = ball->Get(alice, &v).version;
    EXPECT_EQ(ball->Set(mallory, "x", if_version).error, Error::kKeyNotFound);
    WriteOptions if_absent;
    if_absent.mode = SetMode::kIfAbsent;
    EXPECT_EQ(ball->Set(alice, "again", if_absent).error,
              Error::kAlreadyExists);
    // Identity is the hash: mallory's write replaces alice's entry, and
    // then alice misses rather than reading mallory's value.
    ASSERT_EQ(ball->Set(mallory, "mallory's", if_absent).error, Error::kOk);
    EXPECT_FALSE(ball->Get(alice, &v).found);
    ASSERT_TRUE(ball->Get(mallory, &v).found);
    EXPECT_EQ(v, "mallory's");
  }
}

TEST(FurrBallTest, HashRoutingOwnerIsAFunctionOfTheHash) {
  std::unique_ptr<FurrBall> ball = MustOpen(SmallOptions(4));
  std::vector<int> per_node(4);
  for (int i = 0; i < 4000; ++i) {
    const std::string key = "key" + std::to_string(i);
    const HashPair h = ball->Hash(key);
    const int owner = ball->OwnerOf(h);
    ASSERT_GE(owner, 0);
    ASSERT_LT(owner, 4);
    EXPECT_EQ(owner, ball->OwnerOf(h));
    ++per_node[owner];
    ASSERT_EQ(ball->Set(KeyRef{h, key}, "v").error, Error::kOk);
  }
  const std::vector<NodeStatsSnapshot> stats = ball->Stats();
  for (int n = 0; n < 4; ++n) {
    EXPECT_GT(per_node[n], 800) << "hash spreads keys evenly";
    EXPECT_EQ(stats[n].sets, static_cast<uint64_t>(per_node[n]))
        << "each key's write went to its owner";
  }
}

TEST(FurrBallTest, RoundRobinSpreadsNewKeysAndFindsThemAgain) {
  FurrBallOptions o = SmallOptions(4);
  o.routing = RoutingPolicy::kRoundRobin;
  std::unique_ptr<FurrBall> ball = MustOpen(o);
  EXPECT_EQ(ball->OwnerOf(ball->Hash("x")), -1);
  for (int i = 0; i < 400; ++i) {
    ASSERT_EQ(ball->Set("k" + std::to_string(i), "v" + std::to_string(i)).error,
              Error::kOk);
  }
  for (const NodeStatsSnapshot& s : ball->Stats()) EXPECT_EQ(s.live_keys, 100u);
  // Overwrites update the key where it is rather than creating a copy.
  for (int i = 0; i < 400; ++i) {
    ASSERT_EQ(ball->Set("k" + std::to_string(i), "w" + std::to_string(i)).error,
              Error::kOk);
  }
  uint64_t live = 0;
  for (const NodeStatsSnapshot& s : ball->Stats()) live += s.live_keys;
  EXPECT_EQ(live, 400u);
  std::string v;
  for (int i = 0; i < 400; ++i) {
    ASSERT_TRUE(ball->Get("k" + std::to_string(i), &v).found);
    EXPECT_EQ(v, "w" + std::to_string(i));
  }
  EXPECT_TRUE(ball->Delete("k5").deleted);
  EXPECT_FALSE(ball->Get("k5", &v).found);
  EXPECT_EQ(ball->Touch("k6", 5), Error::kOk);
  // A search that finds nothing on any of the 4 shards is one miss.
  EXPECT_EQ(Sum(ball->Stats()).misses, 1u);
  EXPECT_EQ(Sum(ball->Stats()).hits_local + Sum(ball->Stats()).hits_remote,
            400u);
}

TEST(FurrBallTest, ThreadLocalRoutingPlacesKeysOnTheWritersNode) {
  FurrBallOptions o = SmallOptions(2);
  o.routing = RoutingPolicy::kThreadLocal;
  std::unique_ptr<FurrBall> ball = MustOpen(o);
  // A job runs on node 1's pinned worker, so its writes land on node 1.
  struct Ctx {
    FurrBall* ball;
    furrball_internal::Notification done;
  } ctx{ball.get(), {}};
  ASSERT_EQ(ball->SubmitToNode(
                1,
                [](void* p) {
                  Ctx* c = static_cast<Ctx*>(p);
                  for (int i = 0; i < 50; ++i) {
                    c->ball->Set("tl" + std::to_string(i), "v");
                  }
                  std::string v;
                  for (int i = 0; i < 50; ++i) {
                    c->ball->Get("tl" + std::to_string(i), &v);
                  }
                  c->done.Notify();
                },
                &ctx),
            Error::kOk);
  ctx.done.WaitForNotification();
  const std::vector<NodeStatsSnapshot> stats = ball->Stats();
  EXPECT_EQ(stats[0].live_keys, 0u);
  EXPECT_EQ(stats[1].live_keys, 50u);
  EXPECT_EQ(stats[1].hits_local, 50u) << "read back on the writer's node";
  // A reader on another node finds them by searching, as remote hits.
  std::string v;
  ASSERT_TRUE(ball->Get("tl3", &v).found);
}

// The node holding the one key of `ball` (by live_keys).
int NodeHolding(const FurrBall& ball) {
  const std::vector<NodeStatsSnapshot> stats = ball.Stats();
  for (const NodeStatsSnapshot& s : stats) {
    if (s.live_keys == 1) return s.node;
  }
  return -1;
}

// Issue 16: a key deleted and written again on another node (search
// routings) still gets a version above every one it had (node_shard.h,
// "Versions": they come from the key's home node's counter). Written
// before the fix, this failed: node 1 issued versions from 2^58 up, so the
// key re-created on node 0 went back to 1.
TEST(FurrBallTest, VersionsIncreaseWhenAKeyIsRecreatedOnAnotherNode) {
  for (const RoutingPolicy routing :
       {RoutingPolicy::kRoundRobin, RoutingPolicy::kThreadLocal}) {
    SCOPED_TRACE(static_cast<int>(routing));
    FurrBallOptions o = SmallOptions(2);
    o.routing = routing;
    std::unique_ptr<FurrBall> ball = MustOpen(o);
    uint64_t last = 0;
    std::set<int> nodes_seen;
    for (int round = 0; round < 6; ++round) {
      // Thread-local routing places the key on the writer's node: alternate
      // the writer. Round-robin alternates by itself (one thread's turns).
      const int writer_node = round % 2;
      SetResult first, second;
      auto write = [&] {
        first = ball->Set("k", absl::StrCat("a", round));
        second = ball->Set("k", absl::StrCat("b", round));
      };
      if (routing == RoutingPolicy::kThreadLocal) {
        ASSERT_EQ(furrball_testing::RunOnNode(*ball, writer_node, write),
                  Error::kOk);
      } else {
        write();
      }
      ASSERT_EQ(first.error, Error::kOk);
      ASSERT_EQ(second.error, Error::kOk);
      nodes_seen.insert(NodeHolding(*ball));
      EXPECT_GT(first.version, last) << "round " << round;
      EXPECT_GT(second.version, first.version) << "round " << round;
      last = second.version;
      ASSERT_TRUE(ball->Delete("k").deleted);
    }
    EXPECT_EQ(nodes_seen, (std::set<int>{0, 1}))
        << "the key lived on both nodes";
  }
}

TEST(FurrBallTest, APinnedThreadIsItsNodesThread) {
  FurrBallOptions o = SmallOptions(2);
  o.routing = RoutingPolicy::kThreadLocal;
  std::unique_ptr<FurrBall> ball = MustOpen(o);
  // A thread of the caller's, pinned to node 1, places and reads as node 1.
  std::thread t([&ball] {
    ASSERT_TRUE(ball->PinCurrentThreadToNode(1).ok());
    for (int i = 0; i < 20; ++i) ball->Set("p" + std::to_string(i), "v");
    std::string v;
    for (int i = 0; i < 20; ++i) ball->Get("p" + std::to_string(i), &v);
  });
  t.join();
  const std::vector<NodeStatsSnapshot> stats = ball->Stats();
  EXPECT_EQ(stats[0].live_keys, 0u);
  EXPECT_EQ(stats[1].live_keys, 20u);
  EXPECT_EQ(stats[1].hits_local, 20u);
  EXPECT_EQ(stats[1].hits_remote, 0u);
  // A node the cache does not serve is refused with its reason.
  std::thread bad([&ball] {
    const absl::Status s = ball->PinCurrentThreadToNode(7);
    EXPECT_FALSE(s.ok());
    EXPECT_EQ(ErrorOf(s), Error::kNoSuchNode) << s;
  });
  bad.join();
}

// ---- Statistics ---------------------------------------------------------------------

TEST(FurrBallTest, StatsCountEveryOperation) {
  std::unique_ptr<FurrBall> ball = MustOpen(SmallOptions(1));
  std::string v;
  ball->Set("a", "12345");
  ball->Set("b", "123");
  ball->Set("a", "abc");  // in place
  ball->Get("a", &v);
  ball->Get("zzz", &v);
  ball->Touch("b", 100);
  ball->Delete("b");
  const std::vector<NodeStatsSnapshot> stats = ball->Stats();
  ASSERT_EQ(stats.size(), 1u);
  const NodeStatsSnapshot& s = stats[0];
  EXPECT_EQ(s.sets, 3u);
  EXPECT_EQ(s.in_place_sets, 1u);
  EXPECT_EQ(s.hits_local + s.hits_remote, 1u);
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.touches, 1u);
  EXPECT_EQ(s.deletes, 1u);
  EXPECT_EQ(s.live_keys, 1u);
  EXPECT_EQ(s.live_bytes, 1 + 3u) << "a's key and value";
  EXPECT_EQ(s.memory_limit_bytes, ball->memory_plan().value_bytes());
  EXPECT_EQ(s.pages_hot + s.pages_cold + s.pages_empty + s.pages_freeze +
                s.pages_staging,
            ball->memory_plan().page_count);
  EXPECT_EQ(s.pages_staging, 1u);
  EXPECT_GT(s.dead_bytes, 0u) << "b's entry and a's first entry are dead";
  EXPECT_GT(s.padding_bytes, 0u);
  EXPECT_GT(ball->MetadataBytes(), 0u);
}

}  // namespace
}  // namespace furrballs

namespace furrballs {
namespace {

// Entries just over half a page fill each page with one entry and leave the
// rest too small for another: writers must still evict and go on (a 64 MiB
// server with 2 MiB pages and 1 MiB values used to spin in the reclaimer).
TEST(FurrBallTest, ValuesOverHalfAPageKeepBeingStored) {
  FurrBallOptions o = SmallOptions(/*nodes=*/1);
  std::unique_ptr<FurrBall> ball = MustOpen(o);
  ASSERT_NE(ball, nullptr);
  const std::string value(o.max_value_bytes, 'v');
  for (int i = 0; i < 400; ++i) {
    ASSERT_EQ(ball->Set("big" + std::to_string(i), value).error, Error::kOk)
        << "Set " << i;
  }
  std::string v;
  EXPECT_TRUE(ball->Get("big399", &v).found);
}

}  // namespace
}  // namespace furrballs
