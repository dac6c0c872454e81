// tests/common/server_process.h: a furrballs_server child process for
// end-to-end tests: started with the flags a test chooses, ready once it
// prints its "serving furrballs.v1.Cache on 127.0.0.1:PORT" line, stopped by
// SIGTERM (graceful) or SIGKILL (a crash).
//
// Thread safety: one controlling thread per object.
#ifndef FURRBALLS_TESTS_COMMON_SERVER_PROCESS_H_
#define FURRBALLS_TESTS_COMMON_SERVER_PROCESS_H_

#include <sys/types.h>

#include <csignal>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

namespace furrballs::test_support {

class ServerProcess {
 public:
  // `flags` go to every Start() after the listen address; a test passes
  // `--metrics_address=` so that parallel servers do not compete for the
  // metrics port.
  ServerProcess(std::string binary, std::vector<std::string> flags)
      : binary_(std::move(binary)), flags_(std::move(flags)) {}
  ~ServerProcess() { Kill(); }
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  // Spawns the server on 127.0.0.1:`port` (0: a free port) and waits for its
  // serving line. On failure returns false with everything it printed in
  // *why. Its later output is read and dropped, so it never blocks on a full
  // pipe.
  bool Start(int port, std::string* why);
  // What the last Start saw the server print, up to its serving line (the
  // effective configuration and the start-up lines).
  const std::string& startup_output() const { return startup_output_; }

  // SIGTERM and wait; true if it exited with status 0.
  bool Stop() { return Signal(SIGTERM); }
  // SIGKILL and wait; true if the signal ended it.
  bool Kill() { return Signal(SIGKILL); }

  bool running() const { return pid_ > 0; }
  // The running server's process id (for /proc), -1 when none runs.
  pid_t pid() const { return pid_; }
  // How the last process this object started ended (a waitpid status, for
  // WIFEXITED and friends), e.g. after a Start that failed because the
  // server exited; -1 while none has ended.
  int wait_status() const { return wait_status_; }
  int port() const { return port_; }
  std::string address() const;

 private:
  bool Signal(int sig);

  const std::string binary_;
  const std::vector<std::string> flags_;
  pid_t pid_ = -1;
  int port_ = 0;
  int wait_status_ = -1;
  std::string startup_output_;
  FILE* output_ = nullptr;
  std::thread drain_;
};

}  // namespace furrballs::test_support

#endif  // FURRBALLS_TESTS_COMMON_SERVER_PROCESS_H_
