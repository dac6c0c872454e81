// empty_server: furrballs.v1.Cache with empty handlers (empty_service.h),
// built by service/server.h's BuildGrpcServer with the Furrballs server's
// default limits, health and reflection, so that a client measures the gRPC
// transport alone. The benchmarks start it as a separate process.
//
// Once listening it prints one line to stdout,
//   empty_server: listening on 127.0.0.1:<port>
// (the port the OS picked when --address ends in :0), and it stops on
// SIGTERM or SIGINT.
#include <signal.h>

#include <cstdio>
#include <string>

#include <absl/flags/flag.h>
#include <absl/flags/parse.h>
#include <absl/flags/usage.h>

#include "bench/service/empty_service.h"
#include "service/callback_threads.h"
#include "service/server.h"

ABSL_FLAG(std::string, address, "127.0.0.1:0",
          "host:port to listen on; port 0 picks a free port, printed on "
          "stdout.");
ABSL_FLAG(int, grpc_callback_threads, -1,
          "gRPC callback threads left serving, the others parked; as "
          "furrballs_server's flag of the same name and default, so that the "
          "two differ only in their handlers. -1: automatic (1 on at most 2 "
          "cores with gRPC 1.51, else gRPC's own number); 0: gRPC's own "
          "number.");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "furrballs.v1.Cache with empty handlers: the gRPC transport's limit for "
      "the service benchmarks (docs/service_bench.md).");
  absl::ParseCommandLine(argc, argv);

  // Only sigwait below receives the stop signals; gRPC's threads inherit the
  // mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  furrballs::service::ServerOptions options;
  options.listen_address = absl::GetFlag(FLAGS_address);
  furrballs::bench::EmptyCacheService service(
      options.stream_limits.max_pipeline_in_flight);
  int port = 0;
  std::unique_ptr<grpc::Server> server =
      furrballs::service::BuildGrpcServer(options, &service, &port);
  if (server == nullptr || port == 0) {
    std::fprintf(stderr, "empty_server: could not listen on %s\n",
                 options.listen_address.c_str());
    return 1;
  }
  std::unique_ptr<furrballs::service::CallbackThreadLimit> callback_threads;
  int threads = absl::GetFlag(FLAGS_grpc_callback_threads);
  if (threads == -1) threads = furrballs::service::CallbackThreadLimit::Automatic();
  if (threads > 0) {
    auto limit =
        furrballs::service::CallbackThreadLimit::Start(server.get(), threads);
    if (!limit.ok()) {
      std::fprintf(stderr, "empty_server: %s\n",
                   std::string(limit.status().message()).c_str());
      return 1;
    }
    callback_threads = std::move(*limit);
  }
  server->GetHealthCheckService()->SetServingStatus(true);
  const std::string& address = options.listen_address;
  const std::string host = address.substr(0, address.rfind(':'));
  std::printf("empty_server: listening on %s:%d\n", host.c_str(), port);
  std::fflush(stdout);

  int signal = 0;
  sigwait(&stop_signals, &signal);
  callback_threads.reset();
  server->Shutdown();
  server->Wait();
  return 0;
}
