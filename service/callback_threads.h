// service/callback_threads.h: how many of gRPC's callback threads serve the
// process (--grpc_callback_threads): CallbackThreadLimit parks the others.
//
// Thread safety: thread-compatible. Create and destroy a CallbackThreadLimit
// on a thread of the program, never on a gRPC callback thread (the destructor
// waits for callbacks to return).
//
// Why. gRPC 1.51 as Debian builds it (iomgr's epoll1 poller, which cannot
// poll in the background) runs every callback-API reaction of the process,
// server and client alike, on one completion queue served by
// clamp(cores / 2, 2, 16) "nexting" threads that all poll it
// (src/cpp/common/completion_queue_cc.cc). An event wakes the thread that
// polls; before running it, that thread hands polling over to an idle one (a
// futex wake), and a reply's write completion, queued while the replying
// thread is outside the poller, wakes the poller again. On the project's
// 2-core machine that was 7.4 context switches per Batch message and most of
// the server's CPU (docs/service_bench.md, "Where the server's CPU goes").
// With one thread there is no one to hand over to: 1.9 switches per message,
// and the server CPU per key op and per unary call fell by a third
// (docs/service_bench.md has the runs).
//
// How. gRPC 1.51 has no setting for that number, so each thread over the
// limit is given something to wait on: the completion callback of a health
// check sent over an in-process channel, which runs on one of those threads
// and returns only when the limit is destroyed. A parked thread holds no lock
// and no call of the server's.
//
// The price: the threads left run everything gRPC does in callbacks, for
// every connection, so a handler that waits holds up every call (the
// service's handlers do not, except a Set behind a spill writer two pages
// behind: docs/service.md), and one thread caps the server at about one core
// of gRPC work; on a host with cores to spare for it, a larger limit (or 0,
// gRPC's own number) trades CPU per operation for throughput.
#ifndef FURRBALLS_SERVICE_CALLBACK_THREADS_H_
#define FURRBALLS_SERVICE_CALLBACK_THREADS_H_

#include <memory>

#include <absl/base/thread_annotations.h>
#include <absl/status/statusor.h>
#include <absl/synchronization/mutex.h>
#include <grpcpp/channel.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/server.h>

namespace furrballs::service {

class CallbackThreadLimit {
 public:
  // gRPC 1.51's number of callback threads on this machine.
  static int GrpcCallbackThreads();

  // What --grpc_callback_threads=-1 (the default) asks for: 1 where it was
  // measured to pay, a machine of at most two cores running gRPC 1.51
  // (docs/service_bench.md); 0 (gRPC's own number) everywhere else, where
  // one thread would cap gRPC's work at a core nobody measured it against,
  // and where an unknown gRPC version would refuse the parking.
  static int Automatic();

  // Parks gRPC's callback threads beyond `threads` (>= 1) until the result
  // is destroyed; none if gRPC runs no more than that. `server` must be
  // started (the parking calls go to its default health service, which is
  // on) and must outlive the result. Fails, with every thread released, if
  // the gRPC library is not 1.51 (whose thread count this relies on) or the
  // parking callbacks did not all start within 10 seconds.
  static absl::StatusOr<std::unique_ptr<CallbackThreadLimit>> Start(
      grpc::Server* server, int threads);

  // Releases the parked threads and waits until each has left its callback.
  ~CallbackThreadLimit();
  CallbackThreadLimit(const CallbackThreadLimit&) = delete;
  CallbackThreadLimit& operator=(const CallbackThreadLimit&) = delete;

  // Threads parked.
  int parked() const { return calls_; }

 private:
  struct Call;

  explicit CallbackThreadLimit(std::shared_ptr<grpc::Channel> channel);

  // Sends one health check whose callback parks its thread.
  void Park(Call* call);

  std::shared_ptr<grpc::Channel> channel_;
  grpc::GenericStub stub_;
  std::unique_ptr<Call[]> call_storage_;
  int calls_ = 0;

  absl::Mutex mu_;
  int waiting_ ABSL_GUARDED_BY(mu_) = 0;   // callbacks parked right now
  int returned_ ABSL_GUARDED_BY(mu_) = 0;  // callbacks that have returned
  bool released_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace furrballs::service

#endif  // FURRBALLS_SERVICE_CALLBACK_THREADS_H_
