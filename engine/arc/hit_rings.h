// engine/arc/hit_rings.h: one single-producer ring of deferred read hits per
// owned thread slot (engine/common/thread_slot.h), the read path's cheaper
// twin of PromoteBuf (promote_buf.h) for the threads that own a slot.
//
// Thread safety: Enqueue(slot, h) may be called only by the thread that owns
// `slot` (ThisThreadSlot() with exclusive = true), lock-free and without a
// read-modify-write. Drain and dropped() are thread-compatible: calls to them
// must be serialized by the caller (ConcurrentARC holds its SpinLock), and
// may run concurrently with Enqueues.
//
// Why. PromoteBuf serves any number of producers with one ticket counter:
// every hit costs a fetch_add on the head and a CAS on its cell, two locked
// instructions (full barriers), about 4% of the samples of a Get-only
// profile (bench/engine, YCSB-C, 1 thread). A slot has one producer at a
// time, so its ring needs neither.
//
// Protocol, per ring (a Lamport single-producer single-consumer ring):
//
//   tail_  the hits the producer has published; written by the producer only.
//   head_  the hits the drainer has consumed; written by the drainer only.
//   cells  kSlots cells of two relaxed atomics (the key); cell i % kSlots
//          holds hit i while head_ <= i < tail_.
//
//   Enqueue  t = tail_ (relaxed: the producer's own last store, or its
//            previous owner's, which the slot's release/acquire handoff
//            orders before it); h = head_ (acquire: pairs with the drainer's
//            release, so the drainer's reads of cell t - kSlots happen before
//            it is overwritten). t - h == kSlots: full, the hit is dropped and
//            counted in dropped_ (a relaxed load and store, the producer is
//            its only writer). Else the key into cell t (relaxed stores),
//            then tail_ = t + 1 (release: publishes the key).
//   Drain    t = tail_ (acquire: pairs with the producer's release); h =
//            head_ (relaxed: the drainer's own); read cells h .. t - 1
//            (relaxed), in order; head_ = t (release).
//
// A ring is FIFO, and one thread's hits all go to its one ring, so one
// thread's hits are applied in its order. Between rings (and PromoteBuf) a
// drain has no order to keep: the hits of different threads since the last
// drain were concurrent. Every access is atomic; TSAN sees the pairs above.
#ifndef FURRBALLS_ENGINE_ARC_HIT_RINGS_H_
#define FURRBALLS_ENGINE_ARC_HIT_RINGS_H_

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "engine/common/hash_pair.h"
#include "engine/common/raw_allocator.h"
#include "engine/common/thread_slot.h"

namespace furrballs {

class HitRings {
 public:
  static constexpr size_t kRings = kOwnedThreadSlots;
  // The drain cadence of PromoteBuf, so that a drain's batch (and what its
  // prefetching overlaps) is as large as before.
  static constexpr uint64_t kSlots = 128;
  static constexpr uint64_t kDrainInterval = 64;
  static_assert((kSlots & (kSlots - 1)) == 0, "hits map to cells with a mask");
  static_assert(kSlots % kDrainInterval == 0 && kSlots >= 2 * kDrainInterval,
                "a drain every kDrainInterval hits keeps a ring at most half "
                "full when the drainer keeps up");

  HitRings() = default;
  HitRings(const HitRings&) = delete;
  HitRings& operator=(const HitRings&) = delete;

  // Queues a hit of `h` in ring `slot`. Returns whether the caller should
  // try_lock and drain: every kDrainInterval-th hit of the ring, and every
  // dropped one. REQUIRES: the calling thread owns `slot`.
  bool Enqueue(uint32_t slot, const HashPair& h) {
    Ring& r = rings_[slot];
    const uint64_t t = r.tail.load(std::memory_order_relaxed);
    if (t - r.head.load(std::memory_order_acquire) == kSlots) {
      r.dropped.store(r.dropped.load(std::memory_order_relaxed) + 1,
                      std::memory_order_relaxed);
      return true;
    }
    Cell& cell = r.cells[t & kMask];
    cell.h1.store(h.h1, std::memory_order_relaxed);
    cell.h2.store(h.h2, std::memory_order_relaxed);
    r.tail.store(t + 1, std::memory_order_release);
    return (t + 1) % kDrainInterval == 0;
  }

  // Consumes ring `slot`'s published hits in order, calling fn(const
  // HashPair&) for each; returns how many (at most kSlots).
  // REQUIRES: serialized with every other Drain and dropped().
  template <typename Fn>
  size_t Drain(size_t slot, Fn&& fn) {
    Ring& r = rings_[slot];
    const uint64_t t = r.tail.load(std::memory_order_acquire);
    const uint64_t h = r.head.load(std::memory_order_relaxed);
    for (uint64_t i = h; i < t; ++i) {
      const Cell& cell = r.cells[i & kMask];
      fn(HashPair{cell.h1.load(std::memory_order_relaxed),
                  cell.h2.load(std::memory_order_relaxed)});
    }
    r.head.store(t, std::memory_order_release);
    return t - h;
  }

  // Hits dropped because their ring was full, over all rings.
  // REQUIRES: serialized with Drain.
  uint64_t dropped() const {
    uint64_t total = 0;
    for (const Ring& r : rings_) {
      total += r.dropped.load(std::memory_order_relaxed);
    }
    return total;
  }

 private:
  static constexpr uint64_t kMask = kSlots - 1;

  struct Cell {
    std::atomic<uint64_t> h1{0};
    std::atomic<uint64_t> h2{0};
  };
  struct Ring {
    // The producer's line.
    alignas(kCacheLineSize) std::atomic<uint64_t> tail{0};
    std::atomic<uint64_t> dropped{0};
    // The drainer's line.
    alignas(kCacheLineSize) std::atomic<uint64_t> head{0};
    alignas(kCacheLineSize) std::array<Cell, kSlots> cells;
  };
  static_assert(std::atomic<uint64_t>::is_always_lock_free,
                "the read path must not fall back to a lock");

  std::array<Ring, kRings> rings_;
};

}  // namespace furrballs

#endif  // FURRBALLS_ENGINE_ARC_HIT_RINGS_H_
