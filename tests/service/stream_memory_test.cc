// The server binary's memory while clients stop reading (issue 14 item 4):
// a Batch stream and a Pipeline stream that keep writing Gets of a 1 MiB
// value and never read their answers. Each stream may hold
// --max_stream_bytes on the server; the test checks that the server's
// resident memory grows by no more than that bound for the two streams plus
// a fixed allowance for gRPC's buffers, while an unbounded server would
// build hundreds of MiB of answers here.
//
// Usage: stream_memory_test <furrballs_server>.
#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "furrballs/v1/furrballs.grpc.pb.h"
#include "tests/common/server_binary.h"
#include "tests/common/server_process.h"

namespace furrballs {
namespace {

namespace v1 = ::furrballs::v1;
using test_support::ServerProcess;

using test_support::server_binary;

constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kStreamBound = 8 * kMiB;  // --max_stream_bytes
// gRPC's own buffers (its transport's read and write buffers and slices,
// allocator caches on the threads that serve the streams), measured at
// 10-20 MiB here; an unbounded server grows by 400 MiB or more.
constexpr size_t kAllowance = 48 * kMiB;

// The process's resident set in bytes (VmRSS), 0 if unreadable.
size_t ResidentBytes(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) {
      return std::stoull(line.substr(6)) * 1024;  // "VmRSS:  1234 kB"
    }
  }
  return 0;
}

TEST(StreamMemoryTest, ClientsThatStopReadingGrowTheServerOnlyByTheBound) {
  ServerProcess server(server_binary,
                       {"--metrics_address=", "--memory_mb=64",
                        "--max_stream_bytes=" + std::to_string(kStreamBound)});
  std::string why;
  ASSERT_TRUE(server.Start(0, &why)) << why;
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(16 << 20);
  auto channel = grpc::CreateCustomChannel(
      server.address(), grpc::InsecureChannelCredentials(), args);
  auto stub = v1::Cache::NewStub(channel);

  v1::SetRequest set;
  set.set_key("v");
  set.set_value(std::string(kMiB, 'x'));
  {
    grpc::ClientContext ctx;
    v1::SetResponse response;
    ASSERT_TRUE(stub->Set(&ctx, set, &response).ok());
  }
  v1::BatchRequest gets;  // 4 MiB of answer per message
  for (int i = 0; i < 4; ++i) gets.add_ops()->mutable_get()->set_key("v");
  v1::PipelineRequest get;
  get.mutable_get()->set_key("v");

  // Warm up both paths (gRPC's and the allocator's first buffers), reading
  // the answers, before the baseline.
  for (int round = 0; round < 3; ++round) {
    grpc::ClientContext batch_ctx;
    auto batch = stub->Batch(&batch_ctx);
    grpc::ClientContext pipe_ctx;
    auto pipe = stub->Pipeline(&pipe_ctx);
    for (int i = 0; i < 4; ++i) {
      ASSERT_TRUE(batch->Write(gets));
      ASSERT_TRUE(pipe->Write(get));
    }
    batch->WritesDone();
    pipe->WritesDone();
    v1::BatchResponse batch_answer;
    while (batch->Read(&batch_answer)) ASSERT_EQ(batch_answer.code(), 0);
    v1::PipelineResponse pipe_answer;
    while (pipe->Read(&pipe_answer)) ASSERT_EQ(pipe_answer.code(), 0);
    ASSERT_TRUE(batch->Finish().ok());
    ASSERT_TRUE(pipe->Finish().ok());
  }
  const size_t baseline = ResidentBytes(server.pid());
  ASSERT_GT(baseline, 0u);

  // 100 Batch messages (400 MiB of answers) and 400 Pipeline Gets (400
  // MiB), written and never read.
  grpc::ClientContext batch_ctx;
  auto batch = stub->Batch(&batch_ctx);
  grpc::ClientContext pipe_ctx;
  auto pipe = stub->Pipeline(&pipe_ctx);
  std::thread batch_writer([&] {
    for (int m = 0; m < 100 && batch->Write(gets); ++m) {
    }
  });
  std::thread pipe_writer([&] {
    for (int i = 0; i < 400 && pipe->Write(get); ++i) {
    }
  });
  // Watch the server for two seconds: unbounded, it builds the answers
  // within a fraction of that.
  size_t peak = baseline;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (std::chrono::steady_clock::now() < until) {
    peak = std::max(peak, ResidentBytes(server.pid()));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const size_t growth = peak - baseline;
  std::printf("server RSS: baseline %zu MiB, peak %zu MiB, growth %zu MiB "
              "(bound %zu MiB per stream, 2 streams, allowance %zu MiB)\n",
              baseline / kMiB, peak / kMiB, growth / kMiB,
              kStreamBound / kMiB, kAllowance / kMiB);
  EXPECT_LE(growth, 2 * kStreamBound + kAllowance);

  // The stuck streams stall only themselves.
  {
    grpc::ClientContext ctx;
    v1::GetRequest request;
    request.set_key("v");
    v1::GetResponse response;
    ASSERT_TRUE(stub->Get(&ctx, request, &response).ok());
    EXPECT_TRUE(response.found());
  }
  batch_ctx.TryCancel();
  pipe_ctx.TryCancel();
  batch_writer.join();
  pipe_writer.join();
  batch->Finish();
  pipe->Finish();
  EXPECT_TRUE(server.Stop());
}

}  // namespace
}  // namespace furrballs
