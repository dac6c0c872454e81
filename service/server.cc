#include "service/server.h"

#include <chrono>
#include <thread>

#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/resource_quota.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>

#include <absl/status/status.h>
#include <absl/strings/str_cat.h>
#include <absl/synchronization/mutex.h>

#include "service/reflection.h"

namespace furrballs::service {

std::unique_ptr<grpc::Server> BuildGrpcServer(const ServerOptions& options,
                                              grpc::Service* service,
                                              int* port) {
  grpc::EnableDefaultHealthCheckService(true);
  // Debian's Abseil is built without NDEBUG, so absl::Mutex, which gRPC
  // 1.51 locks several times per call, checks every acquisition against a
  // process-wide lock-order graph (GraphCycles, behind a global spin lock):
  // a debugging aid that cost a unary Get 15% of its server CPU (ghz, 16
  // calls: median 19.2 -> 16.4 us/call over 7 interleaved rounds). Our own
  // locks are pthread's (engine/common/sync.h) and unaffected.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(
      options.listen_address,
      MakeServerCredentials(options.tls, options.security_reload_interval),
      port);
  builder.RegisterService(service);
  builder.RegisterService(ServedReflection());
  builder.SetMaxReceiveMessageSize(static_cast<int>(options.max_message_bytes));
  builder.SetMaxSendMessageSize(static_cast<int>(options.max_message_bytes));
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS,
                             options.max_concurrent_streams);
  builder.AddChannelArgument(
      GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
      static_cast<int>(options.keepalive_min_ping_interval.count()));
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 3);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  // gRPC sets SO_REUSEPORT by default: a second server on a busy port would
  // then start, and the kernel would split new connections between two
  // caches with different contents. Without it the bind fails and so does
  // the start.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  if (!options.grpc_bdp_probe) {
    // With the probe on, gRPC 1.51 announces windows of up to 16 MiB while
    // its quota is below 20% used (chttp2's flow_control.cc), which
    // MultiSets waiting for the request-bytes cap could fill unread. Off,
    // the window is kStreamWindowBytes (server.h says why that size).
    builder.AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
    builder.AddChannelArgument(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES,
                               kStreamWindowBytes);
  }
  if (options.grpc_memory_bytes != 0) {
    grpc::ResourceQuota quota("furrballs");
    quota.Resize(options.grpc_memory_bytes);
    builder.SetResourceQuota(quota);
  }
  return builder.BuildAndStart();
}

absl::StatusOr<std::unique_ptr<Server>> Server::Start(
    const ServerOptions& options) {
  std::unique_ptr<Server> server(new Server(options));
  CacheService::StreamLimits stream_limits = options.stream_limits;
  stream_limits.max_message_bytes = options.max_message_bytes;
  if (std::string why = CacheService::CheckStreamLimits(
          stream_limits, options.engine.max_value_bytes);
      !why.empty()) {
    return absl::InvalidArgumentError(why);
  }
  // Bad security files fail here, before the engine takes its memory.
  absl::StatusOr<std::string> tls = CheckTlsFiles(options.tls);
  if (!tls.ok()) return tls.status();
  server->tls_summary_ = std::move(*tls);
  if (!options.auth_token_file.empty()) {
    auto auth = TokenAuthenticator::Open(options.auth_token_file,
                                         options.security_reload_interval);
    if (!auth.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--auth_token_file: ", auth.status().message()));
    }
    server->auth_ = std::move(*auth);
  }
  auto engine = FurrBall::Open(options.engine);
  if (!engine.ok()) return engine.status();
  server->engine_ = std::move(*engine);
  server->dispatcher_ =
      std::make_unique<Dispatcher>(server->engine_.get(), options.dispatch);
  server->service_ = std::make_unique<CacheService>(
      server->engine_.get(), server->dispatcher_.get(), stream_limits,
      server->auth_.get());

  server->server_ =
      BuildGrpcServer(options, server->service_.get(), &server->port_);
  if (server->server_ == nullptr || server->port_ == 0) {
    return absl::UnavailableError(absl::StrCat(
        "could not listen on ", options.listen_address,
        " (address in use, or not a valid host:port)"));
  }
  if (!options.health_address.empty()) {
    // The default health service is all it serves: everything else is
    // UNIMPLEMENTED, reflection included (it would describe a Cache service
    // this port does not serve). A busy port fails the start, as for
    // listen_address.
    grpc::ServerBuilder builder;
    builder.AddListeningPort(options.health_address,
                             grpc::InsecureServerCredentials(),
                             &server->health_port_);
    builder.RegisterCallbackGenericService(&server->health_others_);
    builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
    server->health_server_ = builder.BuildAndStart();
    if (server->health_server_ == nullptr || server->health_port_ == 0) {
      return absl::UnavailableError(absl::StrCat(
          "could not listen on --health_address ", options.health_address,
          " (address in use, or not a valid host:port)"));
    }
  }
  if (options.grpc_callback_threads > 0) {
    auto limit = CallbackThreadLimit::Start(server->server_.get(),
                                            options.grpc_callback_threads);
    if (!limit.ok()) return limit.status();
    server->callback_threads_ = std::move(*limit);
  }
  server->SetServing(true);
  server->service_->SetReady(true);
  return server;
}

void Server::SetServing(bool serving) {
  for (grpc::Server* s : {server_.get(), health_server_.get()}) {
    if (s == nullptr) continue;
    grpc::HealthCheckServiceInterface* health = s->GetHealthCheckService();
    health->SetServingStatus(furrballs::v1::Cache::service_full_name(),
                             serving);
    health->SetServingStatus(serving);
  }
}

void Server::BeginDrain() {
  if (server_ == nullptr) return;
  SetServing(false);
  service_->SetReady(false);
}

void Server::Shutdown() {
  if (stopped_ || server_ == nullptr) return;
  stopped_ = true;
  // Every thread helps the drain, and none may be parked when gRPC joins
  // them (the last server or channel of the process releasing them).
  callback_threads_.reset();
  BeginDrain();
  if (options_.shutdown_drain.count() > 0) {
    std::this_thread::sleep_for(options_.shutdown_drain);
  }
  // In-flight RPCs keep running: the dispatcher still accepts their ops until
  // the gRPC server stopped (its Shutdown waits for every callback RPC to
  // finish, or cancels them at the deadline).
  server_->Shutdown(std::chrono::system_clock::now() +
                    options_.shutdown_deadline);
  dispatcher_->Stop();
  dispatcher_->WaitIdle();
  server_->Wait();
  // Probes saw NOT_SERVING until the main listener closed; health calls
  // (a Watch can last) are cancelled at once.
  if (health_server_ != nullptr) {
    health_server_->Shutdown(std::chrono::system_clock::now());
  }
}

Server::~Server() {
  Shutdown();
  // Order matters: the service and dispatcher reference the engine.
  health_server_.reset();
  server_.reset();
  service_.reset();
  dispatcher_.reset();
  engine_.reset();
}

}  // namespace furrballs::service
