// Checks that the empty-handler service answers every furrballs.v1 RPC with
// OK and a correctly shaped empty answer, in process and as the
// //bench/service:empty_server binary, and that its Batch stream answers
// every op of every message in order, through the generated stub and through
// the shipped C++ client's automatic batching.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <absl/synchronization/mutex.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "bench/service/empty_service.h"
#include "clients/cpp/client.h"
#include "service/server.h"

namespace furrballs::bench {
namespace {

const char* g_empty_server_binary = nullptr;

void ExpectServes(client::Client& client) {
  auto got = client.Get("k");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_FALSE(got->has_value());
  auto set = client.Set("k", "v");
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_TRUE(client.Delete("k").ok());
  EXPECT_TRUE(client.Touch("k", 0).ok());
  auto multi = client.MultiGet(std::vector<std::string>{"a", "b", "c"});
  ASSERT_TRUE(multi.ok()) << multi.status();
  ASSERT_EQ(multi->size(), 3u);
  for (const auto& e : *multi) {
    ASSERT_TRUE(e.ok()) << e.status();
    EXPECT_FALSE(e->has_value());
  }
  auto multi_set = client.MultiSet(std::vector<client::SetItem>{
      {.key = "a", .value = "1"}, {.key = "b", .value = "2"}});
  ASSERT_TRUE(multi_set.ok()) << multi_set.status();
  ASSERT_EQ(multi_set->size(), 2u);
  for (const auto& r : *multi_set) EXPECT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(client.Stats().ok());
}

// EmptyCacheService served in process on a free loopback port by
// BuildGrpcServer, as empty_server serves it; shut down when destroyed (its
// clients' streams must be closed by then).
class InProcessServer {
 public:
  explicit InProcessServer(
      size_t max_pipeline_in_flight = kDefaults.max_pipeline_in_flight,
      size_t max_batch_ops = kDefaults.max_batch_ops)
      : service_(max_pipeline_in_flight, max_batch_ops) {
    service::ServerOptions options;
    options.listen_address = "127.0.0.1:0";
    server_ = service::BuildGrpcServer(options, &service_, &port_);
  }
  ~InProcessServer() {
    if (server_ != nullptr) server_->Shutdown();
  }

  bool ok() const { return server_ != nullptr; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  const EmptyCacheService& service() const { return service_; }

 private:
  static inline const service::CacheService::StreamLimits kDefaults =
      service::ServerOptions().stream_limits;

  EmptyCacheService service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

TEST(EmptyServiceTest, AnswersEveryRpc) {
  InProcessServer server;
  ASSERT_TRUE(server.ok());
  client::Client client(server.address());
  ExpectServes(client);
}

TEST(EmptyServiceTest, PipelineEchoesIdsBeyondTheInFlightLimit) {
  // A small limit, so that reading pauses and resumes many times.
  InProcessServer server(/*max_pipeline_in_flight=*/4);
  ASSERT_TRUE(server.ok());
  client::Client client(server.address());
  constexpr int kOps = 1000;
  absl::Mutex mu;
  std::vector<uint64_t> ids;
  int ok = 0;
  {
    auto pipeline = client.OpenPipeline({.max_in_flight = 64});
    for (int i = 0; i < kOps; ++i) {
      v1::PipelineRequest request;
      if (i % 2 == 0) {
        request.mutable_get()->set_key("k");
      } else {
        request.mutable_set()->set_key("k");
      }
      ASSERT_TRUE(pipeline
                      ->Submit(std::move(request),
                               [&, i](absl::StatusOr<v1::PipelineResponse> r) {
                                 absl::MutexLock lock(&mu);
                                 if (!r.ok()) return;
                                 ids.push_back(r->id());
                                 const bool right_kind =
                                     i % 2 == 0 ? r->has_get() : r->has_set();
                                 if (right_kind) ++ok;
                               })
                      .ok());
    }
    ASSERT_TRUE(pipeline->Close().ok());
  }
  absl::MutexLock lock(&mu);
  EXPECT_EQ(ok, kOps);
  ASSERT_EQ(ids.size(), static_cast<size_t>(kOps));
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(std::unique(ids.begin(), ids.end()), ids.end());
}

TEST(EmptyServiceTest, BatchAnswersEveryOpInOrderAndRefusesTooManyOps) {
  InProcessServer server(
      service::ServerOptions().stream_limits.max_pipeline_in_flight,
      /*max_batch_ops=*/8);
  ASSERT_TRUE(server.ok());
  auto stub = v1::Cache::NewStub(grpc::CreateChannel(
      server.address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  auto stream = stub->Batch(&ctx);

  v1::BatchRequest mixed;
  mixed.set_id(7);
  mixed.add_ops()->mutable_get()->set_key("g");
  mixed.add_ops()->mutable_set()->set_key("s");
  mixed.add_ops()->mutable_delete_()->set_key("d");
  mixed.add_ops()->mutable_touch()->set_key("t");
  mixed.add_ops();  // no kind
  for (int i = 0; i < mixed.ops_size(); ++i) {
    mixed.mutable_ops(i)->set_id(i + 1);
  }
  ASSERT_TRUE(stream->Write(mixed));
  v1::BatchResponse answer;
  ASSERT_TRUE(stream->Read(&answer));
  EXPECT_EQ(answer.id(), 7u);
  EXPECT_EQ(answer.code(), 0);
  ASSERT_EQ(answer.results_size(), 5);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(answer.results(i).id(), i + 1u);
  EXPECT_TRUE(answer.results(0).get().found());
  EXPECT_EQ(answer.results(0).get().value().size(),
            EmptyCacheService::kValueBytes);
  EXPECT_EQ(answer.results(1).set().version(), 1u);
  EXPECT_TRUE(answer.results(2).delete_().deleted());
  EXPECT_TRUE(answer.results(3).has_touch());
  EXPECT_EQ(answer.results(4).code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(answer.results(4).result_case(),
            v1::PipelineResponse::RESULT_NOT_SET);

  v1::BatchRequest big;
  big.set_id(8);
  for (int i = 0; i < 9; ++i) big.add_ops()->mutable_get()->set_key("k");
  ASSERT_TRUE(stream->Write(big));
  ASSERT_TRUE(stream->Read(&answer));
  EXPECT_EQ(answer.id(), 8u);
  EXPECT_EQ(answer.code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(answer.message(),
            "Batch: 9 operations, over the limit of 8 (--max_batch_ops)");
  EXPECT_EQ(answer.results_size(), 0);

  // The stream goes on after a refusal; many messages written ahead of the
  // reads are each answered once, with their ids.
  constexpr int kMessages = 100;
  std::thread writer([&] {
    for (int m = 0; m < kMessages; ++m) {
      v1::BatchRequest request;
      request.set_id(100 + m);
      for (int i = 0; i < 8; ++i) {
        request.add_ops()->mutable_get()->set_key("k");
      }
      if (!stream->Write(request)) return;
    }
    stream->WritesDone();
  });
  std::vector<bool> seen(kMessages);
  int answers = 0;
  while (stream->Read(&answer)) {
    const uint64_t m = answer.id() - 100;
    ASSERT_LT(m, uint64_t{kMessages});
    EXPECT_FALSE(seen[m]);
    seen[m] = true;
    EXPECT_EQ(answer.results_size(), 8);
    ++answers;
  }
  writer.join();
  grpc::Status status = stream->Finish();
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(answers, kMessages);
  EXPECT_EQ(server.service().batch_messages(), uint64_t{kMessages} + 2);
}

TEST(EmptyServiceTest, TheShippedClientBatchesAgainstIt) {
  InProcessServer server;
  ASSERT_TRUE(server.ok());
  client::ClientOptions client_options;
  client_options.batch_lone_calls = true;  // every call in a Batch message
  client_options.default_timeout = std::chrono::seconds(10);
  // Destroyed before the server: it closes its Batch stream, which the
  // server's Shutdown waits for.
  client::Client client(server.address(), client_options);
  constexpr int kCallers = 8;
  constexpr int kCalls = 200;
  std::vector<int> good(kCallers);
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; ++c) {
    callers.emplace_back([&, c] {
      for (int i = 0; i < kCalls; ++i) {
        auto got = client.Get("k" + std::to_string(i));
        if (got.ok() && got->has_value() &&
            (*got)->value.size() == EmptyCacheService::kValueBytes) {
          ++good[c];
        }
      }
    });
  }
  for (std::thread& t : callers) t.join();
  for (int c = 0; c < kCallers; ++c) EXPECT_EQ(good[c], kCalls) << c;
  auto set = client.Set("k", "v");
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(*set, 1u);
  EXPECT_TRUE(client.Touch("k", 0).ok());
  const uint64_t messages = server.service().batch_messages();
  EXPECT_GE(messages, 2u);
  EXPECT_LE(messages, uint64_t{kCallers * kCalls} + 2);
}

TEST(EmptyServerBinaryTest, PrintsItsPortServesAndStopsOnSigterm) {
  ASSERT_NE(g_empty_server_binary, nullptr);
  int out[2];
  ASSERT_EQ(pipe(out), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    dup2(out[1], STDOUT_FILENO);
    close(out[0]);
    close(out[1]);
    execl(g_empty_server_binary, g_empty_server_binary,
          "--address=127.0.0.1:0", static_cast<char*>(nullptr));
    _exit(127);
  }
  close(out[1]);
  FILE* stdout_of_server = fdopen(out[0], "r");
  char line[256] = {};
  ASSERT_NE(fgets(line, sizeof line, stdout_of_server), nullptr);
  int port = 0;
  ASSERT_EQ(std::sscanf(line, "empty_server: listening on 127.0.0.1:%d", &port),
            1)
      << line;
  {
    client::Client client("127.0.0.1:" + std::to_string(port));
    ExpectServes(client);
  }
  ASSERT_EQ(kill(pid, SIGTERM), 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  fclose(stdout_of_server);
}

}  // namespace
}  // namespace furrballs::bench

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  if (argc > 1) furrballs::bench::g_empty_server_binary = argv[1];
  return RUN_ALL_TESTS();
}
