// engine/arc/retired_memory.h: memory a structure stopped using while its
// owner's lock was held, freed once the lock is released.
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
#ifndef FURRBALLS_ENGINE_ARC_RETIRED_MEMORY_H_
#define FURRBALLS_ENGINE_ARC_RETIRED_MEMORY_H_

#include <array>
#include <cstddef>
#include <cstdlib>

#include "engine/common/raw_allocator.h"

namespace furrballs {

class RetiredMemory {
 public:
  // An ARC growth retires an index table and a directory.
  static constexpr size_t kMaxBlocks = 4;

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

  // Frees every block. REQUIRES: no lock that the structures' users spin on
  // is held.
  void Release() {
    for (size_t i = 0; i < count_; ++i) {
      blocks_[i].alloc.Deallocate(blocks_[i].p, blocks_[i].bytes);
    }
    count_ = 0;
  }

  bool empty() const { return count_ == 0; }
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
  std::array<Block, kMaxBlocks> blocks_{};
  size_t count_ = 0;
};

}  // namespace furrballs

#endif  // FURRBALLS_ENGINE_ARC_RETIRED_MEMORY_H_
