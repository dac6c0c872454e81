#include "engine/furrball/node_job.h"

#include <algorithm>
#include <array>
#include <bit>
#include <utility>

namespace furrballs {
namespace furrball_internal {
namespace {

thread_local bool on_worker_thread = false;

}  // namespace

bool NodeJob::OnWorkerThread() { return on_worker_thread; }

std::chrono::milliseconds NextMaintenanceDelay(
    std::chrono::milliseconds last, Maintenance found,
    std::chrono::milliseconds interval) {
  if (found == Maintenance::kActive) return interval;
  return std::min(std::max(last, interval) * 2,
                  std::max(interval, kMaxIdleMaintenanceDelay));
}

NodeJob::NodeJob(const Numatic* numatic, const Options& options,
                 std::pmr::memory_resource* resource,
                 std::function<absl::Status()> init)
    : numatic_(numatic),
      options_(options),
      ring_(QueueSlotsFor(options.queue_capacity), resource) {
  thread_ = std::thread([this, init = std::move(init)]() mutable {
    Run(std::move(init));
  });
}

NodeJob::~NodeJob() { Stop(); }

void NodeJob::Run(std::function<absl::Status()> init) {
  on_worker_thread = true;
  absl::Status status;
  if (options_.pin) status = numatic_->PinCurrentThreadToNode(options_.node);
  if (status.ok()) status = init();
  {
    MutexLock l(&mu_);
    init_status_ = status;
    init_done_ = true;
    if (phase_ == Phase::kStarting) phase_ = Phase::kInitDone;
    cv_.SignalAll();
    // Wait for Activate (or Stop, e.g. after another node failed to init).
    while (phase_ == Phase::kInitDone) cv_.Wait(&mu_);
    if (phase_ != Phase::kRunning) {
      // Stopped before activation: jobs cannot have been accepted (Submit
      // rejects them until kRunning), so there is nothing to drain.
      return;
    }
  }
  Loop();
}

absl::Status NodeJob::WaitForInit() {
  MutexLock l(&mu_);
  while (!init_done_) cv_.Wait(&mu_);
  return init_status_;
}

void NodeJob::Activate(std::function<Maintenance()> maintenance) {
  MutexLock l(&mu_);
  if (phase_ != Phase::kInitDone) return;
  maintenance_ = std::move(maintenance);
  phase_ = Phase::kRunning;
  cv_.SignalAll();
}

Error NodeJob::Submit(Job job, void* context) {
  MutexLock l(&mu_);
  if (phase_ == Phase::kStopping || stop_requested_) {
    return Error::kShuttingDown;
  }
  if (phase_ != Phase::kRunning) return Error::kShuttingDown;
  if (count_ == ring_.size()) return Error::kQueueFull;
  ring_[(head_ + count_) & (ring_.size() - 1)] = Task{job, context};
  ++count_;
  cv_.Signal();
  return Error::kOk;
}

void NodeJob::Loop() {
  std::array<Task, kBatch> batch;
  using Clock = CondVar::Clock;
  const std::chrono::milliseconds interval = options_.maintenance_interval;
  std::chrono::milliseconds delay = interval;
  Clock::time_point next_maintenance = Clock::now() + delay;
  std::function<Maintenance()> maintenance;
  {
    MutexLock l(&mu_);
    maintenance = maintenance_;
  }
  for (;;) {
    size_t taken = 0;
    bool stop = false;
    {
      MutexLock l(&mu_);
      while (count_ == 0 && !stop_requested_ &&
             Clock::now() < next_maintenance) {
        cv_.WaitUntil(&mu_, next_maintenance);
      }
      while (taken < kBatch && count_ > 0) {
        batch[taken++] = ring_[head_];
        head_ = (head_ + 1) & (ring_.size() - 1);
        --count_;
      }
      // Stop only once the queue is empty: Submit already rejects new jobs,
      // so every job accepted before Stop runs.
      stop = stop_requested_ && count_ == 0;
    }
    for (size_t i = 0; i < taken; ++i) batch[i].job(batch[i].context);
    if (stop) return;
    if (taken > 0 && delay > interval) {
      // Requests are back: maintenance at the interval again.
      delay = interval;
      next_maintenance = std::min(next_maintenance, Clock::now() + delay);
    }
    if (Clock::now() >= next_maintenance) {
      delay = NextMaintenanceDelay(delay, maintenance(), interval);
      next_maintenance = Clock::now() + delay;
    }
  }
}

void NodeJob::Stop() {
  MutexLock stop_lock(&stop_mu_);
  if (joined_) return;
  {
    MutexLock l(&mu_);
    stop_requested_ = true;
    if (phase_ != Phase::kRunning) phase_ = Phase::kStopping;
    cv_.SignalAll();
  }
  // The thread may still be in init; joining waits for it, and Run returns
  // without looping because the phase is no longer kInitDone/kRunning.
  thread_.join();
  joined_ = true;
  MutexLock l(&mu_);
  phase_ = Phase::kStopping;
}

}  // namespace furrball_internal
}  // namespace furrballs
