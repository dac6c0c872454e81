#include "bench/service/dispatch_metrics.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include <absl/status/status.h>
#include <absl/strings/match.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_split.h>

namespace furrballs::bench {
namespace {

sockaddr_in Loopback(int port) {
  sockaddr_in a = {};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

absl::Status Errno(const char* what) {
  return absl::InternalError(absl::StrCat(what, ": ", std::strerror(errno)));
}

}  // namespace

absl::StatusOr<DispatchCounters> ScrapeDispatchCounters(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Errno("socket");
  const timeval timeout = {.tv_sec = 5, .tv_usec = 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  const sockaddr_in addr = Loopback(port);
  if (connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    const absl::Status s = Errno("connect to the metrics port");
    close(fd);
    return s;
  }
  // HTTP/1.0: the server closes the connection after the answer, which ends
  // the read loop below.
  const std::string request =
      "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  if (write(fd, request.data(), request.size()) !=
      static_cast<ssize_t>(request.size())) {
    const absl::Status s = Errno("write");
    close(fd);
    return s;
  }
  std::string body;
  char buf[16384];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) {
    body.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  if (n < 0) return Errno("read");

  DispatchCounters c;
  bool found = false;
  for (absl::string_view line : absl::StrSplit(body, '\n')) {
    double* sum = nullptr;
    if (absl::StartsWith(line, "furrballs_dispatch_batches_total")) {
      sum = &c.batches;
    } else if (absl::StartsWith(line, "furrballs_dispatch_ops_total")) {
      sum = &c.ops;
    } else if (absl::StartsWith(line, "furrballs_hits_total{")) {
      sum = absl::StrContains(line, "locality=\"local\"") ? &c.hits_local
                                                          : &c.hits_remote;
    } else {
      continue;
    }
    // "name{labels} value": the value follows the last space.
    const size_t space = line.rfind(' ');
    if (space == absl::string_view::npos) continue;
    *sum += std::strtod(std::string(line.substr(space + 1)).c_str(), nullptr);
    found |= sum == &c.batches || sum == &c.ops;
  }
  if (!found) {
    return absl::NotFoundError(
        "no furrballs_dispatch_* counters in the /metrics answer");
  }
  return c;
}

absl::StatusOr<int> PickFreeLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Errno("socket");
  sockaddr_in addr = Loopback(0);
  socklen_t len = sizeof addr;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const absl::Status s = Errno("bind");
    close(fd);
    return s;
  }
  close(fd);
  return ntohs(addr.sin_port);
}

}  // namespace furrballs::bench
