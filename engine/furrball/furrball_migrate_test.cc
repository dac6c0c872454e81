// Keys follow their readers (FurrBallOptions::migrate_to_readers,
// key_mover.h) on 2 simulated nodes: a key read from the other node moves
// there with its value, version and deadline; keys read from both sides do
// not ping-pong; chunked values stay; the option's guards; no memory per key;
// LocateEntryForTesting names the moved entry (what the QEMU guest test asks
// the kernel about).
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/furrball/clock.h"
#include "engine/furrball/entry.h"
#include "engine/furrball/furrball.h"
#include "engine/furrball/furrball_testing.h"
#include "engine/furrball/migrate_policy.h"
#include "engine/furrball/node_thread_testing.h"
#include "engine/numatic/error_status.h"

namespace furrballs {
namespace {

using furrball_internal::PayloadKey;
using furrball_internal::ReadEntryHeader;
using furrball_internal::SimpleMigratePolicy;

FurrBallOptions MigrateOptions(RoutingPolicy routing) {
  FurrBallOptions o;
  o.memory_budget_bytes = size_t{8} << 20;
  o.page_size_bytes = size_t{64} << 10;
  o.node_count = 2;
  o.simulate_topology = true;
  o.routing = routing;
  o.migrate_to_readers = true;
  return o;
}

std::unique_ptr<FurrBall> MustOpen(const FurrBallOptions& o) {
  absl::StatusOr<std::unique_ptr<FurrBall>> ball = FurrBall::Open(o);
  EXPECT_TRUE(ball.ok()) << ball.status();
  return ball.ok() ? std::move(*ball) : nullptr;
}

// Runs fn as a thread of node `node` and waits for it.
void RunOnNode(FurrBall& ball, int node, const std::function<void()>& fn) {
  ASSERT_EQ(furrball_testing::RunOnNode(ball, node, fn), Error::kOk);
}

// Reads `key` n times on node `node`; all must hit `want`.
void ReadOn(FurrBall& ball, int node, const std::string& key, int n,
            const std::string& want) {
  RunOnNode(ball, node, [&] {
    std::string v;
    for (int i = 0; i < n; ++i) {
      ASSERT_TRUE(ball.Get(key, &v).found) << key << " read " << i;
      ASSERT_EQ(v, want);
    }
  });
}

// One counter summed over the nodes.
uint64_t Total(const std::vector<NodeStatsSnapshot>& s,
               uint64_t NodeStatsSnapshot::*counter) {
  uint64_t n = 0;
  for (const NodeStatsSnapshot& x : s) n += x.*counter;
  return n;
}

uint64_t Migrations(const std::vector<NodeStatsSnapshot>& s) {
  return Total(s, &NodeStatsSnapshot::migrations_in);
}

class MigrateTest : public ::testing::TestWithParam<RoutingPolicy> {};

INSTANTIATE_TEST_SUITE_P(SearchRoutings, MigrateTest,
                         ::testing::Values(RoutingPolicy::kThreadLocal,
                                           RoutingPolicy::kRoundRobin));

TEST_P(MigrateTest, AKeyReadFromTheOtherNodeMovesThereWithItsValueVersionAndTtl) {
  ManualClock clock(1000);
  FurrBallOptions o = MigrateOptions(GetParam());
  o.clock = &clock;
  std::unique_ptr<FurrBall> ball = MustOpen(o);
  // Written from node 0; under round-robin it lands wherever the writer's
  // turn says, so find out where.
  SetResult set;
  RunOnNode(*ball, 0, [&] {
    WriteOptions w;
    w.ttl_ms = 60'000;
    set = ball->Set("k", "value-of-k", w);
  });
  ASSERT_EQ(set.error, Error::kOk);
  const int home = ball->Stats()[0].live_keys == 1 ? 0 : 1;
  const int other = 1 - home;
  clock.AdvanceMs(5'000);

  // Enough reads from the other node for the policy to decide: every
  // sampled read is remote, so kMoveRemote samples.
  const int reads =
      SimpleMigratePolicy::kSamplePeriod * (SimpleMigratePolicy::kMoveRemote + 1);
  ReadOn(*ball, other, "k", reads, "value-of-k");

  std::vector<NodeStatsSnapshot> s = ball->Stats();
  EXPECT_EQ(s[other].migrations_in, 1u);
  EXPECT_EQ(s[home].migrations_out, 1u);
  EXPECT_EQ(s[home].migrations_in + s[other].migrations_out, 0u);
  EXPECT_EQ(s[other].live_keys, 1u);
  EXPECT_EQ(s[home].live_keys, 0u) << "insert-before-erase leaves one copy";

  // The move updated the location cache's hint (the write had set it), so
  // the reads after the move found the key at once.
  EXPECT_EQ(Total(s, &NodeStatsSnapshot::location_stale), 0u)
      << "the move left the hint pointing at the node it left";

  // The same value, version and deadline, now served locally.
  const uint64_t local_before = s[other].hits_local;
  const uint64_t hints_before = Total(s, &NodeStatsSnapshot::location_hits);
  RunOnNode(*ball, other, [&] {
    std::string v;
    const GetResult r = ball->Get("k", &v);
    ASSERT_TRUE(r.found);
    EXPECT_EQ(v, "value-of-k");
    EXPECT_EQ(r.version, set.version);
    EXPECT_EQ(r.ttl_remaining_ms, 55'000u);
  });
  s = ball->Stats();
  EXPECT_EQ(s[other].hits_local, local_before + 1);
  EXPECT_EQ(Total(s, &NodeStatsSnapshot::location_hits), hints_before + 1);

  // Writes find it on its new node, and its versions keep growing (they
  // come from the key's home node's counter, whichever node holds it).
  SetResult again;
  RunOnNode(*ball, home, [&] { again = ball->Set("k", "second"); });
  ASSERT_EQ(again.error, Error::kOk);
  EXPECT_GT(again.version, set.version);
  s = ball->Stats();
  EXPECT_EQ(s[other].live_keys, 1u);
  EXPECT_EQ(s[home].live_keys, 0u);
}

// The accessor the QEMU guest test asks the kernel about (furrball_testing.h):
// it names the node that holds the key and an address whose entry is the
// key's (the entry's payload holds the key, entry.h), before and after a
// move.
TEST_P(MigrateTest, LocateEntryForTestingFollowsTheMove) {
  std::unique_ptr<FurrBall> ball = MustOpen(MigrateOptions(GetParam()));
  const HashPair h = ball->Hash("k");
  EXPECT_EQ(LocateEntryForTesting(*ball, h).node, -1);
  EXPECT_EQ(LocateEntryForTesting(*ball, h).entry, nullptr);
  RunOnNode(*ball, 0, [&] { ASSERT_EQ(ball->Set("k", "v").error, Error::kOk); });
  const int home = ball->Stats()[0].live_keys == 1 ? 0 : 1;
  const auto stored_key = [](const void* entry) {
    const uint8_t* e = static_cast<const uint8_t*>(entry);
    std::string key;
    EXPECT_TRUE(PayloadKey(e, ReadEntryHeader(e), &key));
    return key;
  };
  const EntryPlacement before = LocateEntryForTesting(*ball, h);
  EXPECT_EQ(before.node, home);
  ASSERT_NE(before.entry, nullptr);
  EXPECT_EQ(stored_key(before.entry), "k");

  const int reads =
      SimpleMigratePolicy::kSamplePeriod * (SimpleMigratePolicy::kMoveRemote + 1);
  ReadOn(*ball, 1 - home, "k", reads, "v");
  ASSERT_EQ(Migrations(ball->Stats()), 1u);
  const EntryPlacement after = LocateEntryForTesting(*ball, h);
  EXPECT_EQ(after.node, 1 - home);
  ASSERT_NE(after.entry, nullptr);
  EXPECT_NE(after.entry, before.entry);
  EXPECT_EQ(stored_key(after.entry), "k");
}

TEST_P(MigrateTest, KeysReadFromBothSidesDoNotPingPong) {
  std::unique_ptr<FurrBall> ball = MustOpen(MigrateOptions(GetParam()));
  RunOnNode(*ball, 0, [&] {
    for (int i = 0; i < 20; ++i) {
      ASSERT_EQ(ball->Set("both" + std::to_string(i), "v").error, Error::kOk);
    }
  });
  // Each node's worker reads every key once per sample period in turn, so
  // each key's sampled reads alternate between the two sides.
  for (int round = 0; round < 60; ++round) {
    for (int node : {0, 1}) {
      RunOnNode(*ball, node, [&] {
        std::string v;
        for (uint32_t r = 0; r < SimpleMigratePolicy::kSamplePeriod; ++r) {
          for (int i = 0; i < 20; ++i) {
            ASSERT_TRUE(ball->Get("both" + std::to_string(i), &v).found);
          }
        }
      });
    }
  }
  // At most the first samples' order moves a key once.
  EXPECT_LE(Migrations(ball->Stats()), 20u);
  const uint64_t settled = Migrations(ball->Stats());
  for (int round = 0; round < 60; ++round) {
    for (int node : {0, 1}) {
      RunOnNode(*ball, node, [&] {
        std::string v;
        for (uint32_t r = 0; r < SimpleMigratePolicy::kSamplePeriod; ++r) {
          for (int i = 0; i < 20; ++i) ball->Get("both" + std::to_string(i), &v);
        }
      });
    }
  }
  EXPECT_EQ(Migrations(ball->Stats()), settled) << "no ping-pong";
}

TEST_P(MigrateTest, AKeyFollowsItsReadersBackWhenTheyChange) {
  std::unique_ptr<FurrBall> ball = MustOpen(MigrateOptions(GetParam()));
  RunOnNode(*ball, 0, [&] { ASSERT_EQ(ball->Set("k", "v").error, Error::kOk); });
  const int home = ball->Stats()[0].live_keys == 1 ? 0 : 1;
  const int reads = SimpleMigratePolicy::kSamplePeriod * 32;
  ReadOn(*ball, 1 - home, "k", reads, "v");
  ReadOn(*ball, home, "k", reads, "v");
  const std::vector<NodeStatsSnapshot> s = ball->Stats();
  EXPECT_EQ(s[1 - home].migrations_in, 1u);
  EXPECT_EQ(s[home].migrations_in, 1u);
  EXPECT_EQ(s[home].live_keys, 1u);
}

TEST_P(MigrateTest, ChunkedValuesStayWhereTheyAre) {
  std::unique_ptr<FurrBall> ball = MustOpen(MigrateOptions(GetParam()));
  const std::string big(20'000, 'b');  // chunked at 64 KiB pages
  RunOnNode(*ball, 0, [&] { ASSERT_EQ(ball->Set("big", big).error, Error::kOk); });
  ReadOn(*ball, 0, "big", 300, big);
  ReadOn(*ball, 1, "big", 300, big);
  EXPECT_EQ(Migrations(ball->Stats()), 0u);
}

TEST(MigrateOptionsTest, NeedsASearchRoutingAndNoSpillTier) {
  FurrBallOptions o = MigrateOptions(RoutingPolicy::kHash);
  absl::StatusOr<std::unique_ptr<FurrBall>> ball = FurrBall::Open(o);
  ASSERT_FALSE(ball.ok());
  EXPECT_EQ(ErrorOf(ball.status()), Error::kInvalidArgument);
  EXPECT_NE(ball.status().message().find("migrate_to_readers needs routing"),
            std::string::npos)
      << ball.status();
  o = MigrateOptions(RoutingPolicy::kThreadLocal);
  o.spill_dir = "/nonexistent";
  ball = FurrBall::Open(o);
  ASSERT_FALSE(ball.ok());
  EXPECT_NE(ball.status().message().find("cannot be combined with spill_dir"),
            std::string::npos)
      << ball.status();
}

TEST(MigrateOptionsTest, TheCountersCostNoMemory) {
  // The counters live in the version word's top byte (key_meta.h): a cache
  // with migration maps exactly what one without maps.
  FurrBallOptions with = MigrateOptions(RoutingPolicy::kThreadLocal);
  FurrBallOptions without = with;
  without.migrate_to_readers = false;
  EXPECT_EQ(MustOpen(with)->MetadataBytes(), MustOpen(without)->MetadataBytes());
}

}  // namespace
}  // namespace furrballs
