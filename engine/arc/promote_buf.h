// engine/arc/promote_buf.h: a fixed circular MPSC buffer of HashPairs that
// defers ARC promotions from the lock-free read path (report §2.8.2, §3.14).
//
// Thread safety: Enqueue is thread-safe and lock-free (one fetch_add, one
// CAS, three stores; it never waits). Drain and the counters are
// thread-compatible: calls to them must be serialized by the caller
// (ConcurrentARC holds its write SpinLock), but may run concurrently with any
// number of Enqueues.
//
// Find() must tell ARC "this key was hit", but taking the write lock on every
// read was the dominant Phase 2a regression. Instead a reader enqueues the
// key here, and whoever holds the lock next drains the buffer and applies the
// hits in order. Every kDrainInterval-th enqueue asks its caller to try_lock
// and drain, so the drain rate follows the fill rate. A promotion that finds
// the buffer full is dropped: the key stays resident, merely a little staler.
//
// Protocol
//
// Producers take tickets from `head_` (fetch_add, relaxed: the ticket only
// needs to be unique). Ticket t belongs to cell t % kSlots; t / kSlots is its
// lap. Each cell has a `seq` word = (ticket << 2) | state, so a cell always
// says which ticket it is about:
//
//   Free(t)     the cell waits for ticket t's producer
//   Writing(t)  t's producer claimed it and is storing the key
//   Ready(t)    t's key is published
//
//   Free(t)    -> Writing(t)  producer t: CAS, acquire
//   Writing(t) -> Ready(t)    producer t: store, release
//   Ready(t)   -> Free(n)     drainer: store, release, after reading the key
//   Free(t)    -> Free(n)     drainer: CAS, acq_rel ("skip")
//   where n > t is a later ticket of the same cell (below).
//
// - A producer whose CAS fails found its cell on another lap (the buffer is
//   full, or the drainer skipped its ticket): it drops its key, returns
//   accepted = false, and never touches the cell again. It never waits.
// - The key is two relaxed atomics, so no access is a data race. The release
//   store of Ready(t) pairs with the drainer's acquire load of seq: the
//   drainer reads t's key, not an older one. The drainer's release of Free(n)
//   pairs with producer n's acquire CAS: the drainer's reads of the old key
//   happen before the new key is written. A skip CAS and a producer's claim
//   CAS race on the same word; exactly one wins.
// - The drainer (one at a time, under the caller's lock) keeps `cursor`,
//   below which every ticket is resolved (consumed or counted as dropped).
//   It snapshots H = head and visits the cells of tickets [cursor,
//   min(H, cursor + kSlots)), each cell at most once, in ticket order, so a
//   drain is FIFO. A cell is on some lap L (L == its window position unless
//   producers outran the drainer or an earlier drain moved the cell on):
//     Ready(L)    consume the key, then Free(next).
//     Writing(L)  a producer is between its two stores; leave the cell.
//     Free(L)     L >= H: waiting for an unissued ticket; nothing to do.
//                 L < H: ticket L was issued but is unclaimed: its producer
//                 dropped (the cell was busy when it tried) or has not reached
//                 its CAS yet, and the two look the same. If L was already
//                 issued at the previous drain (L < skip_below_), skip to
//                 Free(next); otherwise leave it one more drain.
//   next = the cell's first ticket at or after H (L + kSlots when L >= H).
//   Every ticket of the cell from L to next is resolved at once, so when
//   producers outrun the drainer it catches up in one visit per cell rather
//   than walking every lost ticket, and the cell is then free for the very
//   next producer that maps to it. `cursor` becomes the lowest lap left
//   unresolved, or H.
// - Each ticket is therefore consumed exactly once or, when its cell's lap
//   moves past it unclaimed, counted exactly once as dropped, and its
//   producer's CAS then fails. So `dropped()` is counted by the drainer (no
//   shared counter on the read path); it lags the drops by up to two drains.
//
// Tickets are 62-bit (two bits hold the state): at 10^9 enqueues per second
// they last 146 years.
#ifndef FURRBALLS_ENGINE_ARC_PROMOTE_BUF_H_
#define FURRBALLS_ENGINE_ARC_PROMOTE_BUF_H_

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "engine/common/hash_pair.h"
#include "engine/common/raw_allocator.h"

namespace furrballs {

class PromoteBuf {
 public:
  static constexpr size_t kSlots = 256;
  static constexpr uint64_t kDrainInterval = 64;
  static_assert((kSlots & (kSlots - 1)) == 0,
                "tickets map to cells with a mask");
  static_assert(kSlots % kDrainInterval == 0 && kSlots >= 2 * kDrainInterval,
                "a drain every kDrainInterval enqueues keeps the buffer at "
                "most half full when the drainer keeps up");

  struct EnqueueResult {
    bool accepted;      // false: the buffer was full; the promotion is lost
    bool should_drain;  // try_lock and Drain (every kDrainInterval-th
                        // enqueue, and whenever a promotion was dropped)
  };

  PromoteBuf() {
    for (size_t i = 0; i < kSlots; ++i) {
      cells_[i].seq.store(Encode(i, kFree), std::memory_order_relaxed);
    }
  }
  PromoteBuf(const PromoteBuf&) = delete;
  PromoteBuf& operator=(const PromoteBuf&) = delete;

  EnqueueResult Enqueue(const HashPair& h) {
    const uint64_t t = head_.fetch_add(1, std::memory_order_relaxed);
    Cell& cell = cells_[t & kMask];
    uint64_t expected = Encode(t, kFree);
    // Acquire: pairs with the drainer's release of Free(t), so its reads of
    // the previous lap's payload happen before our writes below.
    if (!cell.seq.compare_exchange_strong(expected, Encode(t, kWriting),
                                          std::memory_order_acquire,
                                          std::memory_order_relaxed)) {
      return EnqueueResult{false, true};
    }
    cell.h1.store(h.h1, std::memory_order_relaxed);
    cell.h2.store(h.h2, std::memory_order_relaxed);
    // Release: publishes the payload to the drainer's acquire load.
    cell.seq.store(Encode(t, kReady), std::memory_order_release);
    return EnqueueResult{true, (t % kDrainInterval) == kDrainInterval - 1};
  }

  // Consumes published promotions in ticket order, calling fn(const
  // HashPair&) for each; returns how many. One call visits at most kSlots
  // cells, however fast producers keep adding.
  // REQUIRES: no other Drain or counter read runs concurrently.
  template <typename Fn>
  size_t Drain(Fn&& fn) {
    // A relaxed load is enough: every ticket below any value we see was
    // issued, and the cells' own acquire loads order what we read in them.
    const uint64_t head = head_.load(std::memory_order_relaxed);
    const uint64_t end = std::min(head, cursor_ + kSlots);
    uint64_t unresolved = head;
    size_t consumed = 0;
    for (uint64_t pos = cursor_; pos < end; ++pos) {
      Cell& cell = cells_[pos & kMask];
      // Acquire: pairs with the producer's release of Ready(lap).
      uint64_t s = cell.seq.load(std::memory_order_acquire);
      const uint64_t lap = s >> 2;
      const uint64_t state = s & 3;
      // The cell's next lap: its first ticket at or after head (lap + kSlots
      // unless the drainer is more than a lap behind).
      const uint64_t next =
          lap < head ? head + ((lap - head) & kMask) : lap + kSlots;
      const uint64_t passed = (next - lap) / kSlots;  // tickets lap, ..., < next
      if (state == kReady) {
        const HashPair h{cell.h1.load(std::memory_order_relaxed),
                         cell.h2.load(std::memory_order_relaxed)};
        // Release: the reads above happen before producer `next` (acquire
        // CAS) overwrites the key.
        cell.seq.store(Encode(next, kFree), std::memory_order_release);
        dropped_ += passed - 1;
        ++consumed;
        fn(h);
      } else if (state == kFree && lap >= head) {
        // Waiting for a ticket not issued at the snapshot: nothing to do.
      } else if (state == kFree && lap < skip_below_ &&
                 // acq_rel: orders against a racing claim, and continues the
                 // release sequence of our last Free store for producer next.
                 cell.seq.compare_exchange_strong(s, Encode(next, kFree),
                                                  std::memory_order_acq_rel,
                                                  std::memory_order_relaxed)) {
        dropped_ += passed;
      } else {
        // Writing, unclaimed within its grace drain, or claimed just now.
        unresolved = std::min(unresolved, lap);
      }
    }
    cursor_ = unresolved;
    skip_below_ = head;
    drained_ += consumed;
    return consumed;
  }

  // Promotions drained so far. REQUIRES: serialized with Drain.
  uint64_t drained() const { return drained_; }
  // Promotions dropped because the buffer was full (counted when a drain
  // passes them). REQUIRES: serialized with Drain.
  uint64_t dropped() const { return dropped_; }

 private:
  static constexpr uint64_t kMask = kSlots - 1;
  static constexpr uint64_t kFree = 0, kWriting = 1, kReady = 2;

  static constexpr uint64_t Encode(uint64_t ticket, uint64_t state) {
    return (ticket << 2) | state;
  }

  struct alignas(32) Cell {
    std::atomic<uint64_t> seq{0};
    std::atomic<uint64_t> h1{0};
    std::atomic<uint64_t> h2{0};
  };
  static_assert(sizeof(Cell) == 32,
                "two cells per cache line, never straddling one");
  static_assert(std::atomic<uint64_t>::is_always_lock_free,
                "the read path must not fall back to a lock");

  // Written by every producer: alone on its line.
  alignas(kCacheLineSize) std::atomic<uint64_t> head_{0};
  // The drainer's state: alone on its line, away from head_.
  alignas(kCacheLineSize) uint64_t cursor_ = 0;  // oldest unresolved ticket
  uint64_t skip_below_ = 0;  // head at the previous drain
  uint64_t drained_ = 0;
  uint64_t dropped_ = 0;
  alignas(kCacheLineSize) std::array<Cell, kSlots> cells_;
};

}  // namespace furrballs

#endif  // FURRBALLS_ENGINE_ARC_PROMOTE_BUF_H_
