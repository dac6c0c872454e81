// metrics/build_info.h: what furrballs_build_info reports about this binary.
//
// Thread safety: plain constants; safe everywhere.
#ifndef FURRBALLS_METRICS_BUILD_INFO_H_
#define FURRBALLS_METRICS_BUILD_INFO_H_

#include <string_view>

namespace furrballs::metrics {

// The release this source tree is.
std::string_view BuildVersion();

// The git commit the binary was built from, or "unknown". It is known only in
// stamped builds that export STABLE_GIT_COMMIT:
//   bazel build --workspace_status_command=metrics/workspace_status.sh ...
// (unstamped builds stay cacheable and never carry a stale commit).
std::string_view BuildGitCommit();

}  // namespace furrballs::metrics

#endif  // FURRBALLS_METRICS_BUILD_INFO_H_
