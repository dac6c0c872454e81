// engine/furrball/node_thread_testing.h: running test code as a thread of
// one node of a FurrBall, for tests of the routings and of keys that follow
// their readers (the cache asks Numatic for the calling thread's node).
//
// Thread safety: thread-safe; each call waits only for its own job.
#ifndef FURRBALLS_ENGINE_FURRBALL_NODE_THREAD_TESTING_H_
#define FURRBALLS_ENGINE_FURRBALL_NODE_THREAD_TESTING_H_

#include <sched.h>

#include <functional>

#include "engine/common/error.h"
#include "engine/furrball/furrball.h"
#include "engine/furrball/sync.h"

namespace furrballs {
namespace furrball_testing {

// Runs `fn` on node `node`'s pinned worker and waits for it, so that
// GetCurrentNode() is that node inside it. kOk, or SubmitToNode's error
// (then `fn` did not run).
inline Error RunOnNode(FurrBall& ball, int node,
                       const std::function<void()>& fn) {
  struct Ctx {
    const std::function<void()>* fn;
    furrball_internal::Notification done;
  } ctx{&fn, {}};
  const Error err = ball.SubmitToNode(
      node,
      [](void* p) {
        Ctx* c = static_cast<Ctx*>(p);
        (*c->fn)();
        c->done.Notify();
      },
      &ctx);
  if (err == Error::kOk) ctx.done.WaitForNotification();
  return err;
}

// The CPUs node `node`'s worker is pinned to. A thread that restricts
// itself to them (sched_setaffinity) before its first call into `ball` is a
// thread of that node from then on, as long as no other node shares those
// CPUs (simulated topologies share CPUs only when there are more nodes than
// CPUs). Empty if the job could not be submitted.
inline cpu_set_t CpusOfNode(FurrBall& ball, int node) {
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  RunOnNode(ball, node, [&] { sched_getaffinity(0, sizeof(cpus), &cpus); });
  return cpus;
}

}  // namespace furrball_testing
}  // namespace furrballs

#endif  // FURRBALLS_ENGINE_FURRBALL_NODE_THREAD_TESTING_H_
