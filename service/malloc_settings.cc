#include "service/malloc_settings.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <absl/strings/str_cat.h>

namespace furrballs::service {

absl::Status FixMallocThresholds() {
#ifdef __GLIBC__
  if (mallopt(M_MMAP_THRESHOLD, static_cast<int>(kMallocMmapThresholdBytes)) !=
          1 ||
      mallopt(M_TRIM_THRESHOLD, static_cast<int>(kMallocTrimThresholdBytes)) !=
          1) {
    return absl::InternalError(absl::StrCat(
        "mallopt refused M_MMAP_THRESHOLD=", kMallocMmapThresholdBytes,
        " or M_TRIM_THRESHOLD=", kMallocTrimThresholdBytes));
  }
#endif
  return absl::OkStatus();
}

void GiveBackFreeHeap() {
#ifdef __GLIBC__
  malloc_trim(0);
#endif
}

}  // namespace furrballs::service
