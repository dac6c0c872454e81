// engine/common/proc_status_testing.h: the process's own memory figures
// from /proc/self/status, for the engine's memory-bound tests.
//
// Thread safety: thread-safe (reads a file the kernel generates per read).
#ifndef FURRBALLS_ENGINE_COMMON_PROC_STATUS_TESTING_H_
#define FURRBALLS_ENGINE_COMMON_PROC_STATUS_TESTING_H_

#include <cstddef>
#include <fstream>
#include <string>
#include <string_view>

namespace furrballs {

// A "Name:   N kB" field of /proc/self/status, in bytes; 0 if absent.
inline size_t ProcStatusBytes(std::string_view field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.size() > field.size() &&
        line.compare(0, field.size(), field) == 0 &&
        line[field.size()] == ':') {
      return std::stoull(line.substr(field.size() + 1)) * 1024;
    }
  }
  return 0;
}

// The resident set size (VmRSS), in bytes.
inline size_t VmRssBytes() { return ProcStatusBytes("VmRSS"); }

}  // namespace furrballs

#endif  // FURRBALLS_ENGINE_COMMON_PROC_STATUS_TESTING_H_
