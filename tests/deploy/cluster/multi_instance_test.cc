// A Furrballs cluster the way Kubernetes runs it, on loopback: three real
// furrballs_server processes (the binary the image ships), one
// ClusterClient sharding keys across them by rendezvous hashing, and the
// membership changes a headless Service produces.
//
//   1. all three up: every key hits;
//   2. one pod stops (SIGTERM, the kubelet's way): exactly its keys fail
//      with UNAVAILABLE, every other key still hits;
//   3. DNS drops it (the client's member set shrinks to two): its keys move
//      to the survivors and miss there; nothing else moves;
//   4. it starts again at the same address and DNS lists it again: the keys
//      that move back are its own third, and they miss (cold) while all
//      others hit;
//   5. a pod that comes back at a new address (a new pod IP) instead: the
//      share of keys that change owner, against both earlier member sets.
//
// The shares are printed as "[multi-instance] ..." lines. The bounds
// asserted are the statistics of rendezvous hashing over kKeys keys
// (binomial: one standard deviation of a 1/3 share is 0.009), not timings.
//
// Thread safety: single-threaded test; each server is a child process.

#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <absl/strings/str_cat.h>
#include <gtest/gtest.h>

#include "clients/cpp/cluster_client.h"
#include "tests/common/server_process.h"


namespace furrballs {
namespace {

using client::ClusterClient;
using client::ClusterOptions;
using client::Entry;
using std::chrono::milliseconds;

constexpr int kKeys = 3000;

std::string server_binary;  // set from argv[1]

std::string Key(int i) { return absl::StrCat("multi-instance-key-", i); }
std::string Value(int i) { return absl::StrCat("value-", i); }

// A furrballs_server child process on 127.0.0.1. Start() with port 0 lets
// the server pick a free port, which it prints; a restart reuses the port.
using ::furrballs::test_support::ServerProcess;

// How reads of every key turned out, and which member each key went to.
struct Tally {
  int hits = 0;
  int misses = 0;
  int unavailable = 0;
  int other_errors = 0;
  std::map<std::string, int> unavailable_by_owner;
  std::map<std::string, int> misses_by_owner;
};

Tally ReadAll(ClusterClient& cluster) {
  Tally t;
  for (int i = 0; i < kKeys; ++i) {
    const std::string owner = cluster.OwnerOf(Key(i));
    absl::StatusOr<std::optional<Entry>> e = cluster.Get(Key(i));
    if (!e.ok()) {
      if (absl::IsUnavailable(e.status())) {
        ++t.unavailable;
        ++t.unavailable_by_owner[owner];
      } else {
        ++t.other_errors;
      }
    } else if (e->has_value() && (*e)->value == Value(i)) {
      ++t.hits;
    } else {
      ++t.misses;
      ++t.misses_by_owner[owner];
    }
  }
  return t;
}

std::vector<std::string> Owners(ClusterClient& cluster) {
  std::vector<std::string> owners;
  for (int i = 0; i < kKeys; ++i) owners.push_back(cluster.OwnerOf(Key(i)));
  return owners;
}

int Changed(const std::vector<std::string>& a,
            const std::vector<std::string>& b) {
  int changed = 0;
  for (int i = 0; i < kKeys; ++i) changed += a[i] != b[i];
  return changed;
}

double Share(int n) { return static_cast<double>(n) / kKeys; }

TEST(MultiInstanceTest, OnePodStopsRestartsAndMoves) {
  const std::vector<std::string> flags = {"--metrics_address=", "--memory_mb=64"};
  ServerProcess servers[3] = {{server_binary, flags},
                              {server_binary, flags},
                              {server_binary, flags}};
  std::vector<std::string> all;
  for (ServerProcess& s : servers) {
    std::string why;
    ASSERT_TRUE(s.Start(0, &why)) << why;
    all.push_back(s.address());
  }
  ClusterOptions options;
  options.client.default_timeout = milliseconds(5000);
  // Every read after the stop must go to the network, so that the count of
  // UNAVAILABLE answers is exactly the stopped member's keys.
  options.down_interval = milliseconds(0);
  absl::StatusOr<std::unique_ptr<ClusterClient>> made =
      ClusterClient::FromEndpoints(all, options);
  ASSERT_TRUE(made.ok()) << made.status();
  ClusterClient& cluster = **made;
  ASSERT_TRUE(cluster.WaitForReady(milliseconds(20000)).ok());

  // 1. Everything written, everything hits, load spread over three.
  for (int i = 0; i < kKeys; ++i) {
    ASSERT_TRUE(cluster.Set(Key(i), Value(i)).ok()) << i;
  }
  const std::vector<std::string> owners3 = Owners(cluster);
  std::map<std::string, int> owned;
  for (const std::string& o : owners3) ++owned[o];
  ASSERT_EQ(owned.size(), 3u);
  Tally up = ReadAll(cluster);
  EXPECT_EQ(up.hits, kKeys);
  const std::string stopped = servers[2].address();
  const int stopped_keys = owned[stopped];
  std::printf("[multi-instance] 3 servers, %d keys: %s owns %d, %s %d, %s %d\n",
              kKeys, all[0].c_str(), owned[all[0]], all[1].c_str(),
              owned[all[1]], all[2].c_str(), owned[all[2]]);

  // 2. One pod stops: only its keys fail, the others hit.
  ASSERT_TRUE(servers[2].Stop()) << "SIGTERM did not end the server cleanly";
  Tally down = ReadAll(cluster);
  EXPECT_EQ(down.unavailable, stopped_keys);
  EXPECT_EQ(down.unavailable_by_owner[stopped], stopped_keys);
  EXPECT_EQ(down.hits, kKeys - stopped_keys);
  EXPECT_EQ(down.misses, 0);
  EXPECT_EQ(down.other_errors, 0);
  std::printf(
      "[multi-instance] %s stopped: %d keys UNAVAILABLE (its own, %.3f), %d "
      "hit, %d other errors\n",
      stopped.c_str(), down.unavailable, Share(down.unavailable), down.hits,
      down.other_errors);

  // 3. DNS no longer lists it: its keys re-home to the survivors and miss
  //    there; no other key moves.
  ASSERT_TRUE(cluster.SetEndpoints({all[0], all[1]}).ok());
  const std::vector<std::string> owners2 = Owners(cluster);
  EXPECT_EQ(Changed(owners3, owners2), stopped_keys);
  Tally shrunk = ReadAll(cluster);
  EXPECT_EQ(shrunk.misses, stopped_keys);
  EXPECT_EQ(shrunk.hits, kKeys - stopped_keys);
  EXPECT_EQ(shrunk.unavailable + shrunk.other_errors, 0);
  std::printf(
      "[multi-instance] member set 3 -> 2: %d keys changed owner (%.3f), "
      "%d miss, %d hit\n",
      Changed(owners3, owners2), Share(Changed(owners3, owners2)),
      shrunk.misses, shrunk.hits);

  // 4. It restarts at the same address and DNS lists it again: the keys
  //    that move are exactly its old third; they miss (a cold cache), the
  //    others hit.
  {
    std::string why;
    ASSERT_TRUE(servers[2].Start(servers[2].port(), &why)) << why;
  }
  ASSERT_TRUE(cluster.SetEndpoints(all).ok());
  ASSERT_TRUE(cluster.WaitForReady(milliseconds(20000)).ok());
  const std::vector<std::string> owners3again = Owners(cluster);
  const int moved_back = Changed(owners2, owners3again);
  EXPECT_EQ(Changed(owners3, owners3again), 0);
  EXPECT_EQ(moved_back, stopped_keys);
  EXPECT_NEAR(Share(moved_back), 1.0 / 3, 0.05);
  Tally back = ReadAll(cluster);
  EXPECT_EQ(back.misses, stopped_keys);
  EXPECT_EQ(back.misses_by_owner[stopped], stopped_keys);
  EXPECT_EQ(back.hits, kKeys - stopped_keys);
  std::printf(
      "[multi-instance] restarted at the same address, member set 2 -> 3: "
      "%d keys moved (%.3f; ideal 1/3), all back to it; %d miss (cold), %d "
      "hit\n",
      moved_back, Share(moved_back), back.misses, back.hits);

  // 5. The same pod with a new address (a new pod IP): a different third of
  //    the keys becomes its, so half the keys change owner against the
  //    original set (2/3 x 3/4).
  ASSERT_TRUE(servers[2].Stop());
  {
    std::string why;
    ASSERT_TRUE(servers[2].Start(0, &why)) << why;
  }
  ASSERT_TRUE(cluster.SetEndpoints({all[0], all[1], servers[2].address()}).ok());
  const std::vector<std::string> owners_new = Owners(cluster);
  const int moved_from_two = Changed(owners2, owners_new);
  const int moved_from_three = Changed(owners3, owners_new);
  EXPECT_NEAR(Share(moved_from_two), 1.0 / 3, 0.05);
  EXPECT_NEAR(Share(moved_from_three), 0.5, 0.05);
  std::printf(
      "[multi-instance] back at a new address %s: %d keys (%.3f; ideal 1/3) "
      "moved from the 2-member set, %d (%.3f; ideal 1/2) differ from the "
      "original 3-member owners\n",
      servers[2].address().c_str(), moved_from_two, Share(moved_from_two),
      moved_from_three, Share(moved_from_three));

  for (ServerProcess& s : servers) EXPECT_TRUE(s.Stop());
  std::fflush(stdout);
}

}  // namespace
}  // namespace furrballs

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s <furrballs_server>\n", argv[0]);
    return 2;
  }
  furrballs::server_binary = argv[1];
  return RUN_ALL_TESTS();
}
