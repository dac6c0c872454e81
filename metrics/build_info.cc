#include "metrics/build_info.h"

#include "metrics/build_stamp.h"

namespace furrballs::metrics {

std::string_view BuildVersion() { return "0.1.0"; }

std::string_view BuildGitCommit() { return FURRBALLS_GIT_COMMIT; }

}  // namespace furrballs::metrics
