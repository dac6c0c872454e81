// End-to-end tests of the C++ Client against a real in-process Furrballs
// server on loopback (simulated 4-node topology): every method, synchronous
// and asynchronous, the Pipeline stream, deadlines, and error mapping.
#include "clients/cpp/client.h"

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <absl/strings/match.h>
#include <absl/strings/str_cat.h>
#include <absl/synchronization/blocking_counter.h>
#include <absl/synchronization/mutex.h>
#include <absl/synchronization/notification.h>
#include <gtest/gtest.h>

#include "clients/cpp/test_server.h"

namespace furrballs::client {
namespace {

using std::chrono::milliseconds;

// How a test's client sends Get, Set, Delete and Touch: every call unary
// (batch_streams 0), every call in a Batch message (two streams, lone calls
// too), or as the defaults do (batching on; a call alone in flight goes
// unary). The results must not differ.
enum class Transport { kUnary, kBatched, kDefault };

ClientOptions OptionsFor(Transport transport, milliseconds timeout) {
  ClientOptions options{.default_timeout = timeout};
  if (transport == Transport::kUnary) options.batch_streams = 0;
  if (transport == Transport::kBatched) {
    options.batch_streams = 2;
    options.batch_lone_calls = true;
  }
  return options;
}

std::string TransportName(const ::testing::TestParamInfo<Transport>& info) {
  switch (info.param) {
    case Transport::kUnary:
      return "unary";
    case Transport::kBatched:
      return "batched";
    case Transport::kDefault:
      return "default";
  }
  return "unknown";
}

const auto kTransports = ::testing::Values(
    Transport::kUnary, Transport::kBatched, Transport::kDefault);

// Requests the server counted for `op`, over all status codes.
uint64_t Requests(const service::Server& server, service::RequestOp op) {
  const service::RequestStatsSnapshot stats =
      server.request_stats().Snapshot();
  uint64_t n = 0;
  for (uint64_t count : stats.requests[static_cast<int>(op)]) n += count;
  return n;
}

uint64_t UnaryRequests(const service::Server& server) {
  return Requests(server, service::RequestOp::kGet) +
         Requests(server, service::RequestOp::kSet) +
         Requests(server, service::RequestOp::kDelete) +
         Requests(server, service::RequestOp::kTouch);
}

class ClientTest : public ::testing::TestWithParam<Transport> {
 protected:
  void SetUp() override {
    auto server = testing::StartTestServer();
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    client_ = std::make_unique<Client>(
        testing::AddressOf(*server_),
        OptionsFor(GetParam(), milliseconds(10000)));
  }

  std::unique_ptr<service::Server> server_;
  std::unique_ptr<Client> client_;
};

TEST_P(ClientTest, SetThenGetReturnsValueVersionAndTtl) {
  const std::string value("binary\0value", 12);
  absl::StatusOr<uint64_t> version =
      client_->Set("k", value, SetOptions{.ttl_ms = 60000});
  ASSERT_TRUE(version.ok()) << version.status();
  absl::StatusOr<std::optional<Entry>> e = client_->Get("k");
  ASSERT_TRUE(e.ok()) << e.status();
  ASSERT_TRUE(e->has_value());
  EXPECT_EQ((*e)->value, value);
  EXPECT_EQ((*e)->version, *version);
  EXPECT_GT((*e)->ttl_remaining_ms, 0u);
  EXPECT_LE((*e)->ttl_remaining_ms, 60000u);

  absl::StatusOr<uint64_t> again = client_->Set("k", "other");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_NE(*again, *version);
  e = client_->Get("k");
  ASSERT_TRUE(e.ok() && e->has_value());
  EXPECT_EQ((*e)->value, "other");
  EXPECT_EQ((*e)->ttl_remaining_ms, 0u);
}

TEST_P(ClientTest, MissIsNotAnError) {
  absl::StatusOr<std::optional<Entry>> e = client_->Get("never-written");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_FALSE(e->has_value());
}

TEST_P(ClientTest, ConditionalSets) {
  absl::StatusOr<uint64_t> v1 =
      client_->Set("cas", "a", SetOptions{.mode = SetMode::kIfAbsent});
  ASSERT_TRUE(v1.ok()) << v1.status();
  absl::StatusOr<uint64_t> dup =
      client_->Set("cas", "b", SetOptions{.mode = SetMode::kIfAbsent});
  EXPECT_TRUE(absl::IsAlreadyExists(dup.status())) << dup.status();

  absl::StatusOr<uint64_t> v2 = client_->Set(
      "cas", "c",
      SetOptions{.mode = SetMode::kIfVersion, .expected_version = *v1});
  ASSERT_TRUE(v2.ok()) << v2.status();
  absl::StatusOr<uint64_t> stale = client_->Set(
      "cas", "d",
      SetOptions{.mode = SetMode::kIfVersion, .expected_version = *v1});
  EXPECT_TRUE(absl::IsAborted(stale.status())) << stale.status();
  absl::StatusOr<uint64_t> absent = client_->Set(
      "cas-missing", "d",
      SetOptions{.mode = SetMode::kIfVersion, .expected_version = 1});
  EXPECT_TRUE(absl::IsNotFound(absent.status())) << absent.status();

  absl::StatusOr<std::optional<Entry>> e = client_->Get("cas");
  ASSERT_TRUE(e.ok() && e->has_value());
  EXPECT_EQ((*e)->value, "c");
  EXPECT_EQ((*e)->version, *v2);
}

TEST_P(ClientTest, DeleteAndTouch) {
  ASSERT_TRUE(client_->Set("d", "x").ok());
  absl::StatusOr<bool> deleted = client_->Delete("d");
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_TRUE(*deleted);
  deleted = client_->Delete("d");
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_FALSE(*deleted);

  absl::Status missing = client_->Touch("d", 1000);
  EXPECT_TRUE(absl::IsNotFound(missing)) << missing;

  ASSERT_TRUE(client_->Set("t", "x").ok());
  ASSERT_TRUE(client_->Touch("t", 50000).ok());
  absl::StatusOr<std::optional<Entry>> e = client_->Get("t");
  ASSERT_TRUE(e.ok() && e->has_value());
  EXPECT_GT((*e)->ttl_remaining_ms, 0u);
  EXPECT_LE((*e)->ttl_remaining_ms, 50000u);
  ASSERT_TRUE(client_->Touch("t", 0).ok());
  e = client_->Get("t");
  ASSERT_TRUE(e.ok() && e->has_value());
  EXPECT_EQ((*e)->ttl_remaining_ms, 0u);
}

// Results come back in request order; key 10 is empty and fails alone with
// its own INVALID_ARGUMENT.
TEST_P(ClientTest, MultiGetKeepsRequestOrderAndFailsOnlyTheBadKey) {
  std::vector<std::string> keys;
  for (int i = 0; i < 64; ++i) {
    keys.push_back(i == 10 ? "" : absl::StrCat("mg-", i));
    if (i % 3 != 0 && i != 10) {
      ASSERT_TRUE(client_->Set(keys.back(), absl::StrCat("v", i)).ok());
    }
  }
  absl::StatusOr<std::vector<absl::StatusOr<std::optional<Entry>>>> r =
      client_->MultiGet(keys);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->size(), keys.size());
  for (int i = 0; i < 64; ++i) {
    const absl::StatusOr<std::optional<Entry>>& got = (*r)[i];
    if (i == 10) {
      EXPECT_TRUE(absl::IsInvalidArgument(got.status())) << got.status();
      EXPECT_TRUE(absl::StrContains(got.status().message(), "item 10"))
          << got.status();
      continue;
    }
    ASSERT_TRUE(got.ok()) << i << ": " << got.status();
    if (i % 3 == 0) {
      EXPECT_FALSE(got->has_value()) << i;
    } else {
      ASSERT_TRUE(got->has_value()) << i;
      EXPECT_EQ((*got)->value, absl::StrCat("v", i));
    }
  }
  absl::StatusOr<std::vector<absl::StatusOr<std::optional<Entry>>>> none =
      client_->MultiGet({});
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->empty());
}

TEST_P(ClientTest, MultiSetReportsEachItem) {
  ASSERT_TRUE(client_->Set("ms-taken", "x").ok());
  std::vector<SetItem> items = {
      {"ms-a", "1", {}},
      {"ms-taken", "2", {.mode = SetMode::kIfAbsent}},
      {"ms-b", "3", {.ttl_ms = 40000}},
      {"", "4", {}},
  };
  absl::StatusOr<std::vector<absl::StatusOr<uint64_t>>> r =
      client_->MultiSet(items);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->size(), 4u);
  EXPECT_TRUE((*r)[0].ok()) << (*r)[0].status();
  EXPECT_TRUE(absl::IsAlreadyExists((*r)[1].status())) << (*r)[1].status();
  EXPECT_TRUE((*r)[2].ok()) << (*r)[2].status();
  EXPECT_TRUE(absl::IsInvalidArgument((*r)[3].status())) << (*r)[3].status();

  absl::StatusOr<std::optional<Entry>> b = client_->Get("ms-b");
  ASSERT_TRUE(b.ok() && b->has_value());
  EXPECT_EQ((*b)->value, "3");
  EXPECT_EQ((*b)->version, *(*r)[2]);
  EXPECT_GT((*b)->ttl_remaining_ms, 0u);
}

TEST_P(ClientTest, StatsReportsEveryNode) {
  for (int i = 0; i < 40; ++i) {
    ASSERT_TRUE(client_->Set(absl::StrCat("st-", i), "v").ok());
  }
  absl::StatusOr<std::vector<NodeStats>> stats = client_->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  ASSERT_EQ(stats->size(), 4u);
  uint64_t sets = 0, live = 0;
  for (size_t i = 0; i < stats->size(); ++i) {
    EXPECT_EQ((*stats)[i].node(), i);
    EXPECT_GT((*stats)[i].memory_limit_bytes(), 0u);
    sets += (*stats)[i].sets();
    live += (*stats)[i].live_keys();
  }
  EXPECT_GE(sets, 40u);
  EXPECT_GE(live, 40u);
}

TEST_P(ClientTest, ServerErrorsKeepCodeAndMessage) {
  absl::StatusOr<std::optional<Entry>> empty = client_->Get("");
  EXPECT_TRUE(absl::IsInvalidArgument(empty.status())) << empty.status();
  EXPECT_FALSE(empty.status().message().empty());

  absl::StatusOr<uint64_t> long_key = client_->Set(std::string(251, 'k'), "v");
  EXPECT_TRUE(absl::IsInvalidArgument(long_key.status())) << long_key.status();
  // The message names the limit (250 by default) so the caller can fix it.
  EXPECT_NE(long_key.status().message().find("250"), absl::string_view::npos)
      << long_key.status();

  absl::StatusOr<uint64_t> big = client_->Set("big", std::string((1 << 20) + 1, 'v'));
  EXPECT_TRUE(absl::IsInvalidArgument(big.status())) << big.status();

  absl::Status touch = client_->Touch("", 1);
  EXPECT_TRUE(absl::IsInvalidArgument(touch)) << touch;
}

TEST_P(ClientTest, AsyncCallsComplete) {
  constexpr int kKeys = 200;
  {
    absl::BlockingCounter done(kKeys);
    std::atomic<int> ok{0};
    for (int i = 0; i < kKeys; ++i) {
      client_->SetAsync(absl::StrCat("as-", i), absl::StrCat("v", i), {},
                        [&](absl::StatusOr<uint64_t> v) {
                          if (v.ok() && *v > 0) ok.fetch_add(1);
                          done.DecrementCount();
                        });
    }
    done.Wait();
    EXPECT_EQ(ok.load(), kKeys);
  }
  {
    absl::BlockingCounter done(kKeys);
    absl::Mutex mu;
    std::vector<std::string> got(kKeys);
    for (int i = 0; i < kKeys; ++i) {
      client_->GetAsync(absl::StrCat("as-", i),
                        [&, i](absl::StatusOr<std::optional<Entry>> e) {
                          {
                            absl::MutexLock lock(&mu);
                            if (e.ok() && e->has_value()) got[i] = (*e)->value;
                          }
                          // Last: once the count is zero the test may
                          // destroy mu.
                          done.DecrementCount();
                        });
    }
    done.Wait();
    for (int i = 0; i < kKeys; ++i) EXPECT_EQ(got[i], absl::StrCat("v", i));
  }
  absl::BlockingCounter done(4);
  absl::StatusOr<bool> deleted = false;
  absl::Status touched;
  absl::StatusOr<std::vector<absl::StatusOr<std::optional<Entry>>>> multi;
  absl::StatusOr<std::vector<absl::StatusOr<uint64_t>>> multi_set;
  client_->DeleteAsync("as-0", [&](absl::StatusOr<bool> r) {
    deleted = r;
    done.DecrementCount();
  });
  client_->TouchAsync("as-1", 30000, [&](absl::Status s) {
    touched = s;
    done.DecrementCount();
  });
  const std::vector<std::string> keys = {"as-2", "as-missing", "as-3"};
  client_->MultiGetAsync(
      keys,
      [&](absl::StatusOr<std::vector<absl::StatusOr<std::optional<Entry>>>> r) {
        multi = std::move(r);
        done.DecrementCount();
      });
  const std::vector<SetItem> items = {{"as-new", "n", {}},
                                      {"as-4", "x", {.mode = SetMode::kIfAbsent}}};
  client_->MultiSetAsync(
      items, [&](absl::StatusOr<std::vector<absl::StatusOr<uint64_t>>> r) {
        multi_set = std::move(r);
        done.DecrementCount();
      });
  done.Wait();
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_TRUE(*deleted);
  EXPECT_TRUE(touched.ok()) << touched;
  ASSERT_TRUE(multi.ok()) << multi.status();
  ASSERT_EQ(multi->size(), 3u);
  ASSERT_TRUE((*multi)[0].ok() && (*multi)[0]->has_value());
  EXPECT_EQ((**(*multi)[0]).value, "v2");
  ASSERT_TRUE((*multi)[1].ok());
  EXPECT_FALSE((*multi)[1]->has_value());
  ASSERT_TRUE((*multi)[2].ok() && (*multi)[2]->has_value());
  EXPECT_EQ((**(*multi)[2]).value, "v3");
  ASSERT_TRUE(multi_set.ok()) << multi_set.status();
  ASSERT_EQ(multi_set->size(), 2u);
  EXPECT_TRUE((*multi_set)[0].ok());
  EXPECT_TRUE(absl::IsAlreadyExists((*multi_set)[1].status()));
}

TEST_P(ClientTest, AsyncErrorsArriveInTheCallback) {
  absl::BlockingCounter done(2);
  absl::Status get_status, touch_status;
  client_->GetAsync("", [&](absl::StatusOr<std::optional<Entry>> e) {
    get_status = e.status();
    done.DecrementCount();
  });
  client_->TouchAsync("async-missing", 10, [&](absl::Status s) {
    touch_status = s;
    done.DecrementCount();
  });
  done.Wait();
  EXPECT_TRUE(absl::IsInvalidArgument(get_status)) << get_status;
  EXPECT_TRUE(absl::IsNotFound(touch_status)) << touch_status;
}

TEST_P(ClientTest, DestructorWaitsForAsyncCallbacks) {
  std::atomic<int> called{0};
  {
    Client c(testing::AddressOf(*server_));
    for (int i = 0; i < 100; ++i) {
      c.GetAsync(absl::StrCat("dw-", i),
                 [&](absl::StatusOr<std::optional<Entry>>) { called++; });
    }
  }
  EXPECT_EQ(called.load(), 100);
}

// 1000 writes then 1000 reads through pipelines; responses may come back in
// any order, and each must reach the callback of its own request.
TEST_P(ClientTest, PipelineThousandOps) {
  constexpr int kOps = 1000;
  {
    // A small in-flight window makes Submit block and resume many times.
    std::unique_ptr<Pipeline> p = client_->OpenPipeline(
        PipelineOptions{.stream_timeout = milliseconds(60000),
                        .max_in_flight = 64});
    std::vector<std::atomic<int>> calls(kOps);
    std::atomic<int> ok{0};
    for (int i = 0; i < kOps; ++i) {
      ASSERT_TRUE(p->Set(absl::StrCat("pl-", i), absl::StrCat("value-", i), {},
                         [&, i](absl::StatusOr<uint64_t> v) {
                           calls[i]++;
                           if (v.ok() && *v > 0) ok++;
                         })
                      .ok());
    }
    absl::Status closed = p->Close();
    EXPECT_TRUE(closed.ok()) << closed;
    EXPECT_EQ(ok.load(), kOps);
    for (int i = 0; i < kOps; ++i) EXPECT_EQ(calls[i].load(), 1) << i;
    EXPECT_EQ(p->in_flight(), 0u);
  }
  std::unique_ptr<Pipeline> p = client_->OpenPipeline(
      PipelineOptions{.stream_timeout = milliseconds(60000)});
  absl::Mutex mu;
  std::vector<std::string> got(kOps);
  std::vector<int> calls(kOps);
  for (int i = 0; i < kOps; ++i) {
    ASSERT_TRUE(p->Get(absl::StrCat("pl-", i),
                       [&, i](absl::StatusOr<std::optional<Entry>> e) {
                         absl::MutexLock lock(&mu);
                         ++calls[i];
                         if (e.ok() && e->has_value()) got[i] = (*e)->value;
                       })
                    .ok());
  }
  absl::StatusOr<bool> deleted;
  absl::Status touched;
  ASSERT_TRUE(p->Delete("pl-0", [&](absl::StatusOr<bool> r) {
                 absl::MutexLock lock(&mu);
                 deleted = r;
               }).ok());
  ASSERT_TRUE(p->Touch("pl-1", 20000, [&](absl::Status s) {
                 absl::MutexLock lock(&mu);
                 touched = s;
               }).ok());
  absl::Status closed = p->Close();
  EXPECT_TRUE(closed.ok()) << closed;
  absl::MutexLock lock(&mu);
  for (int i = 0; i < kOps; ++i) {
    EXPECT_EQ(calls[i], 1) << i;
    EXPECT_EQ(got[i], absl::StrCat("value-", i)) << i;
  }
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_TRUE(*deleted);
  EXPECT_TRUE(touched.ok()) << touched;
}

TEST_P(ClientTest, PipelineOpErrorsKeepTheStreamOpen) {
  ASSERT_TRUE(client_->Set("pe-taken", "x").ok());
  std::unique_ptr<Pipeline> p = client_->OpenPipeline(
      PipelineOptions{.stream_timeout = milliseconds(30000)});
  absl::Mutex mu;
  absl::Status exists, empty, touch_missing;
  absl::StatusOr<uint64_t> after;
  ASSERT_TRUE(p->Set("pe-taken", "y", {.mode = SetMode::kIfAbsent},
                     [&](absl::StatusOr<uint64_t> v) {
                       absl::MutexLock lock(&mu);
                       exists = v.status();
                     }).ok());
  ASSERT_TRUE(p->Get("", [&](absl::StatusOr<std::optional<Entry>> e) {
                 absl::MutexLock lock(&mu);
                 empty = e.status();
               }).ok());
  ASSERT_TRUE(p->Touch("pe-missing", 5, [&](absl::Status s) {
                 absl::MutexLock lock(&mu);
                 touch_missing = s;
               }).ok());
  ASSERT_TRUE(p->Set("pe-after", "z", {}, [&](absl::StatusOr<uint64_t> v) {
                 absl::MutexLock lock(&mu);
                 after = v;
               }).ok());
  absl::Status closed = p->Close();
  EXPECT_TRUE(closed.ok()) << closed;
  absl::MutexLock lock(&mu);
  EXPECT_TRUE(absl::IsAlreadyExists(exists)) << exists;
  EXPECT_TRUE(absl::IsInvalidArgument(empty)) << empty;
  EXPECT_TRUE(absl::IsNotFound(touch_missing)) << touch_missing;
  EXPECT_TRUE(after.ok()) << after.status();
}

TEST_P(ClientTest, PipelineSubmitAfterCloseIsRejected) {
  std::unique_ptr<Pipeline> p = client_->OpenPipeline();
  ASSERT_TRUE(p->Close().ok());
  bool called = false;
  absl::Status s = p->Get("k", [&](absl::StatusOr<std::optional<Entry>>) {
    called = true;
  });
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_TRUE(p->Close().ok());  // idempotent
  EXPECT_FALSE(called);
}

TEST_P(ClientTest, PipelineFromManyThreads) {
  constexpr int kThreads = 4, kPerThread = 250;
  std::unique_ptr<Pipeline> p = client_->OpenPipeline(
      PipelineOptions{.stream_timeout = milliseconds(60000),
                      .max_in_flight = 100});
  std::atomic<int> ok{0}, calls{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        absl::Status s = p->Set(absl::StrCat("mt-", t, "-", i), "v", {},
                                [&](absl::StatusOr<uint64_t> v) {
                                  calls++;
                                  if (v.ok()) ok++;
                                });
        if (!s.ok()) ADD_FAILURE() << s;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_TRUE(p->Close().ok());
  EXPECT_EQ(calls.load(), kThreads * kPerThread);
  EXPECT_EQ(ok.load(), kThreads * kPerThread);
}

TEST_P(ClientTest, ZeroTimeoutExpiresAtOnce) {
  absl::StatusOr<std::optional<Entry>> e =
      client_->Get("k", CallOptions{.timeout = milliseconds(0)});
  EXPECT_TRUE(absl::IsDeadlineExceeded(e.status())) << e.status();
}

TEST_P(ClientTest, WaitForReadyConnects) {
  EXPECT_TRUE(client_->WaitForReady(milliseconds(10000)).ok());
}

// Concurrent callers through one client with the default options: their
// operations share Batch messages (far fewer messages and unary calls than
// operations reach the server), and each caller still gets its own result:
// values, per-op errors (an empty key fails only itself) and deadlines (a
// zero timeout fails only that call).
TEST(ClientBatchingTest, ConcurrentCallersShareMessagesAndKeepTheirResults) {
  auto server = testing::StartTestServer();
  ASSERT_TRUE(server.ok()) << server.status();
  Client c(testing::AddressOf(**server),
           ClientOptions{.default_timeout = milliseconds(10000)});
  constexpr int kThreads = 16, kPerThread = 200;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const std::string key = absl::StrCat("cb-", t, "-", i);
        const std::string value = absl::StrCat("v", t, "/", i);
        absl::StatusOr<uint64_t> v = c.Set(key, value);
        absl::StatusOr<std::optional<Entry>> e = c.Get(key);
        if (!v.ok() || !e.ok() || !e->has_value() || (*e)->value != value ||
            (*e)->version != *v) {
          failures++;
        }
        if (i % 50 == 0) {
          if (!absl::IsInvalidArgument(c.Get("").status())) failures++;
          if (!absl::IsDeadlineExceeded(
                  c.Get(key, CallOptions{.timeout = milliseconds(0)})
                      .status())) {
            failures++;
          }
          absl::Notification done;
          absl::StatusOr<bool> deleted;
          c.DeleteAsync(key, [&](absl::StatusOr<bool> d) {
            deleted = std::move(d);
            done.Notify();
          });
          done.WaitForNotification();
          if (!deleted.ok() || !*deleted) failures++;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  const uint64_t messages = Requests(**server, service::RequestOp::kBatch);
  const uint64_t unary = UnaryRequests(**server);
  // Zero-timeout calls fail in the client and never reach the server.
  const uint64_t ops = uint64_t{kThreads} * kPerThread * 2 +
                       uint64_t{kThreads} * (kPerThread / 50) * 2;
  EXPECT_GT(messages, 0u);
  // 16 callers on one stream with one message in flight: operations wait
  // for the one in flight and go together. Only a call that finds no other
  // in flight goes unary, which 16 busy callers rarely leave room for.
  EXPECT_LT(messages + unary, ops)
      << messages << " messages and " << unary << " unary calls for " << ops
      << " ops";
  EXPECT_LT(unary, ops / 2) << unary << " unary calls for " << ops << " ops";
}

// Asynchronous calls batch too: many GetAsync in flight at once from one
// thread travel in fewer Batch messages, each with its own answer.
TEST(ClientBatchingTest, AsyncCallsInFlightTogetherShareMessages) {
  auto server = testing::StartTestServer();
  ASSERT_TRUE(server.ok()) << server.status();
  Client c(testing::AddressOf(**server),
           ClientOptions{.default_timeout = milliseconds(10000)});
  constexpr int kKeys = 64, kRounds = 20;
  for (int k = 0; k < kKeys; ++k) {
    ASSERT_TRUE(c.Set(absl::StrCat("ab-", k), absl::StrCat("v", k)).ok());
  }
  const uint64_t unary_before = UnaryRequests(**server);
  std::atomic<int> failures{0};
  for (int round = 0; round < kRounds; ++round) {
    absl::BlockingCounter pending(kKeys);
    for (int k = 0; k < kKeys; ++k) {
      c.GetAsync(absl::StrCat("ab-", k),
                 [&, k](absl::StatusOr<std::optional<Entry>> e) {
                   if (!e.ok() || !e->has_value() ||
                       (*e)->value != absl::StrCat("v", k)) {
                     failures++;
                   }
                   pending.DecrementCount();
                 });
    }
    pending.Wait();
  }
  EXPECT_EQ(failures.load(), 0);
  const uint64_t messages = Requests(**server, service::RequestOp::kBatch);
  const uint64_t unary = UnaryRequests(**server) - unary_before;
  const uint64_t ops = uint64_t{kKeys} * kRounds;
  EXPECT_EQ(unary, 0u);
  EXPECT_GT(messages, 0u);
  EXPECT_LT(messages, ops / 2) << messages << " messages for " << ops << " ops";
}

// Callers released by one answer go on together: kChains asynchronous Gets,
// each issuing its chain's next Get from its callback, share one message per
// round. Before the stream waited for an answer's callbacks to finish, the
// first callback's Get found the stream idle and went alone and the others
// followed in a second message: two messages per round, 8 ops per message
// (the figure of the peers benchmark's 16 callers; docs/service_bench.md).
TEST(ClientBatchingTest, CallersReleasedByOneAnswerGoTogether) {
  auto server = testing::StartTestServer();
  ASSERT_TRUE(server.ok()) << server.status();
  Client c(testing::AddressOf(**server),
           ClientOptions{.default_timeout = milliseconds(10000),
                         .batch_streams = 1});
  ASSERT_TRUE(c.Set("chain", "v").ok());
  constexpr int kChains = 16, kRounds = 50;
  std::atomic<int> failures{0};
  absl::BlockingCounter chains_done(kChains);
  std::function<void(int)> next = [&](int left) {
    c.GetAsync("chain", [&, left](absl::StatusOr<std::optional<Entry>> e) {
      if (!e.ok() || !e->has_value()) failures++;
      if (left > 1) {
        next(left - 1);
      } else {
        chains_done.DecrementCount();
      }
    });
  };
  // The chains start from one answer's callback, so that they start
  // together (from the test's thread, the first could run rounds alone
  // before the others are issued).
  c.GetAsync("chain", [&](absl::StatusOr<std::optional<Entry>>) {
    for (int i = 0; i < kChains; ++i) next(kRounds);
  });
  chains_done.Wait();
  EXPECT_EQ(failures.load(), 0);
  const uint64_t messages = Requests(**server, service::RequestOp::kBatch);
  // The starter's message, then one per round.
  EXPECT_LE(messages, uint64_t{kRounds} + 1)
      << messages << " messages for " << kChains * kRounds + 1 << " ops";
}

// A lone synchronous caller (nothing else in flight on its client) is sent
// unary even with batching on: batching must not tax it (ClientOptions::
// batch_lone_calls), for every batchable method. A lone asynchronous call
// is batched (its answer comes on a callback thread either way).
TEST(ClientBatchingTest, LoneCallerGoesUnary) {
  auto server = testing::StartTestServer();
  ASSERT_TRUE(server.ok()) << server.status();
  Client c(testing::AddressOf(**server),
           ClientOptions{.default_timeout = milliseconds(10000),
                         .batch_streams = 1});
  ASSERT_TRUE(c.Set("lone", "v").ok());
  absl::StatusOr<std::optional<Entry>> e = c.Get("lone");
  ASSERT_TRUE(e.ok() && e->has_value()) << e.status();
  EXPECT_TRUE(c.Touch("lone", 0).ok());
  absl::Notification done;
  c.GetAsync("lone", [&](absl::StatusOr<std::optional<Entry>> r) {
    EXPECT_TRUE(r.ok() && r->has_value()) << r.status();
    done.Notify();
  });
  done.WaitForNotification();
  absl::StatusOr<bool> deleted = c.Delete("lone");
  ASSERT_TRUE(deleted.ok() && *deleted) << deleted.status();
  EXPECT_EQ(Requests(**server, service::RequestOp::kBatch), 1u);
  EXPECT_EQ(UnaryRequests(**server), 4u);
}

// A server whose Batch answers hold two values of 200 KiB at most
// (--max_value_bytes=262144 --max_response_bytes=524288), holding
// kBigKeys such values; and the key and value of each.
constexpr int kBigKeys = 8;
constexpr size_t kBigValueBytes = 200 << 10;

std::string BigKey(int i) { return absl::StrCat("big-", i); }
std::string BigValue(int i) {
  return std::string(kBigValueBytes, static_cast<char>('a' + i));
}

absl::StatusOr<std::unique_ptr<service::Server>> StartSmallAnswerServer() {
  service::ServerOptions o = testing::TestServerOptions();
  o.engine.max_value_bytes = 262144;
  o.stream_limits.max_response_bytes = 524288;
  auto server = service::Server::Start(o);
  if (!server.ok()) return server;
  Client setter(testing::AddressOf(**server),
                ClientOptions{.default_timeout = milliseconds(10000),
                              .batch_streams = 0});
  for (int i = 0; i < kBigKeys; ++i) {
    absl::StatusOr<uint64_t> v = setter.Set(BigKey(i), BigValue(i));
    if (!v.ok()) return v.status();
  }
  return server;
}

// The answers to Gets of BigKey(k) from several threads: how many were not
// BigValue(k), and the first of those.
class BigGetResults {
 public:
  void Check(int k, const absl::StatusOr<std::optional<Entry>>& e) {
    if (e.ok() && e->has_value() && (*e)->value == BigValue(k)) return;
    absl::MutexLock lock(&mu_);
    if (failures_++ == 0) {
      first_failure_ = e.ok() ? "wrong value" : e.status().ToString();
    }
  }
  int failures() {
    absl::MutexLock lock(&mu_);
    return failures_;
  }
  std::string first_failure() {
    absl::MutexLock lock(&mu_);
    return first_failure_;
  }

 private:
  absl::Mutex mu_;
  int failures_ ABSL_GUARDED_BY(mu_) = 0;
  std::string first_failure_ ABSL_GUARDED_BY(mu_);
};

// Issue 14: concurrent plain Gets coalesce into one Batch message whose
// answer may hold only --max_response_bytes of values; a Get whose value
// did not fit there is answered RESOURCE_EXHAUSTED by the server, and the
// client sends it again alone, so each caller, who asked for one value,
// gets it. Eight synchronous callers through one batching client.
TEST(ClientBatchingTest, GetsOverTheResponseLimitTogetherAllSucceed) {
  auto server = StartSmallAnswerServer();
  ASSERT_TRUE(server.ok()) << server.status();
  Client c(testing::AddressOf(**server),
           ClientOptions{.default_timeout = milliseconds(10000),
                         .batch_streams = 1});
  constexpr int kRounds = 20;
  BigGetResults results;
  std::vector<std::thread> threads;
  for (int t = 0; t < kBigKeys; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < kRounds; ++round) {
        results.Check(t, c.Get(BigKey(t)));
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(results.failures(), 0) << results.first_failure();
  EXPECT_GT(Requests(**server, service::RequestOp::kBatch), 0u);
}

// The same for asynchronous Gets, which are always batched: a burst of
// eight from one thread shares messages (the first goes alone, the others
// wait for it and go together), each callback gets its value.
TEST(ClientBatchingTest, AsyncGetsOverTheResponseLimitTogetherAllSucceed) {
  auto server = StartSmallAnswerServer();
  ASSERT_TRUE(server.ok()) << server.status();
  Client c(testing::AddressOf(**server),
           ClientOptions{.default_timeout = milliseconds(10000),
                         .batch_streams = 1});
  constexpr int kRounds = 10;
  BigGetResults results;
  for (int round = 0; round < kRounds; ++round) {
    absl::BlockingCounter pending(kBigKeys);
    for (int k = 0; k < kBigKeys; ++k) {
      c.GetAsync(BigKey(k), [&, k](absl::StatusOr<std::optional<Entry>> e) {
        results.Check(k, e);
        pending.DecrementCount();
      });
    }
    pending.Wait();
  }
  EXPECT_EQ(results.failures(), 0) << results.first_failure();
  EXPECT_GT(Requests(**server, service::RequestOp::kBatch), 0u);
}

INSTANTIATE_TEST_SUITE_P(Transport, ClientTest, kTransports, TransportName);

// A server that accepts connections and never answers: every kind of call
// must end with DEADLINE_EXCEEDED at its deadline, not hang; batched or not.
class ClientDeadlineTest : public ::testing::TestWithParam<Transport> {};

TEST_P(ClientDeadlineTest, UnresponsiveServerHitsTheDeadline) {
  testing::SilentListener silent;
  ASSERT_TRUE(silent.ok());
  Client c(silent.address(), OptionsFor(GetParam(), milliseconds(300)));

  absl::StatusOr<std::optional<Entry>> e = c.Get("k");
  EXPECT_TRUE(absl::IsDeadlineExceeded(e.status())) << e.status();
  absl::StatusOr<uint64_t> v =
      c.Set("k", "v", {}, CallOptions{.timeout = milliseconds(200)});
  EXPECT_TRUE(absl::IsDeadlineExceeded(v.status())) << v.status();

  absl::BlockingCounter done(1);
  absl::Status async_status;
  c.GetAsync("k", [&](absl::StatusOr<std::optional<Entry>> r) {
    async_status = r.status();
    done.DecrementCount();
  });
  done.Wait();
  EXPECT_TRUE(absl::IsDeadlineExceeded(async_status)) << async_status;

  std::unique_ptr<Pipeline> p =
      c.OpenPipeline(PipelineOptions{.stream_timeout = milliseconds(300)});
  absl::Status op_status;
  ASSERT_TRUE(p->Get("k", [&](absl::StatusOr<std::optional<Entry>> r) {
                 op_status = r.status();
               }).ok());
  absl::Status closed = p->Close();
  EXPECT_TRUE(absl::IsDeadlineExceeded(closed)) << closed;
  EXPECT_TRUE(absl::IsDeadlineExceeded(op_status)) << op_status;
}

INSTANTIATE_TEST_SUITE_P(Transport, ClientDeadlineTest, kTransports,
                         TransportName);

TEST(ClientPipelineCancelTest, CancelEndsAPipelineThatGetsNoAnswer) {
  testing::SilentListener silent;
  ASSERT_TRUE(silent.ok());
  Client c(silent.address());
  // No stream deadline: only Cancel can end this stream.
  std::unique_ptr<Pipeline> p = c.OpenPipeline();
  absl::Status op_status;
  ASSERT_TRUE(p->Get("k", [&](absl::StatusOr<std::optional<Entry>> r) {
                 op_status = r.status();
               }).ok());
  p->Cancel();
  absl::Status closed = p->Close();
  EXPECT_TRUE(absl::IsCancelled(closed)) << closed;
  EXPECT_TRUE(absl::IsCancelled(op_status)) << op_status;
}

class ClientErrorTest : public ::testing::TestWithParam<Transport> {};

TEST_P(ClientErrorTest, NothingListeningIsUnavailable) {
  // Port 1 on loopback: connection refused, so fail-fast calls return
  // UNAVAILABLE at once instead of waiting for the deadline.
  Client c("127.0.0.1:1", OptionsFor(GetParam(), milliseconds(10000)));
  absl::StatusOr<std::optional<Entry>> e = c.Get("k");
  EXPECT_TRUE(absl::IsUnavailable(e.status())) << e.status();
  absl::Status ready = c.WaitForReady(milliseconds(100));
  EXPECT_TRUE(absl::IsUnavailable(ready)) << ready;
}

INSTANTIATE_TEST_SUITE_P(Transport, ClientErrorTest, kTransports,
                         TransportName);

}  // namespace
}  // namespace furrballs::client
