// service/malloc_settings.h: glibc malloc settings that keep the memory of
// requests in flight from staying in the process after they are answered
// (issue 13 goal 1: RSS within 1.05 x budget + 24 MiB at every moment).
//
// Thread safety: call once, at start-up, before other threads allocate.
//
// Why. The server's large allocations are request bytes: gRPC's read
// buffers and the values a MultiSet parses (32 x 64 KiB, or 4 x 1 MiB, per
// message in the memory fill test), each freed once the request is
// answered. glibc serves allocations of at least M_MMAP_THRESHOLD with their
// own mapping, unmapped at free, but by default the threshold adapts: each
// free of such a mapping raises it to that size (up to 32 MiB), and the trim
// threshold to twice that. After the first burst of 1 MiB values, every
// later one came from the heaps of glibc's per-thread arenas, which keep
// freed memory resident: at the end of a stress run one arena held 16.7 MiB,
// all of it free (malloc_info), and the server stayed at 1.6-1.8 x budget
// with nothing in flight (docs/memory_bench.md, "Requests in flight are
// bounded"). Fixed thresholds stop the adapting: blocks of 64 KiB and more
// go back to the system when freed, and a heap keeps at most 128 KiB free
// at its top.
#ifndef FURRBALLS_SERVICE_MALLOC_SETTINGS_H_
#define FURRBALLS_SERVICE_MALLOC_SETTINGS_H_

#include <cstddef>

#include <absl/status/status.h>

namespace furrballs::service {

// Allocations of at least this many bytes get their own mapping.
inline constexpr size_t kMallocMmapThresholdBytes = size_t{64} << 10;
// A heap gives back the free memory at its top past this many bytes.
inline constexpr size_t kMallocTrimThresholdBytes = size_t{128} << 10;

// Sets both thresholds (mallopt M_MMAP_THRESHOLD and M_TRIM_THRESHOLD),
// which also stops glibc from adapting them. INTERNAL if mallopt refuses;
// OK and nothing done without glibc.
absl::Status FixMallocThresholds();

// Gives the free memory inside malloc's heaps back to the system
// (malloc_trim(0): every arena's whole free pages, not only a heap's top),
// after a burst of small allocations has been freed below live ones, which
// glibc would otherwise keep resident (call_backlog.h). Takes each arena's
// lock in turn; nothing without glibc.
void GiveBackFreeHeap();

}  // namespace furrballs::service

#endif  // FURRBALLS_SERVICE_MALLOC_SETTINGS_H_
