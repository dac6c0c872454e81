#include "tests/common/server_process.h"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include <absl/strings/str_cat.h>

extern char** environ;

namespace furrballs::test_support {

bool ServerProcess::Start(int port, std::string* why) {
  if (pid_ > 0) {
    *why = "already running";
    return false;
  }
  int out[2];
  if (pipe(out) != 0) {
    *why = "pipe failed";
    return false;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDERR_FILENO);
  posix_spawn_file_actions_addclose(&actions, out[0]);
  std::vector<std::string> args = {
      binary_, absl::StrCat("--listen_address=127.0.0.1:", port)};
  args.insert(args.end(), flags_.begin(), flags_.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const int spawned = posix_spawn(&pid_, binary_.c_str(), &actions, nullptr,
                                  argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(out[1]);
  if (spawned != 0) {
    close(out[0]);
    *why = absl::StrCat("posix_spawn ", binary_, ": ", std::strerror(spawned));
    pid_ = -1;
    return false;
  }
  FILE* in = fdopen(out[0], "r");
  char line[4096];
  startup_output_.clear();
  while (fgets(line, sizeof(line), in) != nullptr) {
    absl::StrAppend(why, line);
    absl::StrAppend(&startup_output_, line);
    const char* serving =
        std::strstr(line, "serving furrballs.v1.Cache on 127.0.0.1:");
    if (serving != nullptr) {
      port_ = std::atoi(std::strchr(serving, ':') + 1);
      output_ = in;
      drain_ = std::thread([in] {
        char rest[4096];
        while (fgets(rest, sizeof(rest), in) != nullptr) {
        }
      });
      return port_ > 0;
    }
  }
  // It exited (or closed its output) without serving.
  fclose(in);
  Signal(SIGKILL);
  return false;
}

std::string ServerProcess::address() const {
  return absl::StrCat("127.0.0.1:", port_);
}

bool ServerProcess::Signal(int sig) {
  if (pid_ <= 0) return false;
  kill(pid_, sig);
  int status = 0;
  waitpid(pid_, &status, 0);
  wait_status_ = status;
  pid_ = -1;
  if (drain_.joinable()) drain_.join();
  if (output_ != nullptr) {
    fclose(output_);
    output_ = nullptr;
  }
  return sig == SIGKILL ? WIFSIGNALED(status)
                        : WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace furrballs::test_support
