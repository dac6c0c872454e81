// clients/cpp/test_server.h: helpers for client tests: a real in-process
// Furrballs server on loopback with a simulated 4-node topology, and a
// listener that never answers (to exercise deadlines).
//
// Thread safety: call from the test's main thread.
#ifndef FURRBALLS_CLIENTS_CPP_TEST_SERVER_H_
#define FURRBALLS_CLIENTS_CPP_TEST_SERVER_H_

#include <memory>
#include <string>

#include <absl/status/statusor.h>

#include "service/server.h"

namespace furrballs::client::testing {

// Starts a server on `listen_address` ("127.0.0.1:0" picks a free port):
// 4 simulated nodes, 64 MiB, workers not pinned (tests share the CPUs).
absl::StatusOr<std::unique_ptr<service::Server>> StartTestServer(
    const std::string& listen_address = "127.0.0.1:0");

// The options StartTestServer uses, for a test that changes some before
// starting the server with service::Server::Start.
service::ServerOptions TestServerOptions(
    const std::string& listen_address = "127.0.0.1:0");

// "127.0.0.1:<port>" of a running server.
std::string AddressOf(const service::Server& server);

// A TCP socket on 127.0.0.1 that listens but never accepts or speaks HTTP/2:
// the kernel completes connections into its backlog, so a client connects and
// then hears nothing, as with a hung server. Closed on destruction.
class SilentListener {
 public:
  SilentListener();
  ~SilentListener();
  SilentListener(const SilentListener&) = delete;
  SilentListener& operator=(const SilentListener&) = delete;

  bool ok() const { return fd_ >= 0; }
  std::string address() const;

 private:
  int fd_ = -1;
  int port_ = 0;
};

}  // namespace furrballs::client::testing

#endif  // FURRBALLS_CLIENTS_CPP_TEST_SERVER_H_
