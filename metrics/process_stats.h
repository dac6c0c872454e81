// metrics/process_stats.h: the standard Prometheus process metrics (CPU time,
// memory, file descriptors, start time), read from /proc/self on demand.
//
// Thread safety: ReadProcessStats() is thread-safe (it only reads /proc).
//
// prometheus-cpp 1.0 has no process collector, so this reads the same kernel
// files the Go and Java clients read, once per scrape; nothing is kept
// between calls.
#ifndef FURRBALLS_METRICS_PROCESS_STATS_H_
#define FURRBALLS_METRICS_PROCESS_STATS_H_

#include <cstdint>
#include <string>

#include <absl/status/statusor.h>

namespace furrballs::metrics {

struct ProcessStats {
  double cpu_seconds = 0;         // user + system CPU time
  uint64_t resident_bytes = 0;    // resident set size
  uint64_t virtual_bytes = 0;     // virtual memory size
  uint64_t open_fds = 0;          // entries of /proc/self/fd
  uint64_t max_fds = 0;           // the soft RLIMIT_NOFILE
  double start_time_seconds = 0;  // since the Unix epoch
};

// Reads this process's statistics. Fails (with the file and the reason) when
// /proc is not mounted or has an unexpected format.
absl::StatusOr<ProcessStats> ReadProcessStats();

// Parses the contents of a /proc/<pid>/stat file and the boot time (seconds
// since the epoch, the `btime` line of /proc/stat) into *out; the fd counts
// are left alone. Exposed for tests.
absl::Status ParseProcStat(const std::string& stat, uint64_t boot_time_seconds,
                           long clock_ticks_per_second, long page_bytes,
                           ProcessStats* out);

}  // namespace furrballs::metrics

#endif  // FURRBALLS_METRICS_PROCESS_STATS_H_
