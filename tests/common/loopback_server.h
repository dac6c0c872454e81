// tests/common/loopback_server.h: the ServerOptions that the end-to-end
// service tests start from: a free port on loopback, a 64 MiB cache of 2 MiB
// pages on a simulated topology, unpinned workers (tests run side by side),
// and a short shutdown deadline.
//
// Thread safety: a pure function.
#ifndef FURRBALLS_TESTS_COMMON_LOOPBACK_SERVER_H_
#define FURRBALLS_TESTS_COMMON_LOOPBACK_SERVER_H_

#include <chrono>
#include <cstddef>

#include "service/server.h"

namespace furrballs::test_support {

inline service::ServerOptions LoopbackServerOptions(service::DispatchMode mode,
                                                    int nodes = 4) {
  service::ServerOptions o;
  o.listen_address = "127.0.0.1:0";
  o.engine.memory_budget_bytes = size_t{64} << 20;
  o.engine.page_size_bytes = size_t{2} << 20;
  o.engine.simulate_topology = true;
  o.engine.node_count = nodes;
  o.engine.pin_workers = false;
  o.dispatch.mode = mode;
  o.shutdown_deadline = std::chrono::milliseconds(5000);
  return o;
}

}  // namespace furrballs::test_support

#endif  // FURRBALLS_TESTS_COMMON_LOOPBACK_SERVER_H_
