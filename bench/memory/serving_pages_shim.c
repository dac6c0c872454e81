// bench/memory/serving_pages_shim.c: a measurement-only LD_PRELOAD library
// for bench/memory/serving_sections.py and serving_order.py. Never linked
// into the server.
//
// It gives every 4 KiB page of furrballs_server's code and read-only data
// a mapping of its own (madvise MADV_RANDOM and MADV_NORMAL on alternate
// pages: mappings with different flags are not merged). The kernel's
// fault-around maps the page cache's neighbours of a faulting page only
// within the faulting mapping, so with one page per mapping every present
// page of the executable is a page the process touched since.
//
// When: as the server drops its start-up pages (service/startup_pages.h,
// madvise MADV_DONTNEED of each read-only mapping of its files), through
// this library's madvise, which the server calls instead of glibc's. The
// pages present once it serves are then the pages touched since the drop:
// what serving runs. Split at load instead, the drop itself took long
// (/proc/self/smaps of 15,000-50,000 mappings) and what gRPC's threads ran
// meanwhile (the harness's port check, the first connections) was dropped
// with start-up's pages, where a server without this library runs it after
// its drop and keeps it.
//
// Thread safety: the constructor runs before main() and its threads; the
// ranges it records are read-only afterwards. madvise is as thread-safe as
// the system call.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

enum { kPage = 4096, kMaxRanges = 64 };

static char exe[4096];
static char maps[1 << 20];
// The executable's read-only mappings (r-xp code, r--p read-only data;
// RELRO too, whose pages the server does not drop).
static unsigned long range_begin[kMaxRanges], range_end[kMaxRanges];
static int ranges;

static unsigned long Hex(const char** p) {
  unsigned long v = 0;
  for (;; ++*p) {
    const char c = **p;
    if (c >= '0' && c <= '9') {
      v = v * 16 + (unsigned long)(c - '0');
    } else if (c >= 'a' && c <= 'f') {
      v = v * 16 + (unsigned long)(c - 'a' + 10);
    } else {
      return v;
    }
  }
}

__attribute__((constructor)) static void FindServerMappings(void) {
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n <= 0) return;
  exe[n] = 0;
  if (strstr(exe, "furrballs_server") == NULL) return;  // redis, the driver
  const int fd = open("/proc/self/maps", O_RDONLY);
  if (fd < 0) return;
  size_t len = 0;
  ssize_t r;
  while ((r = read(fd, maps + len, sizeof(maps) - 1 - len)) > 0) len += (size_t)r;
  close(fd);
  maps[len] = 0;
  for (const char* p = maps; *p != 0 && ranges < kMaxRanges;) {
    const char* nl = strchr(p, '\n');
    if (nl == NULL) break;
    const char* path = memchr(p, '/', (size_t)(nl - p));
    const unsigned long begin = Hex(&p);
    ++p;
    const unsigned long end = Hex(&p);
    ++p;
    const int readonly = p[0] == 'r' && p[1] == '-';
    if (readonly && path != NULL && (size_t)(nl - path) == strlen(exe) &&
        memcmp(path, exe, (size_t)(nl - path)) == 0) {
      range_begin[ranges] = begin;
      range_end[ranges] = end;
      ++ranges;
    }
    p = nl + 1;
  }
}

// The server's madvise: the system call, then, for MADV_DONTNEED of the
// executable's pages, those pages split into mappings of one page each.
int madvise(void* addr, size_t length, int advice) {
  if (syscall(SYS_madvise, addr, length, advice) != 0) return -1;  // errno set
  if (advice != MADV_DONTNEED) return 0;
  const int saved = errno;
  const unsigned long begin = (unsigned long)addr, end = begin + length;
  for (int i = 0; i < ranges; ++i) {
    const unsigned long b = begin > range_begin[i] ? begin : range_begin[i];
    const unsigned long e = end < range_end[i] ? end : range_end[i];
    for (unsigned long a = b & ~(unsigned long)(kPage - 1); a < e; a += kPage) {
      if (syscall(SYS_madvise, (void*)a, kPage,
                  ((a / kPage) & 1) ? MADV_RANDOM : MADV_NORMAL) != 0) {
        // Past vm.max_map_count the split stops, fault-around comes back
        // and the pages found would name neighbours that never ran: a
        // probe that cannot split must not report.
        fprintf(stderr,
                "serving_pages_shim: splitting the executable's pages into "
                "one-page mappings failed at %#lx: %s (vm.max_map_count?)\n",
                a, strerror(errno));
        abort();
      }
    }
  }
  errno = saved;
  return 0;
}
