// engine/furrball/node_job.h: NodeJob, the worker thread pinned to one NUMA
// node (report §2.5, §2.10.3, §3.5): it builds the node's shard at start-up,
// then runs submitted jobs from a bounded queue and the node's maintenance
// pass every interval.
//
// Thread safety: thread-safe. Submit may be called from any thread, Stop
// from any thread but the worker itself; the init, jobs and maintenance
// functions all run on the worker thread, one at a time.
//
// Protocol. One Mutex (sync.h) guards the queue (a fixed ring allocated at
// construction, so Submit never allocates) and the phase:
//
//   kStarting  -> kInitDone   worker: init() returned (status recorded)
//   kInitDone  -> kRunning    Activate(): maintenance installed
//   any        -> kStopping   Stop(): no more submissions (kShuttingDown)
//
// The worker waits on a CondVar for "a job is queued, stop was requested, or
// the next maintenance deadline passed"; Submit and Stop signal it, so
// nothing polls or sleeps. The deadline is the maintenance interval while
// the node is active; while consecutive passes report it idle (no request
// since the previous pass, no unfinished work) the wait doubles, up to
// kMaxIdleMaintenanceDelay, so an idle cache does not wake 500 times a
// second per node. A job resets it to the interval at once (requests reach
// a node as jobs in the service's default dispatch); a request that calls
// the shard directly is seen by the next pass, at most
// kMaxIdleMaintenanceDelay later. Nothing waits for that pass: a writer out
// of room runs the reclaimer's steps itself (node_shard.h). On Stop the worker first runs every job already
// queued (a job's context may own resources only the job frees), then
// exits, and Stop joins it. Joining replaces the report's
// Destroying/ActiveMaintenanceRefs double-check (§2.10.5): once Stop returns
// no maintenance pass can be running or start, so the shard can be freed.
#ifndef FURRBALLS_ENGINE_FURRBALL_NODE_JOB_H_
#define FURRBALLS_ENGINE_FURRBALL_NODE_JOB_H_

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory_resource>
#include <thread>
#include <vector>

#include <absl/base/thread_annotations.h>
#include <absl/status/status.h>

#include "engine/common/error.h"
#include "engine/furrball/sync.h"
#include "engine/numatic/numatic.h"

namespace furrballs {
namespace furrball_internal {

// What a maintenance pass found: the node served requests or has work left
// (kActive), or neither (kIdle).
enum class Maintenance : uint8_t { kActive, kIdle };

// The longest wait between maintenance passes of an idle node (when the
// interval itself is shorter).
inline constexpr std::chrono::milliseconds kMaxIdleMaintenanceDelay{128};

// The wait before the next pass, given the last wait and what the pass
// found: `interval` after an active pass, twice the last wait (at most
// max(interval, kMaxIdleMaintenanceDelay)) after an idle one.
std::chrono::milliseconds NextMaintenanceDelay(
    std::chrono::milliseconds last, Maintenance found,
    std::chrono::milliseconds interval);

class NodeJob {
 public:
  using Job = void (*)(void* context);

  struct Options {
    int node = 0;
    // Pin the worker to the node's CPUs before init.
    bool pin = true;
    // Rounded up to a power of two.
    size_t queue_capacity = 1024;
    std::chrono::milliseconds maintenance_interval{2};
  };

  // Starts the worker thread. It pins itself (when asked) and runs `init`;
  // WaitForInit returns init's status. The queue lives on `resource`.
  NodeJob(const Numatic* numatic, const Options& options,
          std::pmr::memory_resource* resource,
          std::function<absl::Status()> init);
  ~NodeJob();  // Stop()

  NodeJob(const NodeJob&) = delete;
  NodeJob& operator=(const NodeJob&) = delete;

  // Blocks until init has run on the worker.
  absl::Status WaitForInit();

  // Starts the job/maintenance loop. REQUIRES: WaitForInit() returned OK.
  void Activate(std::function<Maintenance()> maintenance);

  // Queues `job`; kQueueFull if the queue is full, kShuttingDown once Stop
  // began. Jobs run in submission order.
  Error Submit(Job job, void* context);

  // Rejects new jobs, runs the queued ones, stops the worker and joins it.
  // Idempotent.
  void Stop();

  // Whether the calling thread is a NodeJob worker (of any cache). A
  // worker must never wait for jobs of other workers (broadcast_get.h).
  static bool OnWorkerThread();

  int node() const { return options_.node; }
  // The ring a queue of `capacity` jobs allocates: capacity rounded up to a
  // power of two, one Task each (MemoryPlan counts it in the budget).
  static size_t QueueSlotsFor(size_t capacity) {
    return std::bit_ceil(std::max<size_t>(capacity, 1));
  }
  static size_t QueueBytesFor(size_t capacity) {
    return QueueSlotsFor(capacity) * sizeof(Task);
  }
  // From the options, which never change, not from ring_ (guarded by mu_:
  // its size is fixed at construction, but clang's -Wthread-safety cannot
  // know that).
  size_t queue_capacity() const {
    return QueueSlotsFor(options_.queue_capacity);
  }
  size_t memory_bytes() const { return QueueBytesFor(options_.queue_capacity); }

 private:
  struct Task {
    Job job = nullptr;
    void* context = nullptr;
  };
  enum class Phase { kStarting, kInitDone, kRunning, kStopping };

  // Jobs taken from the queue per lock acquisition.
  static constexpr size_t kBatch = 64;

  void Run(std::function<absl::Status()> init);
  void Loop();

  const Numatic* const numatic_;
  const Options options_;

  Mutex mu_;
  CondVar cv_;
  Phase phase_ ABSL_GUARDED_BY(mu_) = Phase::kStarting;
  bool stop_requested_ ABSL_GUARDED_BY(mu_) = false;
  bool init_done_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status init_status_ ABSL_GUARDED_BY(mu_);
  std::function<Maintenance()> maintenance_ ABSL_GUARDED_BY(mu_);
  std::pmr::vector<Task> ring_ ABSL_GUARDED_BY(mu_);
  size_t head_ ABSL_GUARDED_BY(mu_) = 0;
  size_t count_ ABSL_GUARDED_BY(mu_) = 0;

  std::thread thread_;
  bool joined_ = false;  // touched only by Stop's caller
  Mutex stop_mu_;  // serializes concurrent Stop calls
};

}  // namespace furrball_internal
}  // namespace furrballs

#endif  // FURRBALLS_ENGINE_FURRBALL_NODE_JOB_H_
