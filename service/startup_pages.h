// service/startup_pages.h: once the server has started, gives back the
// pages of code and read-only data that start-up mapped into the process
// and serving may never use (issue 13 goal 2: idle RSS).
//
// Thread safety: thread-safe; other threads may run meanwhile (what they
// execute is mapped back in when they touch it).
//
// Start-up runs code that serving does not run again: the static
// initializers of gRPC, protobuf, RocksDB and Abseil (about 600 of them),
// flag parsing, the building of the server and the engine. The kernel maps
// every page of it that is touched into the process, and with it the
// neighbours that are in the page cache (fault-around, 64 KiB): about
// 9 MiB of the server binary's code and read-only data, of which an idle
// server touches about 1 MiB again (measured with process_madvise
// MADV_PAGEOUT on a started server: 16.6 -> 6.4 MiB of RSS, 7.3 MiB 2 s
// later). These are clean pages of files: dropping the process's mappings
// of them (madvise(MADV_DONTNEED)) leaves them in the page cache, shared
// and reclaimable as before, and the next use maps each back with a minor
// fault and no I/O. What the machine holds does not change; what the
// process is charged for (its RSS, a cgroup's mapped file pages) is then
// what it uses.
//
// Only read-only private file mappings whose pages are all the file's are
// dropped: a read-only mapping that holds private copies (relocated data
// made read-only after relocation, RELRO) would be reverted to the file's
// bytes by MADV_DONTNEED, so such a mapping is skipped whole.
#ifndef FURRBALLS_SERVICE_STARTUP_PAGES_H_
#define FURRBALLS_SERVICE_STARTUP_PAGES_H_

#include <cstdint>
#include <vector>

#include <absl/status/statusor.h>
#include <absl/strings/string_view.h>

namespace furrballs::service {

struct ReleasedPages {
  uint64_t mappings = 0;        // mappings whose pages were dropped
  uint64_t resident_bytes = 0;  // what of them was resident before
};

// Drops the process's resident pages of every read-only private file
// mapping that holds no private copy (see above), read from
// /proc/self/smaps, then returns free heap pages to the system
// (malloc_trim). UNAVAILABLE if smaps cannot be read; a mapping madvise
// refuses is left as it is.
absl::StatusOr<ReleasedPages> ReleaseStartUpPages();

// One mapping of an smaps listing, as far as ReleaseStartUpPages needs it.
struct SmapsMapping {
  uintptr_t begin = 0;
  uintptr_t end = 0;
  bool droppable = false;  // read-only, private, file-backed, no private copy
  uint64_t resident_bytes = 0;
};
// The mappings of an smaps listing (the format of proc(5)); for tests too.
std::vector<SmapsMapping> ParseSmaps(absl::string_view smaps);

}  // namespace furrballs::service

#endif  // FURRBALLS_SERVICE_STARTUP_PAGES_H_
