// End-to-end tests of ClusterClient over real in-process Furrballs servers on
// loopback: sharding, a dead member costing only its own keys, a restart at
// the same address, a fourth member joining, and membership from DNS.
//
// The shares of keys that change owner are printed; the bounds asserted on
// them are the statistical ones of rendezvous hashing (binomial, 3000 keys),
// not timings.
#include "clients/cpp/cluster_client.h"

#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <absl/strings/str_cat.h>
#include <absl/synchronization/notification.h>
#include <gtest/gtest.h>

#include "clients/cpp/test_server.h"

namespace furrballs::client {
namespace {

using std::chrono::milliseconds;

constexpr int kKeys = 3000;

std::string Key(int i) { return absl::StrCat("cluster-key-", i); }
std::string Value(int i) { return absl::StrCat("cluster-value-", i); }

ClusterOptions TestClusterOptions() {
  ClusterOptions o;
  o.client.default_timeout = milliseconds(10000);
  return o;
}

// How the reads of every key turned out.
struct ReadTally {
  int hits = 0;
  int misses = 0;
  int unavailable = 0;
  int other_errors = 0;
  std::map<std::string, int> failed_by_owner;
};

ReadTally ReadAll(ClusterClient& c) {
  ReadTally t;
  for (int i = 0; i < kKeys; ++i) {
    absl::StatusOr<std::optional<Entry>> e = c.Get(Key(i));
    if (e.ok()) {
      if (e->has_value() && (*e)->value == Value(i)) {
        ++t.hits;
      } else {
        ++t.misses;
      }
    } else {
      ++(absl::IsUnavailable(e.status()) ? t.unavailable : t.other_errors);
      ++t.failed_by_owner[c.OwnerOf(Key(i))];
    }
  }
  return t;
}

class ClusterClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int i = 0; i < 3; ++i) {
      auto s = testing::StartTestServer();
      ASSERT_TRUE(s.ok()) << s.status();
      addresses_.push_back(testing::AddressOf(**s));
      servers_.push_back(std::move(*s));
    }
    auto c = ClusterClient::FromEndpoints(addresses_, TestClusterOptions());
    ASSERT_TRUE(c.ok()) << c.status();
    cluster_ = std::move(*c);
  }

  void WriteAll() {
    for (int i = 0; i < kKeys; ++i) {
      absl::StatusOr<uint64_t> v = cluster_->Set(Key(i), Value(i));
      ASSERT_TRUE(v.ok()) << Key(i) << ": " << v.status();
    }
  }

  std::vector<std::unique_ptr<service::Server>> servers_;
  std::vector<std::string> addresses_;
  std::unique_ptr<ClusterClient> cluster_;
};

TEST_F(ClusterClientTest, EveryKeyLivesOnlyOnItsOwner) {
  ASSERT_NO_FATAL_FAILURE(WriteAll());
  ReadTally t = ReadAll(*cluster_);
  EXPECT_EQ(t.hits, kKeys);

  // Look behind the cluster client: each key is on its owner and nowhere else.
  std::map<std::string, std::unique_ptr<Client>> direct;
  std::map<std::string, int> per_owner;
  int sampled = 0;
  for (const std::string& a : addresses_) {
    direct[a] = std::make_unique<Client>(a);
  }
  for (int i = 0; i < kKeys; i += 7, ++sampled) {
    const std::string owner = cluster_->OwnerOf(Key(i));
    ++per_owner[owner];
    for (const std::string& a : addresses_) {
      absl::StatusOr<std::optional<Entry>> e = direct[a]->Get(Key(i));
      ASSERT_TRUE(e.ok()) << e.status();
      EXPECT_EQ(e->has_value(), a == owner) << Key(i) << " on " << a;
    }
  }
  // Each of three members owns about a third (binomial, sd ~ 10 of ~143
  // sampled keys; the margin is 4 sd).
  for (const std::string& a : addresses_) {
    EXPECT_GT(per_owner[a], sampled * 7 / 30) << a;
  }
}

TEST_F(ClusterClientTest, MultiGetAndMultiSetSpanMembersInRequestOrder) {
  std::vector<SetItem> items;
  std::vector<std::string> keys;
  for (int i = 0; i < 300; ++i) {
    keys.push_back(Key(i));
    if (i % 5 != 0) items.push_back({Key(i), Value(i), {}});
  }
  items.push_back({"", "empty key", {}});
  std::vector<absl::StatusOr<uint64_t>> set = cluster_->MultiSet(items);
  ASSERT_EQ(set.size(), items.size());
  for (size_t i = 0; i + 1 < set.size(); ++i) {
    EXPECT_TRUE(set[i].ok()) << items[i].key << ": " << set[i].status();
  }
  EXPECT_TRUE(absl::IsInvalidArgument(set.back().status()))
      << set.back().status();

  keys.push_back("");  // rejected by its owner, alone
  std::vector<absl::StatusOr<std::optional<Entry>>> got =
      cluster_->MultiGet(keys);
  ASSERT_EQ(got.size(), keys.size());
  EXPECT_TRUE(absl::IsInvalidArgument(got.back().status()))
      << got.back().status();
  for (int i = 0; i < 300; ++i) {
    ASSERT_TRUE(got[i].ok()) << got[i].status();
    if (i % 5 == 0) {
      EXPECT_FALSE(got[i]->has_value()) << i;
    } else {
      ASSERT_TRUE(got[i]->has_value()) << i;
      EXPECT_EQ((*got[i])->value, Value(i));
    }
  }
  EXPECT_TRUE(cluster_->MultiGet({}).empty());

  std::vector<EndpointStats> stats = cluster_->Stats();
  ASSERT_EQ(stats.size(), 3u);
  for (const EndpointStats& s : stats) {
    ASSERT_TRUE(s.nodes.ok()) << s.endpoint << ": " << s.nodes.status();
    EXPECT_EQ(s.nodes->size(), 4u);
  }
}

// The scenario of the cluster policy: one member dies, comes back at the same
// address, and then a fourth member joins.
TEST_F(ClusterClientTest, DeadMemberCostsOnlyItsKeysAndMembershipMovesFewKeys) {
  ASSERT_NO_FATAL_FAILURE(WriteAll());
  std::map<std::string, std::string> owner_before;
  std::map<std::string, int> owned;
  for (int i = 0; i < kKeys; ++i) {
    owner_before[Key(i)] = cluster_->OwnerOf(Key(i));
    ++owned[owner_before[Key(i)]];
  }

  // 1. Shut member 1 down. Only its keys fail (UNAVAILABLE); the rest hit.
  const std::string dead = addresses_[1];
  const int dead_port = servers_[1]->port();
  servers_[1]->Shutdown();
  servers_[1].reset();
  ReadTally down = ReadAll(*cluster_);
  std::printf("[cluster] member %s down: %d hits, %d unavailable (it owned %d "
              "of %d keys = %.3f), %d misses, %d other errors\n",
              dead.c_str(), down.hits, down.unavailable, owned[dead], kKeys,
              static_cast<double>(owned[dead]) / kKeys, down.misses,
              down.other_errors);
  EXPECT_EQ(down.unavailable, owned[dead]);
  EXPECT_EQ(down.failed_by_owner.size(), 1u);
  EXPECT_EQ(down.failed_by_owner[dead], owned[dead]);
  EXPECT_EQ(down.hits, kKeys - owned[dead]);
  EXPECT_EQ(down.misses, 0);
  EXPECT_EQ(down.other_errors, 0);

  // A batch spanning all members fails only the dead member's slots.
  std::vector<std::string> batch;
  for (int i = 0; i < 90; ++i) batch.push_back(Key(i));
  std::vector<absl::StatusOr<std::optional<Entry>>> got =
      cluster_->MultiGet(batch);
  for (int i = 0; i < 90; ++i) {
    if (owner_before[Key(i)] == dead) {
      EXPECT_TRUE(absl::IsUnavailable(got[i].status())) << got[i].status();
    } else {
      ASSERT_TRUE(got[i].ok() && got[i]->has_value()) << Key(i);
      EXPECT_EQ((*got[i])->value, Value(i));
    }
  }

  // 2. A new server at the same address: no key changes owner; the restarted
  // member is cold, so its keys miss, and everyone else's still hit.
  auto restarted =
      testing::StartTestServer(absl::StrCat("127.0.0.1:", dead_port));
  ASSERT_TRUE(restarted.ok()) << restarted.status();
  servers_[1] = std::move(*restarted);
  // Bounded wait for the reconnection (gRPC backs off after the refusals).
  absl::Status ready = cluster_->WaitForReady(milliseconds(15000));
  ASSERT_TRUE(ready.ok()) << ready;
  int moved_restart = 0;
  for (int i = 0; i < kKeys; ++i) {
    moved_restart += cluster_->OwnerOf(Key(i)) != owner_before[Key(i)];
  }
  ReadTally back = ReadAll(*cluster_);
  std::printf("[cluster] restart at the same address: %d of %d keys changed "
              "owner (share %.4f); %d hits, %d misses (the cold member's), %d "
              "errors\n",
              moved_restart, kKeys, static_cast<double>(moved_restart) / kKeys,
              back.hits, back.misses, back.unavailable + back.other_errors);
  EXPECT_EQ(moved_restart, 0);
  EXPECT_EQ(back.unavailable + back.other_errors, 0);
  EXPECT_EQ(back.misses, owned[dead]);
  EXPECT_EQ(back.hits, kKeys - owned[dead]);

  // 3. A fourth member joins: about 1/4 of the keys move, all of them to it.
  auto fourth = testing::StartTestServer();
  ASSERT_TRUE(fourth.ok()) << fourth.status();
  const std::string added = testing::AddressOf(**fourth);
  servers_.push_back(std::move(*fourth));
  std::vector<std::string> four = addresses_;
  four.push_back(added);
  ASSERT_TRUE(cluster_->SetEndpoints(four).ok());
  EXPECT_EQ(cluster_->endpoints().size(), 4u);
  // Only keys that stayed on a member that kept its data can hit: moved keys
  // land on the empty new member, and the restarted member is cold.
  int moved_add = 0, moved_elsewhere = 0, expected_hits = 0;
  for (int i = 0; i < kKeys; ++i) {
    const std::string now = cluster_->OwnerOf(Key(i));
    if (now == owner_before[Key(i)]) {
      expected_hits += now != dead;
      continue;
    }
    ++moved_add;
    if (now != added) ++moved_elsewhere;
  }
  const double share = static_cast<double>(moved_add) / kKeys;
  ReadTally joined = ReadAll(*cluster_);
  std::printf("[cluster] 4th member joined: %d of %d keys changed owner "
              "(share %.4f, ideal 0.25), %d to another old member; reads: %d "
              "hits, %d misses, %d errors\n",
              moved_add, kKeys, share, moved_elsewhere, joined.hits,
              joined.misses, joined.unavailable + joined.other_errors);
  EXPECT_EQ(moved_elsewhere, 0);
  // Binomial(3000, 1/4): sd ~ 24 keys, so 0.20..0.30 is about 6 sd.
  EXPECT_GT(share, 0.20);
  EXPECT_LT(share, 0.30);
  EXPECT_EQ(joined.unavailable + joined.other_errors, 0);
  EXPECT_EQ(joined.hits, expected_hits);
  EXPECT_EQ(joined.misses, kKeys - expected_hits);
}

TEST_F(ClusterClientTest, DownMarkFailsFastAndSparesOtherKeys) {
  // A member that answers UNAVAILABLE is skipped for down_interval.
  ClusterOptions o = TestClusterOptions();
  o.down_interval = milliseconds(60000);
  auto c = ClusterClient::FromEndpoints({"127.0.0.1:1", addresses_[0]}, o);
  ASSERT_TRUE(c.ok()) << c.status();
  int dead_key = -1, live_key = -1;
  for (int i = 0; i < 100 && (dead_key < 0 || live_key < 0); ++i) {
    ((*c)->OwnerOf(Key(i)) == "127.0.0.1:1" ? dead_key : live_key) = i;
  }
  ASSERT_GE(dead_key, 0);
  ASSERT_GE(live_key, 0);
  absl::StatusOr<uint64_t> first = (*c)->Set(Key(dead_key), "v");
  EXPECT_TRUE(absl::IsUnavailable(first.status())) << first.status();
  absl::StatusOr<uint64_t> second = (*c)->Set(Key(dead_key), "v");
  EXPECT_TRUE(absl::IsUnavailable(second.status())) << second.status();
  // The second failure comes from the mark, not from the network.
  EXPECT_NE(second.status().message().find("marked down"),
            absl::string_view::npos)
      << second.status();
  EXPECT_TRUE((*c)->Set(Key(live_key), "v").ok());
}

TEST(ClusterMembershipTest, EmptyListIsRejected) {
  auto c = ClusterClient::FromEndpoints({});
  EXPECT_TRUE(absl::IsInvalidArgument(c.status())) << c.status();
}

TEST(ClusterMembershipTest, GetaddrinfoResolvesLoopback) {
  absl::StatusOr<std::vector<std::string>> v4 =
      ResolveWithGetaddrinfo("localhost:50051", AddressFamily::kIPv4);
  ASSERT_TRUE(v4.ok()) << v4.status();
  EXPECT_EQ(*v4, std::vector<std::string>{"127.0.0.1:50051"});
  absl::StatusOr<std::vector<std::string>> numeric =
      ResolveWithGetaddrinfo("[::1]:7", AddressFamily::kAny);
  ASSERT_TRUE(numeric.ok()) << numeric.status();
  EXPECT_EQ(*numeric, std::vector<std::string>{"[::1]:7"});
  EXPECT_TRUE(absl::IsInvalidArgument(
      ResolveWithGetaddrinfo("no-port", AddressFamily::kAny).status()));
}

TEST(ClusterMembershipTest, DnsClusterServesThroughResolvedAddress) {
  auto server = testing::StartTestServer();
  ASSERT_TRUE(server.ok()) << server.status();
  ClusterOptions o = TestClusterOptions();
  o.address_family = AddressFamily::kIPv4;
  o.resolve_interval = milliseconds(0);
  auto c = ClusterClient::FromDns(
      absl::StrCat("localhost:", (*server)->port()), o);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ((*c)->endpoints(),
            std::vector<std::string>{testing::AddressOf(**server)});
  ASSERT_TRUE((*c)->Set("dns", "works").ok());
  absl::StatusOr<std::optional<Entry>> e = (*c)->Get("dns");
  ASSERT_TRUE(e.ok() && e->has_value()) << e.status();
  EXPECT_EQ((*e)->value, "works");
  EXPECT_TRUE(absl::IsFailedPrecondition(
      ClusterClient::FromEndpoints({"a:1"}).value()->Resolve()));
}

// Re-resolution on demand and on the interval, with a scripted resolver.
TEST(ClusterMembershipTest, ReResolutionUpdatesMembersAndKeepsThemOnFailure) {
  absl::Mutex mu;
  std::vector<absl::StatusOr<std::vector<std::string>>> script = {
      std::vector<std::string>{"10.1.0.1:1", "10.1.0.2:1"},
      absl::UnavailableError("dns down"),
      std::vector<std::string>{"10.1.0.1:1", "10.1.0.2:1", "10.1.0.3:1"},
  };
  size_t calls = 0;
  ClusterOptions o;
  o.resolve_interval = milliseconds(0);  // on demand only, first
  o.resolver = [&](const std::string& name, AddressFamily)
      -> absl::StatusOr<std::vector<std::string>> {
    absl::MutexLock lock(&mu);
    EXPECT_EQ(name, "cache.example:1");
    const size_t i = std::min(calls, script.size() - 1);
    ++calls;
    return script[i];
  };
  auto c = ClusterClient::FromDns("cache.example:1", o);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ((*c)->endpoints().size(), 2u);
  // A failed resolution keeps the members.
  absl::Status failed = (*c)->Resolve();
  EXPECT_TRUE(absl::IsUnavailable(failed)) << failed;
  EXPECT_EQ((*c)->endpoints().size(), 2u);
  ASSERT_TRUE((*c)->Resolve().ok());
  EXPECT_EQ((*c)->endpoints().size(), 3u);

  // The same resolver on a 10 ms interval: the background thread calls it
  // again (bounded wait), and destruction stops the thread.
  calls = 0;
  absl::Notification again;
  o.resolve_interval = milliseconds(10);
  o.resolver = [&](const std::string&, AddressFamily)
      -> absl::StatusOr<std::vector<std::string>> {
    absl::MutexLock lock(&mu);
    if (++calls == 2 && !again.HasBeenNotified()) again.Notify();
    return std::vector<std::string>{absl::StrCat("10.2.0.", calls, ":1")};
  };
  auto periodic = ClusterClient::FromDns("cache.example:1", o);
  ASSERT_TRUE(periodic.ok()) << periodic.status();
  ASSERT_TRUE(again.WaitForNotificationWithTimeout(absl::Seconds(30)));
  periodic->reset();
}

}  // namespace
}  // namespace furrballs::client
