// engine/common/raw_allocator.h: a caller-provided allocator for the engine's
// fixed arrays (report §2.7.7).
//
// Thread safety: a RawAllocator is a plain value; whether its functions may be
// called concurrently is up to the functions (all the ones in this repository
// may).
//
// Engine structures are topology-blind: they never decide where their memory
// lives. The owner passes a RawAllocator, two function pointers plus a context
// pointer, and Numatic supplies one that places memory on a chosen NUMA node.
// The context pointer is what a bare `void*(*)(size_t)` from the report lacks:
// it carries the node (or a std::pmr::memory_resource) without a global.
//
// Every allocation must be aligned to at least kCacheLineSize bytes, because
// the structures rely on their arrays starting on a cache line.
//
// Release. A structure that stops using an allocation while lock-free
// readers may still load from it (ResizableCMap's retired key table) cannot
// deallocate it yet, but can give its pages back: `release` (optional)
// returns the physical pages of an allocation to the system and leaves the
// range mapped, reading as zero bytes from then on. ReleaseMappedPages does
// that for allocations that are private anonymous mappings of their own.
#ifndef FURRBALLS_ENGINE_COMMON_RAW_ALLOCATOR_H_
#define FURRBALLS_ENGINE_COMMON_RAW_ALLOCATOR_H_

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <memory_resource>
#include <new>

namespace furrballs {

inline constexpr size_t kCacheLineSize = 64;

struct RawAllocator {
  using AllocateFn = void* (*)(void* context, size_t bytes);
  using DeallocateFn = void (*)(void* context, void* p, size_t bytes);
  // Returns the bytes whose pages were given back.
  using ReleaseFn = size_t (*)(void* context, void* p, size_t bytes);

  AllocateFn allocate;      // returns nullptr on failure, never throws
  DeallocateFn deallocate;  // receives the size that was allocated
  void* context = nullptr;
  // Allocations come back zero-filled (fresh anonymous mappings). A
  // structure whose initial state is all zero bytes then writes nothing at
  // construction, so the pages it never uses never enter the RSS.
  bool zeroed = false;
  // Gives the pages of a live allocation back (see "Release" above); may be
  // null, and then Release keeps the memory as it is. Callers must still
  // deallocate the allocation.
  ReleaseFn release = nullptr;

  void* Allocate(size_t bytes) const { return allocate(context, bytes); }
  void Deallocate(void* p, size_t bytes) const {
    deallocate(context, p, bytes);
  }
  // The bytes released; 0 without a release function (the memory then keeps
  // its contents). Afterwards [p, p + bytes) reads as zeros where released.
  size_t Release(void* p, size_t bytes) const {
    return release != nullptr ? release(context, p, bytes) : 0;
  }

  // A ReleaseFn for allocations that are private anonymous mappings of
  // their own (Numatic's, a test's mmap): madvise(MADV_DONTNEED) on the
  // whole pages inside [p, p + bytes), which then read as zeros and leave
  // the RSS. A page the range shares with another allocation is kept, so
  // nothing outside the range is ever zeroed. NUMA placement survives: the
  // mapping's memory policy places the page again if it is touched.
  static size_t ReleaseMappedPages(void*, void* p, size_t bytes) {
    const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;
    const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + bytes) / page * page;
    if (end <= begin) return 0;
    if (madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED) != 0) {
      return 0;
    }
    return end - begin;
  }

  // The whole pages of an allocation at `memory` that lie below byte `end`
  // and not below byte `begin` (an earlier call's `end`): [floor(begin),
  // floor(end)) in page units, never before the allocation's first whole
  // page. So successive spans over a growing prefix of an allocation that
  // is emptied from its start (a growth's old table behind its migration
  // cursor) cover each page once, and never a page that holds a byte at or
  // above `end`.
  struct PageSpan {
    void* p = nullptr;
    size_t bytes = 0;
  };
  static PageSpan WholePagesBetween(void* memory, size_t begin, size_t end) {
    const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    const uintptr_t base = reinterpret_cast<uintptr_t>(memory);
    const uintptr_t first = (base + page - 1) / page * page;
    uintptr_t from = (base + begin) / page * page;
    if (from < first) from = first;
    const uintptr_t to = (base + end) / page * page;
    if (to <= from) return PageSpan{};
    return PageSpan{reinterpret_cast<void*>(from), to - from};
  }

  // Cache-line aligned global operator new; memory lands wherever the kernel's
  // first-touch policy puts it.
  static RawAllocator Default() {
    return RawAllocator{
        [](void*, size_t bytes) -> void* {
          return ::operator new(bytes, std::align_val_t{kCacheLineSize},
                                std::nothrow);
        },
        [](void*, void* p, size_t) {
          ::operator delete(p, std::align_val_t{kCacheLineSize});
        },
        nullptr};
  }

  // A private anonymous mapping per allocation: zeroed, its untouched pages
  // out of the RSS, and releasable (ReleaseMappedPages). Numatic's
  // NodeAllocator without the node binding; memory lands by first touch.
  static RawAllocator Mapped() {
    return RawAllocator{
        [](void*, size_t bytes) -> void* {
          void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
          return p == MAP_FAILED ? nullptr : p;
        },
        [](void*, void* p, size_t bytes) { munmap(p, bytes); }, nullptr,
        /*zeroed=*/true, ReleaseMappedPages};
  }

  // Adapts a memory resource (e.g. Numatic's NumaNodeMemoryResource). The
  // resource must outlive every allocation made through the adapter.
  static RawAllocator FromResource(std::pmr::memory_resource* resource) {
    return RawAllocator{
        [](void* ctx, size_t bytes) -> void* {
          try {
            return static_cast<std::pmr::memory_resource*>(ctx)->allocate(
                bytes, kCacheLineSize);
          } catch (const std::bad_alloc&) {
            return nullptr;
          }
        },
        [](void* ctx, void* p, size_t bytes) {
          static_cast<std::pmr::memory_resource*>(ctx)->deallocate(
              p, bytes, kCacheLineSize);
        },
        resource};
  }
};

}  // namespace furrballs

#endif  // FURRBALLS_ENGINE_COMMON_RAW_ALLOCATOR_H_
