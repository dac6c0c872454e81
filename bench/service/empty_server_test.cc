// Checks that the empty-handler service answers every furrballs.v1 RPC with
// OK and a correctly shaped empty answer, in process and as the
// //bench/service:empty_server binary.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <absl/synchronization/mutex.h>
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

TEST(EmptyServiceTest, AnswersEveryRpc) {
  service::ServerOptions options;
  options.listen_address = "127.0.0.1:0";
  EmptyCacheService service(options.stream_limits.max_pipeline_in_flight);
  int port = 0;
  auto server = service::BuildGrpcServer(options, &service, &port);
  ASSERT_NE(server, nullptr);
  client::Client client("127.0.0.1:" + std::to_string(port));
  ExpectServes(client);
  server->Shutdown();
}

TEST(EmptyServiceTest, PipelineEchoesIdsBeyondTheInFlightLimit) {
  service::ServerOptions options;
  options.listen_address = "127.0.0.1:0";
  // A small limit, so that reading pauses and resumes many times.
  EmptyCacheService service(/*max_pipeline_in_flight=*/4);
  int port = 0;
  auto server = service::BuildGrpcServer(options, &service, &port);
  ASSERT_NE(server, nullptr);
  client::Client client("127.0.0.1:" + std::to_string(port));
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
  server->Shutdown();
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
