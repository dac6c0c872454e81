// clients/cpp/batcher.h: automatic batching for Client: operations that
// concurrent callers issue coalesce into Batch messages on a small pool of
// streams (the Batch RPC), flat-combining style.
//
// Thread safety: thread-safe; Submit may be called from any thread,
// including from an operation's callback. The destructor must run on a
// thread of the user (never a gRPC callback thread).
//
// Protocol, per stream (all state under its mutex; no gRPC Start* call is
// made while holding it, since gRPC may run a reaction inline):
//   - An operation joins the stream's filling batch. If no batch of that
//     stream is written or awaiting its answer, the filling batch is sent at
//     once, so a lone caller is not delayed and there is no timer.
//     Otherwise it waits: while one batch is in flight the next one fills,
//     and it is sent when the answer to the one in flight has been handed
//     to its callbacks (or when the write finishes if the stream allows two
//     in flight): the callers that answer releases join the batch waiting
//     rather than the first of them going alone. At most
//     max_ops operations go in one message; a full batch is sent as soon as
//     the stream allows.
//   - One read is outstanding, except while an answer is handed out: each
//     BatchResponse is matched to its batch by id and its results handed to
//     the operations' callbacks in order, outside the lock; the next read is
//     posted after the next batch's write. gRPC 1.51 writes the window
//     updates for the answer read when the next read is posted: posted
//     first, they went in a write of their own, the server received two
//     segments per message and its kernel acked each at once
//     (docs/service_bench.md).
//   - OnDone (the stream ended: an error, or the close at destruction) fails
//     every operation still waiting with the stream's status (UNAVAILABLE if
//     it ended OK) and marks the stream dead; the next Submit on that slot
//     opens a new stream. Dead streams are kept until the Batcher is
//     destroyed, on the user's thread (a stream released on a gRPC thread
//     could release the channel there, which gRPC 1.51 does not survive; see
//     PipelineReactor in client.cc).
// Streams are picked round-robin per operation.
#ifndef FURRBALLS_CLIENTS_CPP_BATCHER_H_
#define FURRBALLS_CLIENTS_CPP_BATCHER_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <absl/base/thread_annotations.h>
#include <absl/status/statusor.h>
#include <absl/synchronization/mutex.h>

#include "furrballs/v1/furrballs.grpc.pb.h"

namespace furrballs::client::internal {

class BatchStream;

class Batcher {
 public:
  // The answer to one operation: its PipelineResponse when its code is OK,
  // else its status.
  using Callback =
      std::function<void(absl::StatusOr<::furrballs::v1::PipelineResponse>)>;

  struct Options {
    int streams = 2;
    size_t max_ops = 1024;  // below the server's --max_batch_ops (4096)
    std::string bearer_token;
  };

  // `stub` must outlive the Batcher.
  Batcher(::furrballs::v1::Cache::Stub* stub, Options options);
  // Half-closes every stream and waits until each has ended (operations
  // still waiting get its status).
  ~Batcher();
  Batcher(const Batcher&) = delete;
  Batcher& operator=(const Batcher&) = delete;

  // Sends `op` in a batch; `done` runs exactly once, on a gRPC thread (or
  // inline if the stream has failed). The server fails it with
  // DEADLINE_EXCEEDED if it has not started by `deadline`; a caller that
  // must not wait past the deadline for an unresponsive server waits on its
  // own (the sync calls of Client do).
  void Submit(::furrballs::v1::PipelineRequest op,
              std::chrono::system_clock::time_point deadline, Callback done);

  // Submit, and `done` runs with DEADLINE_EXCEEDED at `deadline` if no
  // answer came by then (a later answer is dropped), as an asynchronous
  // unary call would. A watcher thread, started on first use, keeps the
  // deadlines; it only fails calls, so it adds no latency to any answer.
  // An operation leaves the watcher's set when it is answered, so the set
  // holds only operations in flight.
  void SubmitWithDeadline(::furrballs::v1::PipelineRequest op,
                          std::chrono::system_clock::time_point deadline,
                          Callback done);

  // Operations of SubmitWithDeadline not yet answered nor expired.
  size_t deadlines_watched() const;

 private:
  struct Watched;
  using WatchSet =
      std::multimap<std::chrono::system_clock::time_point,
                    std::shared_ptr<Watched>>;

  void WatchLoop();
  // Removes `w` from watched_ if it is there.
  void Unwatch(Watched& w);

  // A new stream for slot `slot` if the slot still holds `seen` (null, or a
  // stream that has ended), else the stream another thread put there.
  BatchStream* OpenStream(size_t slot, BatchStream* seen);

  ::furrballs::v1::Cache::Stub* const stub_;
  const Options options_;
  const size_t slot_count_;
  std::atomic<size_t> next_slot_{0};

  mutable absl::Mutex watch_mu_;
  WatchSet watched_ ABSL_GUARDED_BY(watch_mu_);
  // The deadline the watcher sleeps until (max while it is not sleeping on
  // one): an insertion earlier than it wakes the watcher, while answered
  // operations leaving the set do not (that would be a wake-up per answer;
  // the watcher wakes at its old deadline instead and finds nothing due).
  std::chrono::system_clock::time_point watch_until_ ABSL_GUARDED_BY(
      watch_mu_) = std::chrono::system_clock::time_point::max();
  bool watch_stop_ ABSL_GUARDED_BY(watch_mu_) = false;
  std::thread watcher_;  // started under watch_mu_, joined by the destructor

  // Each slot's current stream, read without a lock on every Submit and
  // replaced under mu_ (OpenStream): the release store there pairs with
  // Submit's acquire load, so a stream seen is fully constructed, and no
  // stream is freed before the Batcher (streams_ keeps them all).
  std::vector<std::atomic<BatchStream*>> slots_;
  absl::Mutex mu_;
  // Every stream ever opened, live or dead, destroyed with the Batcher.
  std::vector<std::unique_ptr<BatchStream>> streams_ ABSL_GUARDED_BY(mu_);
};

}  // namespace furrballs::client::internal

#endif  // FURRBALLS_CLIENTS_CPP_BATCHER_H_
