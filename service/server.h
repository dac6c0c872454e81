// service/server.h: a running Furrballs gRPC server: the engine, the
// dispatcher, the Cache service, health and reflection, with limits.
//
// Thread safety: Start() and Shutdown() are called by one controlling thread;
// everything else is internally synchronized.
#ifndef FURRBALLS_SERVICE_SERVER_H_
#define FURRBALLS_SERVICE_SERVER_H_

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include <absl/status/statusor.h>
#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/impl/service_type.h>
#include <grpcpp/server.h>

#include "engine/furrball/furrball.h"
#include "engine/furrball/options.h"
#include "service/cache_service.h"
#include "service/callback_threads.h"
#include "service/dispatcher.h"
#include "service/tls_credentials.h"
#include "service/token_auth.h"

namespace furrballs::service {

// The HTTP/2 stream window the server announces when gRPC's BDP probe is off
// (ServerOptions::grpc_bdp_probe): what a client may send on a stream that
// the server has not asked to read. A MultiSet waiting for room in the
// request bytes (service/request_byte_gate.h) holds at most this in gRPC,
// and so does a connection's set of waiting streams (the connection window
// is this plus what reading streams were granted). gRPC's own default; 1 MiB
// let 16 waiting MultiSets hold up to 16 MiB unread (at 8 callers x 2 x
// 14 MiB: 1.65 x budget, against 1.41 with 64 KiB; 2 runs each,
// bench/results/2026-11-25-grpcquota). A read that the server asks for gets
// the message's whole length at once (chttp2's min_progress_size).
inline constexpr int kStreamWindowBytes = 64 << 10;

// The request bytes the server holds at once when --max_in_flight_mb is not
// given (StreamLimits::max_in_flight_bytes): issue 13's bound on the RSS is
// 1.05 x budget + 24 MiB, and an idle server beside its full budget holds
// about 8-10 MiB of its own (code, libraries, stacks, gRPC's connections;
// docs/memory_bench.md), so requests get the 5% and 12 of the 24 MiB. At a
// 64 MiB budget 15.2 MiB, where the largest MultiSet the stress sends is
// 14 MiB (bench/results/2026-11-25-grpcquota).
constexpr size_t RequestBytesForBudget(size_t memory_budget_bytes) {
  return memory_budget_bytes / 20 + (size_t{12} << 20);
}

struct ServerOptions {
  // host:port to listen on; port 0 picks a free port (see Server::port()).
  std::string listen_address = "127.0.0.1:50051";
  FurrBallOptions engine;
  DispatcherOptions dispatch;
  // Largest request or response message. Must hold a MultiSet of several
  // maximum-size values.
  size_t max_message_bytes = size_t{16} << 20;
  // HTTP/2 streams per connection.
  int max_concurrent_streams = 1024;
  // Per-stream and per-batch bounds (CacheService::StreamLimits; its
  // max_message_bytes is set from max_message_bytes above).
  CacheService::StreamLimits stream_limits;
  // Memory gRPC may use for its buffers (a grpc::ResourceQuota): past it
  // gRPC shrinks its read windows and stops accepting connections, so a
  // flood of requests cannot grow the process without bound. 0 leaves
  // gRPC's default (no quota).
  size_t grpc_memory_bytes = 0;
  // Whether gRPC probes the connection's bandwidth-delay product to grow its
  // HTTP/2 windows, and shrinks them as grpc_memory_bytes fills (gRPC's
  // default; gRPC 1.51 adapts the windows to its quota only with the probe).
  // Off, the stream window stays at kStreamWindowBytes, which bounds what
  // MultiSets waiting for the request-bytes cap hold unread; on, gRPC
  // announces up to 16 MiB per stream while its quota is below 20% used,
  // and waiting MultiSets can fill that. Off cost 20-30% more server CPU
  // per large item stored in the 2026-11-25 inplace runs, and nothing
  // measurable on small requests (docs/memory_bench.md).
  bool grpc_bdp_probe = true;
  // How many of gRPC's callback threads serve the process: the others are
  // parked while the server runs (service/callback_threads.h). 0 leaves
  // gRPC's own number (two on a machine of up to five cores).
  int grpc_callback_threads = 0;
  // Keepalive enforcement: clients pinging more often than this are sent
  // GOAWAY (after a few strikes).
  std::chrono::milliseconds keepalive_min_ping_interval{10000};
  // Time in-flight RPCs get to finish on shutdown before they are cancelled.
  std::chrono::milliseconds shutdown_deadline{10000};
  // Drain period at the start of Shutdown(): health says NOT_SERVING and
  // every new RPC (and every new Pipeline op) is answered UNAVAILABLE, while
  // connections stay open, so that clients and load balancers move away
  // before the listener closes. RPCs that reach a server whose connections
  // are already closing can be cancelled by gRPC itself (CANCELLED, never
  // seen by Furrballs); a drain period longer than the clients' reaction
  // time avoids that. 0 closes the connections at once.
  std::chrono::milliseconds shutdown_drain{0};

  // Security (docs/security.md). TLS, or mTLS with a client CA, on
  // listen_address; plaintext when tls.cert_file is empty.
  TlsFiles tls;
  // Bearer tokens with their roles (service/token_auth.h); empty: calls need
  // no token.
  std::string auth_token_file;
  // How often the TLS files and the token file are read again, so that
  // replaced files take effect without a restart.
  std::chrono::seconds security_reload_interval{10};
  // host:port of a plaintext listener serving only grpc.health.v1 (with the
  // same statuses as listen_address), for health checkers that cannot do
  // TLS, such as the kubelet's gRPC probes. Empty: none.
  std::string health_address;
};

// Builds and starts a gRPC server for `service` the way every Furrballs server
// is built: listening on options.listen_address (plaintext, or TLS from
// options.tls), with the message, stream and keepalive limits of `options`,
// the grpc.health.v1 service (its statuses are the caller's to set) and
// server reflection with the .proto comments (service/reflection.h).
// Server::Start uses it, and so does the benchmark's empty-handler server
// (bench/service), so that the two differ only in their handlers.
// Sets *port to the bound port. Returns null if it cannot listen.
//
// Enables gRPC's default health service process-wide (a global setting).
std::unique_ptr<grpc::Server> BuildGrpcServer(const ServerOptions& options,
                                              grpc::Service* service,
                                              int* port);

class Server {
 public:
  // Opens the engine, starts the workers and the gRPC server, and marks the
  // health service SERVING.
  static absl::StatusOr<std::unique_ptr<Server>> Start(
      const ServerOptions& options);

  // First step of a graceful stop, also callable on its own: health reports
  // NOT_SERVING and every RPC that starts from now on is answered UNAVAILABLE;
  // RPCs already accepted run to completion. Idempotent.
  void BeginDrain();

  // Graceful stop: BeginDrain(), wait `shutdown_drain`, stop accepting and
  // close connections, let in-flight RPCs finish until `shutdown_deadline`
  // (then cancel them), drain the node queues, stop the engine. Idempotent;
  // the destructor calls it.
  void Shutdown();
  ~Server();

  int port() const { return port_; }
  // The plaintext health port, or 0 without options.health_address.
  int health_port() const { return health_port_; }
  // The TLS set-up in one line (CheckTlsFiles), for the start-up output.
  const std::string& tls_summary() const { return tls_summary_; }
  // The bearer-token check, or null when calls need no token.
  const TokenAuthenticator* auth() const { return auth_.get(); }
  // gRPC callback threads parked (options.grpc_callback_threads).
  int parked_callback_threads() const {
    return callback_threads_ == nullptr ? 0 : callback_threads_->parked();
  }
  const ServerOptions& options() const { return options_; }
  FurrBall* engine() const { return engine_.get(); }
  Dispatcher* dispatcher() const { return dispatcher_.get(); }
  // Counts of the requests served, for an exporter (the binary's metrics).
  const RequestStats& request_stats() const {
    return service_->request_stats();
  }
  // The request bytes held and the MultiSets waiting to be read
  // (--max_in_flight_mb); for tests and an exporter.
  const RequestByteGate& request_bytes() const {
    return service_->in_flight_bytes();
  }

 private:
  explicit Server(const ServerOptions& options) : options_(options) {}

  // Sets grpc.health.v1's statuses (the server's and the Cache service's)
  // on the main and the health-only listener.
  void SetServing(bool serving);

  const ServerOptions options_;
  std::string tls_summary_;
  std::unique_ptr<TokenAuthenticator> auth_;
  std::unique_ptr<FurrBall> engine_;
  std::unique_ptr<Dispatcher> dispatcher_;
  std::unique_ptr<CacheService> service_;
  std::unique_ptr<grpc::Server> server_;
  // Null unless options.grpc_callback_threads parks threads; released first
  // thing in Shutdown.
  std::unique_ptr<CallbackThreadLimit> callback_threads_;
  // Answers UNIMPLEMENTED to every call the health listener gets for another
  // service; gRPC builds no server without a service of the builder's own
  // (the default health service is added later, when the server starts).
  // Declared before health_server_, which uses it, so destroyed after it.
  grpc::CallbackGenericService health_others_;
  std::unique_ptr<grpc::Server> health_server_;
  int health_port_ = 0;
  int port_ = 0;
  bool stopped_ = false;
};

}  // namespace furrballs::service

#endif  // FURRBALLS_SERVICE_SERVER_H_
