// empty_server: furrballs.v1.Cache with empty handlers (empty_service.h),
// built by service/server.h's BuildGrpcServer with the Furrballs server's
// default limits, health and reflection, so that a client measures the gRPC
// transport alone. The benchmarks start it as a separate process.
//
// Once listening it prints one line to stdout,
//   empty_server: listening on 127.0.0.1:<port>
// (the port the OS picked when --address ends in :0), and it stops on
// SIGTERM or SIGINT. With --metrics_address it serves, like furrballs_server,
// furrballs_requests_total{op="batch",code="OK"}: the Batch messages it
// answered, which the benchmarks divide key operations by.
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>

#include <absl/flags/flag.h>
#include <absl/flags/parse.h>
#include <absl/flags/usage.h>

#include "bench/service/empty_service.h"
#include "metrics/metrics_exporter.h"
#include "service/callback_threads.h"
#include "service/server.h"

ABSL_FLAG(std::string, address, "127.0.0.1:0",
          "host:port to listen on; port 0 picks a free port, printed on "
          "stdout.");
ABSL_FLAG(std::string, metrics_address, "",
          "host:port to serve /metrics on (furrballs_requests_total for the "
          "Batch messages answered); empty: no metrics.");
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
      options.stream_limits.max_pipeline_in_flight,
      options.stream_limits.max_batch_ops);
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
  std::unique_ptr<furrballs::metrics::MetricsExporter> metrics;
  if (const std::string address = absl::GetFlag(FLAGS_metrics_address);
      !address.empty()) {
    furrballs::metrics::StatsSources sources;
    sources.process = false;
    sources.requests = [&service] {
      furrballs::metrics::RequestCounts counts;
      counts.code_names = {"OK"};
      counts.ops.push_back({.name = "batch",
                            .by_code = {service.batch_messages()},
                            .latency_buckets = {},
                            .latency_sum_ns = 0});
      return counts;
    };
    auto started =
        furrballs::metrics::MetricsExporter::Start(address, std::move(sources));
    if (!started.ok()) {
      std::fprintf(stderr, "empty_server: %s\n",
                   std::string(started.status().message()).c_str());
      return 1;
    }
    metrics = std::move(*started);
  }
  server->GetHealthCheckService()->SetServingStatus(true);
  const std::string& address = options.listen_address;
  const std::string host = address.substr(0, address.rfind(':'));
  std::printf("empty_server: listening on %s:%d\n", host.c_str(), port);
  std::fflush(stdout);

  int signal = 0;
  sigwait(&stop_signals, &signal);
  metrics.reset();
  callback_threads.reset();
  // Streams stay open as long as their clients keep them (a Batch stream
  // for a client's life): after a second they are cancelled.
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  server->Wait();
  return 0;
}
