// Tests of the C++ client's Batcher on its own, against a real in-process
// server on loopback: what it keeps per operation.
#include "clients/cpp/batcher.h"

#include <atomic>
#include <chrono>
#include <memory>

#include <absl/strings/str_cat.h>
#include <absl/synchronization/blocking_counter.h>
#include <gtest/gtest.h>
#include <grpcpp/create_channel.h>

#include "clients/cpp/test_server.h"

namespace furrballs::client::internal {
namespace {

namespace v1 = ::furrballs::v1;

// An answered operation leaves the deadline watcher's set at once: the set
// holds operations in flight, not every operation of the last timeout
// (which at 100,000 ops/s and a 10 s timeout was 1 M entries, ~90 MB).
TEST(BatcherTest, AnsweredOperationsLeaveTheDeadlineWatcher) {
  auto server = testing::StartTestServer();
  ASSERT_TRUE(server.ok()) << server.status();
  std::shared_ptr<grpc::Channel> channel = grpc::CreateChannel(
      testing::AddressOf(**server), grpc::InsecureChannelCredentials());
  std::unique_ptr<v1::Cache::Stub> stub = v1::Cache::NewStub(channel);
  {
    Batcher batcher(stub.get(), Batcher::Options{});
    constexpr int kOps = 1000;
    std::atomic<int> ok{0};
    absl::BlockingCounter answered(kOps);
    const auto deadline =
        std::chrono::system_clock::now() + std::chrono::minutes(1);
    for (int i = 0; i < kOps; ++i) {
      v1::PipelineRequest op;
      op.mutable_get()->set_key(absl::StrCat("k", i));
      batcher.SubmitWithDeadline(
          std::move(op), deadline,
          [&](absl::StatusOr<v1::PipelineResponse> r) {
            if (r.ok()) ok++;
            answered.DecrementCount();
          });
    }
    answered.Wait();
    EXPECT_EQ(ok.load(), kOps);
    EXPECT_EQ(batcher.deadlines_watched(), 0u);
  }
}

}  // namespace
}  // namespace furrballs::client::internal
