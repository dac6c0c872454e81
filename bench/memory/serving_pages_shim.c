// bench/memory/serving_pages_shim.c: a measurement-only LD_PRELOAD library
// for bench/memory/serving_sections.py. Never linked into the server.
//
// It gives every 4 KiB page of furrballs_server's code and read-only data
// a mapping of its own (madvise MADV_RANDOM and MADV_NORMAL on alternate
// pages: mappings with different flags are not merged). The kernel's
// fault-around maps the page cache's neighbours of a faulting page only
// within the faulting mapping, so with one page per mapping every present
// page of the executable is a page the process touched. The server's own
// start-up drop (service/startup_pages.h) then leaves, once it serves, the
// pages touched since: what serving runs.
//
// Thread safety: runs in a constructor, before main() and its threads.
#define _GNU_SOURCE
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static char exe[4096];
static char maps[1 << 20];

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

__attribute__((constructor)) static void SplitServerMappings(void) {
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
  for (const char* p = maps; *p != 0;) {
    const char* nl = strchr(p, '\n');
    if (nl == NULL) break;
    const char* path = memchr(p, '/', (size_t)(nl - p));
    const unsigned long begin = Hex(&p);
    ++p;
    const unsigned long end = Hex(&p);
    ++p;
    // r-xp (code) and r--p (read-only data; RELRO too, whose pages are
    // then split as well, harmlessly) of the executable itself.
    const int readonly = p[0] == 'r' && p[1] == '-';
    if (readonly && path != NULL && (size_t)(nl - path) == strlen(exe) &&
        memcmp(path, exe, (size_t)(nl - path)) == 0) {
      for (unsigned long a = begin; a < end; a += 4096) {
        madvise((void*)a, 4096, ((a >> 12) & 1) ? MADV_RANDOM : MADV_NORMAL);
      }
    }
    p = nl + 1;
  }
}
