// service/dispatcher.h: hands cache operations to the NodeJob worker of the
// node that owns their key, in batches (flat combining, seeds/004), merging
// same-key writes inside a batch (write compaction, seeds/001).
//
// Thread safety: Submit() and Stop() are thread-safe. A CacheOp belongs to the
// dispatcher from a successful Submit() until its on_done callback runs.
//
// Protocol. Each node has a bounded FIFO of CacheOps guarded by a mutex and a
// flag `drain_scheduled`. Submit appends under the mutex; if no drain is
// scheduled it sets the flag and, after releasing the mutex, submits one drain
// job to the node's worker (FurrBall::SubmitToNode). So at most one drain job
// per node is ever queued or running, and the worker is the combiner: it takes
// up to max_batch ops at a time, executes them against its own shard in
// arrival order and completes each one. When the queue is empty it clears the
// flag under the mutex, so an op appended after that schedules a new drain;
// an op appended before it is taken by the running drain. Nothing is lost in
// between because the flag and the queue change under the same mutex.
//
// Write compaction. Inside one batch, an unconditional Set to key k that is
// followed by another unconditional Set to k, with no other operation on k in
// between, is superseded: only the last write of such a run is applied, with
// WriteOptions::superseded_writes telling the engine to consume one version
// per merged write. The merged writes are acknowledged only after the last
// one was applied, each with its own (already stale) version, so no write is
// acknowledged before its effect is visible and per-key linearizability holds:
// the merged writes are linearized immediately before the applied one. If the
// applied write fails, the merged writes are executed one by one instead.
//
// Direct mode executes each op inline in Submit() (the ablation switch),
// except a Get that needs the disk (below).
//
// SubmitBatch is Submit for many ops of one request (the Batch stream): the
// same protocol, with one mutex acquisition per node run instead of per op.
//
// Disk reads. Neither a worker nor a gRPC thread waits for the spill tier:
// with the spill tier on, Gets run with FurrBall::GetFromMemory, and a Get
// whose key is only on disk (on_disk) is handed (in NodeJob mode once its
// batch is done, in direct mode before Submit returns) to one of a few
// reload threads, which finish it with FurrBall::Get and run its on_done.
// So a ghost hit's disk read holds up neither the node's queue nor
// the other ops of its batch. The deferred Get takes effect after ops that
// arrived after it; it was in flight alongside them, so the order is still
// one a client could see (Pipeline answers in completion order anyway), and
// the reload never brings back a value older than an acknowledged write
// (docs/spill.md, "No resurrection").
#ifndef FURRBALLS_SERVICE_DISPATCHER_H_
#define FURRBALLS_SERVICE_DISPATCHER_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <absl/base/thread_annotations.h>

#include "engine/common/error.h"
#include "engine/common/hash_pair.h"
#include "engine/common/sync.h"
#include "engine/furrball/furrball.h"

namespace furrballs::service {

enum class OpKind : uint8_t { kGet, kSet, kDelete, kTouch };

enum class DispatchMode : uint8_t {
  kNodeJob = 0,  // queue to the owning node's worker; batch and compact
  kDirect = 1,   // execute in the calling (gRPC) thread
};

// One cache operation. Owned by the RPC that created it.
struct CacheOp {
  using Clock = std::chrono::steady_clock;

  OpKind kind = OpKind::kGet;
  HashPair hash;
  std::string_view key;               // kGet, kSet (hash is its hash); must
                                      // outlive the op
  std::string_view value;             // kSet; must outlive the op
  WriteOptions write;                 // kSet
  uint64_t ttl_ms = 0;                // kTouch
  Clock::time_point deadline = Clock::time_point::max();
  std::string* value_out = nullptr;   // kGet destination

  // Outcome, valid when on_done runs.
  bool deadline_exceeded = false;     // not executed: deadline had passed
  Error error = Error::kOk;
  GetResult get;
  SetResult set;
  DeleteResult del;

  // Called exactly once per successfully submitted op, on the worker thread
  // (or inside Submit in direct mode), or on a reload thread for a Get that
  // read the disk. May delete the op.
  void (*on_done)(CacheOp* op, void* context) = nullptr;
  void* done_context = nullptr;

  CacheOp* next = nullptr;  // queue link, owned by the dispatcher
};

struct DispatcherOptions {
  // kDirect measured faster on every cell of docs/service_bench.md (one
  // socket, 2 cores); kNodeJob is the switch for hosts where keeping each
  // node's work on that node should pay for the queue hop.
  DispatchMode mode = DispatchMode::kDirect;
  // Ops waiting per node before Submit fails fast with kQueueFull.
  size_t queue_capacity = 4096;
  // Ops a worker takes per drain.
  size_t max_batch = 64;
  bool write_compaction = true;
  // With the spill tier on: threads that finish the Gets whose keys are only
  // on disk (see "Disk reads" above).
  int reload_threads = 2;
};

// Per-node dispatch counters, written by that node's worker only.
struct DispatchStats {
  int node = 0;  // the node's id, as NodeStatsSnapshot::node
  uint64_t batches = 0;
  uint64_t ops = 0;
  uint64_t merged_writes = 0;
  uint64_t deadline_expired = 0;
  uint64_t rejected_queue_full = 0;
  uint64_t queue_depth = 0;
};

class Dispatcher {
 public:
  Dispatcher(FurrBall* engine, const DispatcherOptions& options);
  ~Dispatcher();
  Dispatcher(const Dispatcher&) = delete;
  Dispatcher& operator=(const Dispatcher&) = delete;

  // Hands `op` to the worker of the node that owns op->hash. Returns kOk when
  // on_done will run; kQueueFull or kShuttingDown when it will not.
  Error Submit(CacheOp* op);

  // Hands over many ops at once: on_done runs for every one of them, a
  // refused op's with its error (kQueueFull, kShuttingDown) set. The ops
  // should be ordered by IndexFor(op->hash): each run of one node's ops is
  // appended to its queue under one lock acquisition, and in direct mode the
  // clock is read once for the whole call to check the deadlines. Per-key
  // order is the ops' order. The array may be freed by the last on_done: it
  // is not read after the last op was handed over.
  void SubmitBatch(CacheOp* const* ops, size_t n);

  // After Stop(), Submit returns kShuttingDown. Ops already queued still run;
  // WaitIdle() returns once they all completed.
  void Stop();
  void WaitIdle();

  // The id of the node whose worker runs ops on `h`.
  int NodeFor(const HashPair& h) const;
  // The index of `h`'s node queue, in [0, queue_count()): for grouping ops
  // by node before SubmitBatch.
  int IndexFor(const HashPair& h) const;
  int queue_count() const { return static_cast<int>(queues_.size()); }
  // One entry per node, in index order (FurrBall::router()).
  std::vector<DispatchStats> Stats() const;
  const DispatcherOptions& options() const { return options_; }

 private:
  struct NodeQueue;

  static void DrainThunk(void* node_queue);
  void Drain(NodeQueue& q);
  void ExecuteBatch(CacheOp** batch, size_t n, NodeQueue& q);
  void Execute(CacheOp& op);
  // Hands a Get whose key is only on disk to a reload thread.
  void DeferToReload(CacheOp* op);
  void ReloadLoop();

  FurrBall* const engine_;
  const DispatcherOptions options_;
  std::vector<std::unique_ptr<NodeQueue>> queues_;  // by node index
  std::atomic<bool> stopped_{false};

  // Gets waiting for a disk read, linked through CacheOp::next, and the
  // threads that do the reads (none unless the spill tier is on).
  Mutex reload_mu_;
  CondVar reload_work_;  // an op was queued, or the threads must exit
  CondVar reload_idle_;  // the queue is empty and no read runs
  CacheOp* reload_head_ ABSL_GUARDED_BY(reload_mu_) = nullptr;
  CacheOp* reload_tail_ ABSL_GUARDED_BY(reload_mu_) = nullptr;
  int reloads_running_ ABSL_GUARDED_BY(reload_mu_) = 0;
  bool reload_exit_ ABSL_GUARDED_BY(reload_mu_) = false;
  std::vector<std::thread> reload_threads_;  // set by the constructor
};

}  // namespace furrballs::service

#endif  // FURRBALLS_SERVICE_DISPATCHER_H_
