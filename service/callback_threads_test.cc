// Tests of CallbackThreadLimit against a real gRPC server on loopback: the
// threads over the limit are parked, the rest serve, and destroying the limit
// gives them back.
#include "service/callback_threads.h"

#include <memory>
#include <set>
#include <thread>
#include <vector>

#include <absl/strings/str_cat.h>
#include <absl/synchronization/blocking_counter.h>
#include <absl/synchronization/mutex.h>
#include <gtest/gtest.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/generic/async_generic_service.h>

namespace furrballs::service {
namespace {

// A started server with gRPC's default health service (what the parking
// calls ask) and a client channel to it over TCP.
class CallbackThreadLimitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::EnableDefaultHealthCheckService(true);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port);
    // gRPC starts no server without a service of the builder's own.
    builder.RegisterCallbackGenericService(&others_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    channel_ = grpc::CreateChannel(absl::StrCat("127.0.0.1:", port),
                                   grpc::InsecureChannelCredentials());
  }

  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown();
  }

  // Sends `n` health checks at once and waits for them; returns the
  // threads their completion callbacks ran on, and counts the failures.
  std::set<std::thread::id> CallbackThreadsOf(int n, int* failures) {
    grpc::GenericStub stub(channel_);
    struct Call {
      grpc::ClientContext ctx;
      grpc::ByteBuffer request, response;
    };
    std::vector<Call> calls(n);
    absl::Mutex mu;
    std::set<std::thread::id> threads;
    absl::BlockingCounter done(n);
    *failures = 0;
    for (Call& c : calls) {
      grpc::Slice empty;
      c.request = grpc::ByteBuffer(&empty, 1);
      stub.UnaryCall(&c.ctx, "/grpc.health.v1.Health/Check",
                     grpc::StubOptions(), &c.request, &c.response,
                     [&](const grpc::Status& s) {
                       {
                         absl::MutexLock lock(&mu);
                         threads.insert(std::this_thread::get_id());
                         if (!s.ok()) ++*failures;
                       }
                       done.DecrementCount();
                     });
    }
    done.Wait();
    return threads;
  }

  grpc::CallbackGenericService others_;
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
};

TEST_F(CallbackThreadLimitTest, OneThreadServesEveryCallbackUntilReleased) {
  ASSERT_GE(CallbackThreadLimit::GrpcCallbackThreads(), 2);
  auto limit = CallbackThreadLimit::Start(server_.get(), 1);
  ASSERT_TRUE(limit.ok()) << limit.status();
  EXPECT_EQ((*limit)->parked(), CallbackThreadLimit::GrpcCallbackThreads() - 1);
  // gRPC's callback threads serve the process's clients too: with the others
  // parked, every answer comes on the one left (and comes: the server and
  // the client are served by it).
  int failures = 0;
  EXPECT_EQ(CallbackThreadsOf(200, &failures).size(), 1u);
  EXPECT_EQ(failures, 0);
  // Released, every thread serves again (a thread left parked would hang
  // gRPC's join of them when the test's server and channel go).
  limit->reset();
  CallbackThreadsOf(200, &failures);
  EXPECT_EQ(failures, 0);
}

TEST_F(CallbackThreadLimitTest, GrpcsOwnNumberParksNothing) {
  auto limit = CallbackThreadLimit::Start(
      server_.get(), CallbackThreadLimit::GrpcCallbackThreads());
  ASSERT_TRUE(limit.ok()) << limit.status();
  EXPECT_EQ((*limit)->parked(), 0);
}

TEST_F(CallbackThreadLimitTest, ZeroThreadsIsRefused) {
  auto limit = CallbackThreadLimit::Start(server_.get(), 0);
  EXPECT_EQ(limit.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace furrballs::service
