#include "bench/service/server_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <absl/status/status.h>
#include <absl/strings/numbers.h>
#include <absl/strings/str_cat.h>

namespace furrballs::bench {

absl::StatusOr<std::unique_ptr<ServerProcess>> ServerProcess::Start(
    const std::vector<std::string>& argv, const std::string& ready_marker,
    std::chrono::milliseconds timeout) {
  if (argv.empty()) return absl::InvalidArgumentError("empty argv");
  std::vector<char*> c_argv;
  for (const std::string& a : argv) c_argv.push_back(const_cast<char*>(a.c_str()));
  c_argv.push_back(nullptr);
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  }
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  }
  if (pid == 0) {
    // Only async-signal-safe calls between fork and exec: this process has
    // gRPC's threads.
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(126);
    dup2(out[1], STDOUT_FILENO);  // dup2 clears O_CLOEXEC on the copy
    execv(c_argv[0], c_argv.data());
    _exit(127);
  }
  close(out[1]);
  std::unique_ptr<ServerProcess> process(new ServerProcess(pid, out[0]));

  // Read lines until the ready line.
  const auto give_up = std::chrono::steady_clock::now() + timeout;
  std::string pending;
  const std::string needle = ready_marker + "127.0.0.1:";
  while (process->port_ == 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        give_up - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      return absl::DeadlineExceededError(absl::StrCat(
          argv[0], " did not print \"", needle, "<port>\" within ",
          timeout.count(), " ms"));
    }
    pollfd p = {.fd = out[0], .events = POLLIN, .revents = 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char buf[4096];
    const ssize_t n = read(out[0], buf, sizeof buf);
    if (n <= 0) {
      return absl::UnavailableError(absl::StrCat(
          argv[0], " exited before it was listening; its output:\n", pending));
    }
    pending.append(buf, static_cast<size_t>(n));
    size_t eol;
    while (process->port_ == 0 && (eol = pending.find('\n')) != std::string::npos) {
      const std::string line = pending.substr(0, eol);
      pending.erase(0, eol + 1);
      const size_t at = line.find(needle);
      if (at == std::string::npos) continue;
      size_t end = at + needle.size();
      while (end < line.size() && line[end] >= '0' && line[end] <= '9') ++end;
      int port = 0;
      if (absl::SimpleAtoi(line.substr(at + needle.size(), end - at - needle.size()),
                           &port)) {
        process->port_ = port;
      }
    }
  }
  const int fd = out[0];
  process->forwarder_ = std::thread([fd] {
    char buf[4096];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0) {
    }
  });
  return process;
}

double ServerProcess::CpuSeconds() const {
  const std::string path = absl::StrCat("/proc/", pid_, "/stat");
  FILE* f = std::fopen(path.c_str(), "r");
  if (f == nullptr) return -1;
  char buf[1024];
  const size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  // Fields after the command name, which is in parentheses and may hold
  // spaces: state is field 3, utime and stime are fields 14 and 15.
  const char* p = std::strrchr(buf, ')');
  if (p == nullptr) return -1;
  unsigned long long utime = 0, stime = 0;
  if (std::sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
                  &utime, &stime) != 2) {
    return -1;
  }
  return static_cast<double>(utime + stime) /
         static_cast<double>(sysconf(_SC_CLK_TCK));
}

int ServerProcess::Stop() {
  if (stopped_) return exit_status_;
  stopped_ = true;
  kill(pid_, SIGTERM);
  int status = 0;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (true) {
    const pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_ || (r < 0 && errno != EINTR)) break;
    if (std::chrono::steady_clock::now() > give_up) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  exit_status_ = status;
  if (forwarder_.joinable()) forwarder_.join();
  close(stdout_fd_);
  return exit_status_;
}

ServerProcess::~ServerProcess() {
  if (port_ == 0 && !stopped_) {
    // Start() failed half-way; the forwarder never started.
    stopped_ = true;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    close(stdout_fd_);
    return;
  }
  Stop();
}

}  // namespace furrballs::bench
