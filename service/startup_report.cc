#include "service/startup_report.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <cstdio>
#include <map>
#include <string>

#include <absl/flags/reflection.h>
#include <absl/strings/match.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_format.h>

#include "engine/common/hash_pair.h"
#include "engine/common/hash_secret_file.h"
#include "service/callback_threads.h"
#include "service/malloc_settings.h"

namespace furrballs::service {

void PrintConfiguration(const Server& server, const std::string& secret,
                        bool hash_seed_flag_set) {
  std::printf("furrballs: effective configuration\n");
  std::map<std::string, std::string> flags;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (flag->Filename().find("service/main.cc") == std::string::npos) {
      continue;
    }
    flags[std::string(name)] = flag->CurrentValue();
  }
  for (const auto& [name, value] : flags) {
    std::printf("  --%s=%s\n", name.c_str(), value.c_str());
  }
  const FurrBall& engine = *server.engine();
  std::printf("furrballs: %s\n", engine.TopologySummary().c_str());
  // The secret in use, which a warm restart may have taken from the
  // previous run's manifest.
  const FurrBallOptions& eo = engine.options();
  const HashSecret in_use = eo.hash_secret.has_value()
                                 ? *eo.hash_secret
                                 : KeyHasher(eo.hash_seed).secret();
  const std::string origin =
      hash_seed_flag_set && eo.hash_secret.has_value()
          ? "kept from the previous run's manifest (--hash_seed applies to "
            "a cold start)"
          : secret;
  std::printf("furrballs: hash secret %s, fingerprint %016llx\n",
              origin.c_str(),
              static_cast<unsigned long long>(HashSecretFingerprint(in_use)));
  const MemoryPlan& plan = engine.memory_plan();
  std::printf(
      "furrballs: %d node(s)%s, %zu MiB per node, mapped %zu MiB of %zu MiB "
      "budget (metadata %zu MiB)\nfurrballs: memory: %s\n",
      engine.node_count(),
      engine.options().simulate_topology ? " (simulated)" : "",
      static_cast<size_t>(plan.node_budget_bytes >> 20),
      static_cast<size_t>(
          (engine.MetadataBytes() + engine.node_count() * plan.value_bytes()) >>
          20),
      engine.options().memory_budget_bytes >> 20,
      engine.MetadataBytes() >> 20, plan.Summary().c_str());
  const ServerOptions& o = server.options();
  std::printf("furrballs: malloc: blocks of %zu KiB and more mapped on their "
              "own, heap tops trimmed past %zu KiB (fixed thresholds, so that "
              "request buffers leave the RSS when freed)\n",
              kMallocMmapThresholdBytes >> 10, kMallocTrimThresholdBytes >> 10);
  // What requests may hold beside the budget, in one place.
  const size_t request_cap = o.stream_limits.max_in_flight_bytes;
  const std::string requests =
      request_cap == 0
          ? std::string("requests held at once not capped "
                        "(--max_in_flight_mb=0)")
          : absl::StrFormat(
                "requests held at once capped at %.1f MiB (a message larger "
                "than that runs alone; MultiSets wait unread for room: "
                "--max_in_flight_mb)",
                static_cast<double>(request_cap) / (1 << 20));
  const std::string grpc_buffers =
      o.grpc_memory_bytes == 0
          ? std::string("gRPC's buffers not capped (--grpc_memory_mb=0)")
          : absl::StrFormat("%zu MiB of gRPC buffers (--grpc_memory_mb)",
                            o.grpc_memory_bytes >> 20);
  std::printf("furrballs: requests: beside --memory_mb, %s, and %s\n",
              requests.c_str(), grpc_buffers.c_str());
  if (o.grpc_bdp_probe) {
    std::printf("furrballs: HTTP/2 windows grown by gRPC's bandwidth-delay "
                "probe (--grpc_bdp_probe)\n");
  } else {
    std::printf("furrballs: HTTP/2 windows fixed at %d KiB per stream, "
                "gRPC's bandwidth-delay probe off (--grpc_bdp_probe)\n",
                kStreamWindowBytes >> 10);
  }
  std::printf("furrballs: gRPC callback threads: %d of gRPC's %d serve, %d "
              "parked (--grpc_callback_threads)\n",
              CallbackThreadLimit::GrpcCallbackThreads() -
                  server.parked_callback_threads(),
              CallbackThreadLimit::GrpcCallbackThreads(),
              server.parked_callback_threads());
  std::printf("furrballs: %s\n", server.tls_summary().c_str());
  if (const TokenAuthenticator* auth = server.auth()) {
    std::printf("furrballs: auth: %zu read-write, %zu read-only token(s) "
                "from %s\n",
                auth->read_write_tokens(), auth->read_only_tokens(),
                auth->path().c_str());
  } else {
    std::printf("furrballs: auth: none (no --auth_token_file): every client "
                "may read and write\n");
  }
  if (server.health_port() != 0) {
    std::printf("furrballs: plaintext grpc.health.v1 on %s (port %d)\n",
                o.health_address.c_str(), server.health_port());
  }
  if (!o.tls.enabled() && o.auth_token_file.empty() &&
      !absl::StartsWith(o.listen_address, "127.") &&
      !absl::StartsWith(o.listen_address, "localhost:") &&
      !absl::StartsWith(o.listen_address, "[::1]:")) {
    std::printf("furrballs: warning: %s is served in plaintext without "
                "tokens; whoever reaches it can read and write every key "
                "(docs/security.md)\n",
                o.listen_address.c_str());
  }
}

void PrintAllocatorState() {
  std::fprintf(stderr, "furrballs: allocator state (SIGUSR1):\n");
#ifdef __GLIBC__
  malloc_info(0, stderr);
#endif
  std::fprintf(stderr, "furrballs: end of allocator state\n");
  std::fflush(stderr);
}

void PrintServing(const Server& server) {
  const ServerOptions& o = server.options();
  // grpcurl sends no token and, with TLS, needs the CA; the hint says so.
  const std::string grpcurl =
      o.tls.enabled()
          ? absl::StrCat("grpcurl -cacert <CA of ", o.tls.cert_file, ">",
                         o.tls.client_ca_file.empty()
                             ? ""
                             : " -cert <client.crt> -key <client.key>")
          : std::string("grpcurl -plaintext");
  std::printf(
      "furrballs: serving furrballs.v1.Cache on 127.0.0.1:%d (listen %s); "
      "try: %s%s -d '{\"key\":\"aGk=\",\"value\":\"dGhlcmU=\"}' "
      "localhost:%d furrballs.v1.Cache/Set\n",
      server.port(), o.listen_address.c_str(), grpcurl.c_str(),
      o.auth_token_file.empty() ? "" : " -H 'authorization: Bearer <token>'",
      server.port());
  std::fflush(stdout);
}

}  // namespace furrballs::service
