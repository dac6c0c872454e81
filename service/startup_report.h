// service/startup_report.h: what furrballs_server prints about itself: the
// effective configuration once it has started, the allocator's state on
// SIGUSR1, and the "serving" line that harnesses wait for.
//
// Thread safety: each function writes to stdout or stderr; call them from
// one thread (the server's main thread does).
#ifndef FURRBALLS_SERVICE_STARTUP_REPORT_H_
#define FURRBALLS_SERVICE_STARTUP_REPORT_H_

#include <string>

#include "service/server.h"

namespace furrballs::service {

// The flags of service/main.cc with their values, the topology, the hash
// secret (`secret` says where it came from; `hash_seed_flag_set`: the user
// gave --hash_seed, which a warm restart's manifest overrides), the memory
// plan, malloc's thresholds, what requests may hold beside the budget, gRPC's
// callback threads, TLS, tokens, health, and a warning for a plaintext,
// token-less listener off loopback.
void PrintConfiguration(const Server& server, const std::string& secret,
                        bool hash_seed_flag_set);

// glibc's malloc_info (every arena's free chunks, its heaps, the memory
// mapped for large chunks) on stderr, between two marker lines.
void PrintAllocatorState();

// The last start-up line, which harnesses wait for (bench/peers/servers.py).
void PrintServing(const Server& server);

}  // namespace furrballs::service

#endif  // FURRBALLS_SERVICE_STARTUP_REPORT_H_
