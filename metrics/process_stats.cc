#include "metrics/process_stats.h"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include <absl/status/status.h>
#include <absl/strings/numbers.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_split.h>

#include "engine/common/read_file.h"

namespace furrballs::metrics {
namespace {

absl::StatusOr<uint64_t> BootTimeSeconds() {
  absl::StatusOr<std::string> stat = ReadFileToString("/proc/stat");
  if (!stat.ok()) return stat.status();
  for (absl::string_view line : absl::StrSplit(*stat, '\n')) {
    if (absl::ConsumePrefix(&line, "btime ")) {
      uint64_t btime = 0;
      if (absl::SimpleAtoi(line, &btime)) return btime;
    }
  }
  return absl::InternalError("/proc/stat has no btime line");
}

absl::StatusOr<uint64_t> CountOpenFds() {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) {
    return absl::UnavailableError(absl::StrCat("cannot list /proc/self/fd: ",
                                               std::strerror(errno)));
  }
  uint64_t n = 0;
  // The directory's own descriptor is counted, as the Go client does.
  while (const dirent* e = readdir(dir)) {
    if (e->d_name[0] != '.') ++n;
  }
  closedir(dir);
  return n;
}

}  // namespace

absl::Status ParseProcStat(const std::string& stat, uint64_t boot_time_seconds,
                           long clock_ticks_per_second, long page_bytes,
                           ProcessStats* out) {
  // The command name (field 2) is in parentheses and may itself contain
  // spaces and parentheses, so fields are counted from the last ')'.
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) {
    return absl::InternalError("/proc/self/stat: no ')' after the command");
  }
  const std::vector<absl::string_view> f = absl::StrSplit(
      absl::string_view(stat).substr(close + 1), ' ', absl::SkipEmpty());
  // f[0] is field 3 (state); field k is f[k - 3]. Fields used: 14 utime,
  // 15 stime (clock ticks), 22 starttime (ticks after boot), 23 vsize
  // (bytes), 24 rss (pages).
  constexpr size_t kUtime = 14 - 3, kStime = 15 - 3, kStart = 22 - 3,
                   kVsize = 23 - 3, kRss = 24 - 3;
  uint64_t utime = 0, stime = 0, start = 0, vsize = 0, rss = 0;
  if (f.size() <= kRss || !absl::SimpleAtoi(f[kUtime], &utime) ||
      !absl::SimpleAtoi(f[kStime], &stime) ||
      !absl::SimpleAtoi(f[kStart], &start) ||
      !absl::SimpleAtoi(f[kVsize], &vsize) ||
      !absl::SimpleAtoi(f[kRss], &rss)) {
    return absl::InternalError("/proc/self/stat: unexpected format");
  }
  const double ticks = static_cast<double>(clock_ticks_per_second);
  out->cpu_seconds = static_cast<double>(utime + stime) / ticks;
  out->start_time_seconds =
      static_cast<double>(boot_time_seconds) + static_cast<double>(start) / ticks;
  out->virtual_bytes = vsize;
  out->resident_bytes = rss * static_cast<uint64_t>(page_bytes);
  return absl::OkStatus();
}

absl::StatusOr<ProcessStats> ReadProcessStats() {
  absl::StatusOr<std::string> stat = ReadFileToString("/proc/self/stat");
  if (!stat.ok()) return stat.status();
  absl::StatusOr<uint64_t> boot = BootTimeSeconds();
  if (!boot.ok()) return boot.status();
  ProcessStats out;
  if (absl::Status s = ParseProcStat(*stat, *boot, sysconf(_SC_CLK_TCK),
                                     sysconf(_SC_PAGESIZE), &out);
      !s.ok()) {
    return s;
  }
  absl::StatusOr<uint64_t> fds = CountOpenFds();
  if (!fds.ok()) return fds.status();
  out.open_fds = *fds;
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0) out.max_fds = limit.rlim_cur;
  return out;
}

}  // namespace furrballs::metrics
