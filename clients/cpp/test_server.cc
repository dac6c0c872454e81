// clients/cpp/test_server.cc: see test_server.h.
#include "clients/cpp/test_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>

#include <absl/strings/str_cat.h>

namespace furrballs::client::testing {

absl::StatusOr<std::unique_ptr<service::Server>> StartTestServer(
    const std::string& listen_address) {
  return service::Server::Start(TestServerOptions(listen_address));
}

service::ServerOptions TestServerOptions(const std::string& listen_address) {
  service::ServerOptions o;
  o.listen_address = listen_address;
  o.engine.simulate_topology = true;
  o.engine.node_count = 4;
  o.engine.memory_budget_bytes = size_t{64} << 20;
  o.engine.pin_workers = false;
  o.shutdown_deadline = std::chrono::milliseconds(2000);
  return o;
}

std::string AddressOf(const service::Server& server) {
  return absl::StrCat("127.0.0.1:", server.port());
}

SilentListener::SilentListener() {
  fd_ = socket(AF_INET, SOCK_STREAM, 0);
  if (fd_ < 0) return;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(fd_, 64) != 0 ||
      getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(fd_);
    fd_ = -1;
    return;
  }
  port_ = ntohs(addr.sin_port);
}

SilentListener::~SilentListener() {
  if (fd_ >= 0) close(fd_);
}

std::string SilentListener::address() const {
  return absl::StrCat("127.0.0.1:", port_);
}

}  // namespace furrballs::client::testing
