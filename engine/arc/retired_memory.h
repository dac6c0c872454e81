// engine/arc/retired_memory.h: memory a structure stopped using while its
// owner's lock was held, freed (or its pages given back) once the lock is
// released.
//
// Thread safety: thread-compatible; a RetiredMemory is a local of the thread
// that took it out of a structure.
//
// Growth (arc_index.h, arc_flat_list.h) swaps tables under ConcurrentARC's
// SpinLock but must not call the allocator there: Numatic's deallocation is
// an munmap, a system call that would stall every writer spinning on the
// lock. So a structure hands the blocks it retired to a RetiredMemory, which
// the caller declares before taking the lock; its destructor (or Release)
// runs after the lock is released.
//
// A growth also gives back, while it goes on, the pages of the old arrays
// that its copy and rehash cursors have left behind (AddRelease): those
// blocks stay allocated, nothing reads the released part again, and the
// madvise runs after the lock for the same reason.
#ifndef FURRBALLS_ENGINE_ARC_RETIRED_MEMORY_H_
#define FURRBALLS_ENGINE_ARC_RETIRED_MEMORY_H_

#include <array>
#include <cstddef>
#include <cstdlib>

#include "engine/common/raw_allocator.h"

namespace furrballs {

class RetiredMemory {
 public:
  // An ARC growth (or shrink) retires an index table and an arena, and
  // releases behind its cursors in the same two (ARC keeps no key records
  // since 2026-11-25: arc_flat_list.h).
  static constexpr size_t kMaxBlocks = 2;
  static constexpr size_t kMaxSpans = 2;

  RetiredMemory() = default;
  RetiredMemory(const RetiredMemory&) = delete;
  RetiredMemory& operator=(const RetiredMemory&) = delete;
  ~RetiredMemory() { Release(); }

  // Takes `bytes` at `p`, from `alloc`. A null `p` is ignored.
  void Add(void* p, size_t bytes, RawAllocator alloc) {
    if (p == nullptr) return;
    if (count_ == kMaxBlocks) std::abort();  // a caller bug: see kMaxBlocks
    blocks_[count_++] = Block{p, bytes, alloc};
  }
  // Pages of a block still allocated to give back (RawAllocator::Release),
  // whole pages only (RawAllocator::WholePagesBetween). An empty span is
  // ignored.
  void AddRelease(RawAllocator::PageSpan span, RawAllocator alloc) {
    if (span.bytes == 0) return;
    if (spans_count_ == kMaxSpans) std::abort();  // see kMaxSpans
    spans_[spans_count_++] = Span{span, alloc};
  }

  // Gives the spans' pages back, then frees every block, and returns the
  // bytes the spans gave back. REQUIRES: no lock that the structures'
  // users spin on is held.
  size_t Release() {
    size_t released = 0;
    for (size_t i = 0; i < spans_count_; ++i) {
      released += spans_[i].alloc.Release(spans_[i].span.p,
                                          spans_[i].span.bytes);
    }
    spans_count_ = 0;
    for (size_t i = 0; i < count_; ++i) {
      blocks_[i].alloc.Deallocate(blocks_[i].p, blocks_[i].bytes);
    }
    count_ = 0;
    return released;
  }

  // Forgets the spans (their blocks are being freed whole).
  void DropReleases() { spans_count_ = 0; }

  bool empty() const { return count_ == 0 && spans_count_ == 0; }
  size_t bytes() const {
    size_t total = 0;
    for (size_t i = 0; i < count_; ++i) total += blocks_[i].bytes;
    return total;
  }

 private:
  struct Block {
    void* p = nullptr;
    size_t bytes = 0;
    RawAllocator alloc = RawAllocator::Default();
  };
  struct Span {
    RawAllocator::PageSpan span;
    RawAllocator alloc = RawAllocator::Default();
  };
  std::array<Block, kMaxBlocks> blocks_{};
  size_t count_ = 0;
  std::array<Span, kMaxSpans> spans_{};
  size_t spans_count_ = 0;
};

}  // namespace furrballs

#endif  // FURRBALLS_ENGINE_ARC_RETIRED_MEMORY_H_
