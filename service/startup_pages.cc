#include "service/startup_pages.h"

#include <malloc.h>
#include <sys/mman.h>

#include <cstdint>
#include <string>
#include <vector>

#include <absl/strings/numbers.h>
#include <absl/strings/str_split.h>
#include <absl/strings/string_view.h>
#include <absl/strings/strip.h>

#include "engine/common/read_file.h"

namespace furrballs::service {
namespace {

// Reads "Name:   N kB" as N * 1024 bytes; false if `line` is another field.
bool KbField(absl::string_view line, absl::string_view name, uint64_t* bytes) {
  if (!absl::ConsumePrefix(&line, name) || !absl::ConsumePrefix(&line, ":")) {
    return false;
  }
  line = absl::StripAsciiWhitespace(line);
  absl::ConsumeSuffix(&line, " kB");
  uint64_t kb = 0;
  if (!absl::SimpleAtoi(line, &kb)) return false;
  *bytes = kb * 1024;
  return true;
}

}  // namespace

std::vector<SmapsMapping> ParseSmaps(absl::string_view smaps) {
  std::vector<SmapsMapping> out;
  for (absl::string_view line : absl::StrSplit(smaps, '\n')) {
    // Header: "begin-end perms offset dev inode [path]"; fields: "Name: ...".
    const std::vector<absl::string_view> f =
        absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (f.size() >= 5 && f[0].find('-') != absl::string_view::npos &&
        f[1].size() == 4) {
      const std::pair<absl::string_view, absl::string_view> range =
          absl::StrSplit(f[0], '-');
      SmapsMapping m;
      if (!absl::SimpleHexAtoi(range.first, &m.begin) ||
          !absl::SimpleHexAtoi(range.second, &m.end)) {
        continue;
      }
      // Readable, not writable, private, with an inode; its Anonymous
      // field (pages that are private copies) must then be 0.
      const absl::string_view perms = f[1];
      m.droppable = perms[0] == 'r' && perms[1] == '-' && perms[3] == 'p' &&
                    f[4] != "0";
      out.push_back(m);
      continue;
    }
    if (out.empty()) continue;
    uint64_t bytes = 0;
    if (KbField(line, "Rss", &bytes)) {
      out.back().resident_bytes = bytes;
    } else if (KbField(line, "Anonymous", &bytes) && bytes != 0) {
      out.back().droppable = false;
    }
  }
  return out;
}

absl::StatusOr<ReleasedPages> ReleaseStartUpPages() {
  absl::StatusOr<std::string> smaps = ReadFileToString("/proc/self/smaps");
  if (!smaps.ok()) return smaps.status();
  ReleasedPages released;
  for (const SmapsMapping& m : ParseSmaps(*smaps)) {
    if (!m.droppable || m.resident_bytes == 0) continue;
    // A read-only private mapping with no private copy: the pages are the
    // file's, still in the page cache after this.
    if (madvise(reinterpret_cast<void*>(m.begin), m.end - m.begin,
                MADV_DONTNEED) == 0) {
      ++released.mappings;
      released.resident_bytes += m.resident_bytes;
    }
  }
#ifdef __GLIBC__
  // Heap pages that start-up's temporaries left free.
  malloc_trim(0);
#endif
  return released;
}

}  // namespace furrballs::service
