// bench/service/server_process.h: a gRPC server under test, run as a child
// process on loopback.
//
// Thread safety: thread-compatible.
//
// The child is started with the given argv and must print a line containing
// "127.0.0.1:<port>" after `ready_marker` once it is listening (both
// //service:furrballs_server and //bench/service:empty_server do); the rest of
// its stdout is read and dropped, and its stderr is ours. Stop() sends SIGTERM and
// waits for it to exit; the child also gets SIGTERM if this process dies
// (PR_SET_PDEATHSIG), so an interrupted benchmark leaves no servers behind.
#ifndef FURRBALLS_BENCH_SERVICE_SERVER_PROCESS_H_
#define FURRBALLS_BENCH_SERVICE_SERVER_PROCESS_H_

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <absl/status/statusor.h>

namespace furrballs::bench {

class ServerProcess {
 public:
  // Starts `argv[0]` with `argv` and waits up to `timeout` for the line
  // "<ready_marker>127.0.0.1:<port>" on its stdout.
  static absl::StatusOr<std::unique_ptr<ServerProcess>> Start(
      const std::vector<std::string>& argv, const std::string& ready_marker,
      std::chrono::milliseconds timeout);

  // Stops the child (SIGTERM, then SIGKILL after 10 s). Idempotent; the
  // destructor calls it. Returns the exit status as waitpid reports it.
  int Stop();
  ~ServerProcess();
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  // CPU time (user + system, all threads) the child has used so far, from
  // /proc/<pid>/stat, at clock-tick resolution (usually 10 ms); negative if
  // it cannot be read.
  double CpuSeconds() const;

  int port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  ServerProcess(pid_t pid, int stdout_fd) : pid_(pid), stdout_fd_(stdout_fd) {}

  pid_t pid_;
  int stdout_fd_;
  int port_ = 0;
  int exit_status_ = 0;
  bool stopped_ = false;
  // Reads (and drops) the child's stdout until it closes, so that the child
  // never blocks on a full pipe.
  std::thread forwarder_;
};

}  // namespace furrballs::bench

#endif  // FURRBALLS_BENCH_SERVICE_SERVER_PROCESS_H_
