// engine/common/read_file.h: reads a whole (small) file into a string, with
// the system's reason when it cannot: /proc files for metrics/, the token
// and certificate files for service/.
//
// Thread safety: a pure function of the file system; safe everywhere.
#ifndef FURRBALLS_ENGINE_COMMON_READ_FILE_H_
#define FURRBALLS_ENGINE_COMMON_READ_FILE_H_

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include <absl/status/status.h>
#include <absl/status/statusor.h>
#include <absl/strings/str_cat.h>

namespace furrballs {

// The file's bytes, or UNAVAILABLE "cannot open <path>: <strerror>" /
// DATA_LOSS "cannot read <path>".
inline absl::StatusOr<std::string> ReadFileToString(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::UnavailableError(
        absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  }
  std::ostringstream contents;
  contents << in.rdbuf();
  if (in.bad()) {
    return absl::DataLossError(absl::StrCat("cannot read ", path));
  }
  return contents.str();
}

}  // namespace furrballs

#endif  // FURRBALLS_ENGINE_COMMON_READ_FILE_H_
