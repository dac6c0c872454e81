// service/request_byte_gate.h: RequestByteGate, the server-wide cap on the
// bytes of requests the service holds (--max_in_flight_mb), and the queue of
// MultiSets waiting for room before gRPC reads them.
//
// Thread safety: thread-safe (one mutex, engine/common/sync.h; waiters are
// called outside it).
//
// Why a gate before the read. gRPC 1.51 reads a unary request whole before
// the service sees it: chttp2 opens the stream's flow-control window to the
// message's full length as soon as a read is pending (the stream's
// min_progress_size), and checks the length against the receive limit only
// once every byte has arrived (message_size_filter). Its ResourceQuota does
// not stop reading either: past it a reclaimer cancels streams at random.
// So 16 callers with 2 MultiSets of 2 MiB each in flight had 64 MiB being
// received at once, whatever the service then refused. MultiSet is therefore
// served as a stream of one message (service/cache_service.h): gRPC reads
// nothing past the stream's initial window until the service asks, and the
// service asks only once this gate has room.
//
// The size of a message is unknown until it has been read, so a read
// reserves an estimate: the largest of the last kRecentReads reads settled,
// or, before any, the largest message allowed, but at least a
// kMaxSmallReads-th of the gate and at most all of it.
// When the read is done the reservation becomes the message's real size,
// held until the request is answered. A read is admitted while the bytes
// held and reserved leave room for its reservation, or when nothing is held
// at all (so a message larger than the cap still runs, alone); the others
// wait in arrival order. The bound is exact for messages no larger than the
// recent ones; a burst of larger ones can pass it by the difference for
// each read admitted before the first of them settles (at most
// kMaxSmallReads reads, fewer the larger the estimate), before the
// estimate has grown.
//
// Unary requests read by gRPC (Get, Set, ...) are counted too, once
// received: TryAcquireOrAlone refuses one that does not fit, and while a
// read waits, one that does not fit beside the reservation of the read at
// the head of the queue, so that unary traffic cannot keep a read that
// needs an empty gate waiting forever (it is refused RESOURCE_EXHAUSTED
// meanwhile instead).
#ifndef FURRBALLS_SERVICE_REQUEST_BYTE_GATE_H_
#define FURRBALLS_SERVICE_REQUEST_BYTE_GATE_H_

#include <array>
#include <cstddef>
#include <deque>

#include <absl/base/thread_annotations.h>

#include "engine/common/sync.h"

namespace furrballs::service {

class RequestByteGate {
 public:
  // A read waiting for room. Admitted is called once, on whichever thread
  // made the room, without the gate's lock; the waiter then starts its read
  // and, when done, calls Settle with `reserved`.
  class Waiter {
   public:
    virtual void Admitted(size_t reserved) = 0;

   protected:
    ~Waiter() = default;
  };

  // What a MultiSet call holds besides its message from its read until
  // gRPC's OnDone, which the gate counts with the message. gRPC 1.51 runs a
  // callback reactor's OnDone, which ends the call (its gRPC arena, the
  // reactor, the reply), on its default-executor thread, while the nexting
  // thread reads and answers the next calls: when the executor lags (a
  // loaded or starved machine), answered calls pile up. In 64 B fills of
  // 2026-11-25 up to 512 answered MultiSets waited at once, about 21 KiB
  // each in the nexting thread's malloc arena (peak 11.7 MiB), which glibc
  // kept resident after they ended (bench/results/2026-11-25-arcrise).
  // Counting them caps them with the other request bytes.
  static constexpr size_t kCallStateBytes = size_t{20} << 10;

  // How many settled reads the estimate remembers.
  static constexpr size_t kRecentReads = 16;
  // A read reserves at least limit / kMaxSmallReads, so at most this many
  // reads are in progress at once however small the recent messages were.
  static constexpr size_t kMaxSmallReads = 16;

  // At most `limit` bytes held (0: no cap, and reads are never queued);
  // before any read is settled a read reserves min(first_estimate, limit).
  RequestByteGate(size_t limit, size_t first_estimate);

  RequestByteGate(const RequestByteGate&) = delete;
  RequestByteGate& operator=(const RequestByteGate&) = delete;

  // Counts `n` bytes already received, all or none; false (nothing taken)
  // if they do not fit beside what is held, unless nothing is held. Every
  // true is matched by one Release(n).
  bool TryAcquireOrAlone(size_t n);

  // Gives back `n` bytes taken by TryAcquireOrAlone or settled by Settle,
  // and admits the waiters that now fit.
  void Release(size_t n);

  // Asks for room to read one message. Returns true with *reserved set when
  // the read may start now; otherwise queues `waiter` (which must stay
  // valid until Admitted or a successful CancelWait) and returns false.
  bool Reserve(Waiter* waiter, size_t* reserved);

  // Removes a queued waiter (its call was cancelled); false if it is not
  // queued (admitted already, or never queued), and then Admitted is or was
  // called for it.
  bool CancelWait(Waiter* waiter);

  // A read admitted with `reserved` is done: `actual` bytes (0 when the read
  // failed) are now held, to be given back by Release(actual); the
  // estimate learns `actual` when the read succeeded.
  void Settle(size_t reserved, size_t actual, bool read_ok);

  size_t limit() const { return limit_; }
  // Bytes held or reserved now; for messages, tests and metrics.
  size_t in_flight() const;
  // Reads waiting now; for tests.
  size_t waiting() const;
  // The largest number of bytes held or reserved at once so far; for tests.
  size_t peak() const;

 private:
  // The reservation of the next read. REQUIRES: mu_ held.
  size_t EstimateLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether `n` more bytes fit now. REQUIRES: mu_ held.
  bool FitsLocked(size_t n) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void TakeLocked(size_t n) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Admits the waiters at the head of the queue that fit, and calls them.
  // Takes mu_.
  void AdmitWaiters();

  const size_t limit_;
  const size_t first_estimate_;
  mutable Mutex mu_;
  size_t in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  size_t peak_ ABSL_GUARDED_BY(mu_) = 0;
  std::deque<Waiter*> waiters_ ABSL_GUARDED_BY(mu_);
  // The last kRecentReads settled sizes, a ring; recent_count_ of them set.
  std::array<size_t, kRecentReads> recent_ ABSL_GUARDED_BY(mu_){};
  size_t recent_next_ ABSL_GUARDED_BY(mu_) = 0;
  size_t recent_count_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace furrballs::service

#endif  // FURRBALLS_SERVICE_REQUEST_BYTE_GATE_H_
