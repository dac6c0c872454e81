#include "service/dispatcher.h"

#include <algorithm>
#include <utility>

namespace furrballs::service {
namespace {

// Single-writer counter: only the owning worker increments, readers load.
void Bump(std::atomic<uint64_t>& c, uint64_t by = 1) {
  c.store(c.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
}

bool IsUnconditionalSet(const CacheOp& op) {
  return op.kind == OpKind::kSet && op.write.mode == SetMode::kAlways;
}

}  // namespace

struct Dispatcher::NodeQueue {
  NodeQueue(Dispatcher* d, int n, size_t max_batch)
      : dispatcher(d), node(n), batch(max_batch), final_of(max_batch),
        merged(max_batch) {
    size_t slots = 1;
    while (slots < 2 * max_batch) slots <<= 1;
    last_seen.resize(slots);
  }

  Dispatcher* const dispatcher;
  const int node;  // its id: what FurrBall::SubmitToNode takes

  Mutex mu;
  CondVar idle;  // signalled when the queue is empty and no drain is scheduled
  CacheOp* head ABSL_GUARDED_BY(mu) = nullptr;
  CacheOp* tail ABSL_GUARDED_BY(mu) = nullptr;
  size_t depth ABSL_GUARDED_BY(mu) = 0;
  bool drain_scheduled ABSL_GUARDED_BY(mu) = false;
  uint64_t rejected ABSL_GUARDED_BY(mu) = 0;

  // Written only by the draining worker (one at a time, see the protocol).
  std::atomic<uint64_t> batches{0};
  std::atomic<uint64_t> ops{0};
  std::atomic<uint64_t> merged_writes{0};
  std::atomic<uint64_t> deadline_expired{0};

  // Worker scratch, sized once so a drain never allocates.
  std::vector<CacheOp*> batch;
  std::vector<int> final_of;     // superseded op -> index of the applied write
  std::vector<uint32_t> merged;  // applied write -> writes merged into it
  struct Seen {
    HashPair hash;
    int index = -1;  // next op (in arrival order) on this key, -1 = empty
  };
  std::vector<Seen> last_seen;   // open addressing over the batch's keys
};

Dispatcher::Dispatcher(FurrBall* engine, const DispatcherOptions& options)
    : engine_(engine), options_(options) {
  const NodeRouter& router = engine_->router();
  queues_.reserve(router.count());
  for (int i = 0; i < router.count(); ++i) {
    queues_.push_back(std::make_unique<NodeQueue>(
        this, router.IdOf(i), std::max<size_t>(1, options_.max_batch)));
  }
  if (!engine_->options().spill_dir.empty()) {
    for (int i = 0; i < std::max(1, options_.reload_threads); ++i) {
      reload_threads_.emplace_back([this] { ReloadLoop(); });
    }
  }
}

Dispatcher::~Dispatcher() {
  Stop();
  WaitIdle();
  {
    MutexLock lock(&reload_mu_);
    reload_exit_ = true;
  }
  reload_work_.SignalAll();
  for (std::thread& t : reload_threads_) t.join();
}

int Dispatcher::IndexFor(const HashPair& h) const {
  const int owner = engine_->OwnerOf(h);
  if (owner >= 0) return engine_->router().IndexOf(owner);
  // Routings that do not fix a key's node still send every operation on one
  // key to one worker, which keeps per-key operations in arrival order.
  return static_cast<int>(h.h1 % queues_.size());
}

int Dispatcher::NodeFor(const HashPair& h) const {
  return queues_[IndexFor(h)]->node;
}

Error Dispatcher::Submit(CacheOp* op) {
  if (stopped_.load(std::memory_order_acquire)) return Error::kShuttingDown;
  if (options_.mode == DispatchMode::kDirect) {
    if (CacheOp::Clock::now() > op->deadline) {
      op->deadline_exceeded = true;
    } else {
      Execute(*op);
      // The calling gRPC thread does not wait for the disk either.
      if (op->kind == OpKind::kGet && op->get.on_disk) {
        DeferToReload(op);
        return Error::kOk;
      }
    }
    op->on_done(op, op->done_context);
    return Error::kOk;
  }

  NodeQueue& q = *queues_[IndexFor(op->hash)];
  bool schedule = false;
  {
    MutexLock lock(&q.mu);
    if (q.depth >= options_.queue_capacity) {
      ++q.rejected;
      return Error::kQueueFull;
    }
    op->next = nullptr;
    if (q.tail == nullptr) {
      q.head = op;
    } else {
      q.tail->next = op;
    }
    q.tail = op;
    ++q.depth;
    if (!q.drain_scheduled) {
      q.drain_scheduled = true;
      schedule = true;
    }
  }
  if (schedule && engine_->SubmitToNode(q.node, &DrainThunk, &q) != Error::kOk) {
    // The worker cannot take the job (its own queue is full or it is
    // stopping). Drain here rather than strand the op: correctness does not
    // depend on which thread combines, only on there being one at a time.
    Drain(q);
  }
  return Error::kOk;
}

void Dispatcher::DrainThunk(void* node_queue) {
  auto* q = static_cast<NodeQueue*>(node_queue);
  q->dispatcher->Drain(*q);
}

void Dispatcher::SubmitBatch(CacheOp* const* ops, size_t n) {
  if (stopped_.load(std::memory_order_acquire)) {
    for (size_t i = 0; i < n; ++i) {
      ops[i]->error = Error::kShuttingDown;
      ops[i]->on_done(ops[i], ops[i]->done_context);
    }
    return;
  }
  if (options_.mode == DispatchMode::kDirect) {
    // The Gets' cache misses, issued for the whole batch before any runs,
    // overlap (FurrBall::PrefetchGet): the serving thread sleeps between
    // messages, and what ran meanwhile has evicted the key table's lines.
    for (int step = 0; n > 1 && step < FurrBall::kPrefetchSteps; ++step) {
      for (size_t i = 0; i < n; ++i) {
        if (ops[i]->kind == OpKind::kGet) {
          engine_->PrefetchGet(ops[i]->hash, step);
        }
      }
    }
    const CacheOp::Clock::time_point now = CacheOp::Clock::now();
    for (size_t i = 0; i < n; ++i) {
      CacheOp* op = ops[i];
      if (now > op->deadline) {
        op->deadline_exceeded = true;
      } else {
        Execute(*op);
        // As in Submit: a Get that needs the disk goes to a reload thread.
        if (op->kind == OpKind::kGet && op->get.on_disk) {
          DeferToReload(op);
          continue;
        }
      }
      op->on_done(op, op->done_context);
    }
    return;
  }
  size_t begin = 0;
  while (begin < n) {
    NodeQueue& q = *queues_[IndexFor(ops[begin]->hash)];
    size_t end = begin + 1;
    while (end < n && queues_[IndexFor(ops[end]->hash)].get() == &q) ++end;
    // Ops past the queue's capacity are refused; they complete after the
    // lock is released, since on_done may do anything.
    size_t accepted = 0;
    bool schedule = false;
    {
      MutexLock lock(&q.mu);
      for (size_t i = begin; i < end && q.depth < options_.queue_capacity;
           ++i, ++accepted) {
        CacheOp* op = ops[i];
        op->next = nullptr;
        if (q.tail == nullptr) {
          q.head = op;
        } else {
          q.tail->next = op;
        }
        q.tail = op;
        ++q.depth;
      }
      q.rejected += (end - begin) - accepted;
      if (accepted > 0 && !q.drain_scheduled) {
        q.drain_scheduled = true;
        schedule = true;
      }
    }
    for (size_t i = begin + accepted; i < end; ++i) {
      ops[i]->error = Error::kQueueFull;
      ops[i]->on_done(ops[i], ops[i]->done_context);
    }
    if (schedule &&
        engine_->SubmitToNode(q.node, &DrainThunk, &q) != Error::kOk) {
      Drain(q);  // as in Submit: someone must combine
    }
    begin = end;
  }
}

void Dispatcher::Drain(NodeQueue& q) {
  // A few batches per job, then yield the worker back to maintenance and
  // other jobs by re-queueing ourselves.
  constexpr int kBatchesPerJob = 4;
  for (int round = 0;; ++round) {
    size_t n = 0;
    {
      MutexLock lock(&q.mu);
      if (q.head == nullptr) {
        q.drain_scheduled = false;
        q.idle.SignalAll();
        return;
      }
      if (round == kBatchesPerJob) {
        if (engine_->SubmitToNode(q.node, &DrainThunk, &q) == Error::kOk) {
          return;
        }
        round = 0;  // could not re-queue: keep combining here
      }
      while (q.head != nullptr && n < q.batch.size()) {
        q.batch[n++] = q.head;
        q.head = q.head->next;
      }
      if (q.head == nullptr) q.tail = nullptr;
      q.depth -= n;
    }
    ExecuteBatch(q.batch.data(), n, q);
  }
}

void Dispatcher::ExecuteBatch(CacheOp** batch, size_t n, NodeQueue& q) {
  const auto now = CacheOp::Clock::now();
  uint64_t expired = 0;
  for (size_t i = 0; i < n; ++i) {
    batch[i]->deadline_exceeded = now > batch[i]->deadline;
    expired += batch[i]->deadline_exceeded;
    q.final_of[i] = -1;
    q.merged[i] = 0;
  }

  // Write compaction: walk the batch backwards remembering, per key, the
  // next live op on it. An unconditional Set whose next op on the same key
  // is also an unconditional Set is superseded by that run's last write.
  uint64_t merged_total = 0;
  if (options_.write_compaction && n > 1) {
    const size_t mask = q.last_seen.size() - 1;
    std::fill(q.last_seen.begin(), q.last_seen.end(), NodeQueue::Seen{});
    for (size_t i = n; i-- > 0;) {
      CacheOp& op = *batch[i];
      if (op.deadline_exceeded) continue;  // has no effect, breaks no run
      size_t s = op.hash.h1 & mask;
      while (q.last_seen[s].index >= 0 && !(q.last_seen[s].hash == op.hash)) {
        s = (s + 1) & mask;
      }
      NodeQueue::Seen& seen = q.last_seen[s];
      if (seen.index >= 0 && IsUnconditionalSet(op) &&
          IsUnconditionalSet(*batch[seen.index])) {
        const int last = q.final_of[seen.index] >= 0 ? q.final_of[seen.index]
                                                     : seen.index;
        q.final_of[i] = last;
        ++q.merged[last];
        ++merged_total;
      }
      seen.hash = op.hash;
      seen.index = static_cast<int>(i);
    }
  }

  for (size_t i = 0; i < n; ++i) {
    CacheOp& op = *batch[i];
    if (op.deadline_exceeded || q.final_of[i] >= 0) continue;
    op.write.superseded_writes = q.merged[i];
    Execute(op);
    if (q.merged[i] == 0) continue;
    // Acknowledge the merged writes with the versions the engine reserved
    // for them, oldest first; or, if the applied write failed, run them.
    uint64_t rank = 0;
    for (size_t j = 0; j < i; ++j) {
      if (q.final_of[j] != static_cast<int>(i)) continue;
      CacheOp& merged = *batch[j];
      if (op.error == Error::kOk) {
        merged.error = Error::kOk;
        merged.set.error = Error::kOk;
        merged.set.version = op.set.version - q.merged[i] + rank++;
      } else {
        merged.write.superseded_writes = 0;
        Execute(merged);
      }
    }
  }

  Bump(q.batches);
  Bump(q.ops, n);
  Bump(q.merged_writes, merged_total);
  Bump(q.deadline_expired, expired);
  for (size_t i = 0; i < n; ++i) {
    CacheOp* op = batch[i];
    if (op->kind == OpKind::kGet && !op->deadline_exceeded && op->get.on_disk) {
      DeferToReload(op);
    } else {
      op->on_done(op, op->done_context);
    }
  }
}

void Dispatcher::DeferToReload(CacheOp* op) {
  {
    MutexLock lock(&reload_mu_);
    op->next = nullptr;
    if (reload_tail_ == nullptr) {
      reload_head_ = op;
    } else {
      reload_tail_->next = op;
    }
    reload_tail_ = op;
  }
  reload_work_.Signal();
}

void Dispatcher::ReloadLoop() {
  for (;;) {
    CacheOp* op = nullptr;
    {
      MutexLock lock(&reload_mu_);
      while (reload_head_ == nullptr && !reload_exit_) {
        reload_work_.Wait(&reload_mu_);
      }
      if (reload_head_ == nullptr) return;  // exiting, nothing left
      op = reload_head_;
      reload_head_ = op->next;
      if (reload_head_ == nullptr) reload_tail_ = nullptr;
      ++reloads_running_;
    }
    op->get = engine_->Get(KeyRef{op->hash, op->key}, op->value_out);
    op->error = op->get.error;
    op->on_done(op, op->done_context);  // may delete the op
    MutexLock lock(&reload_mu_);
    if (--reloads_running_ == 0 && reload_head_ == nullptr) {
      reload_idle_.SignalAll();
    }
  }
}

void Dispatcher::Execute(CacheOp& op) {
  switch (op.kind) {
    case OpKind::kGet:
      // Without reload threads (no spill tier) there is no disk to read.
      op.get = reload_threads_.empty()
                   ? engine_->Get(KeyRef{op.hash, op.key}, op.value_out)
                   : engine_->GetFromMemory(KeyRef{op.hash, op.key},
                                            op.value_out);
      op.error = op.get.error;
      break;
    case OpKind::kSet:
      op.set = engine_->Set(KeyRef{op.hash, op.key}, op.value, op.write);
      op.error = op.set.error;
      break;
    case OpKind::kDelete:
      op.del = engine_->Delete(op.hash);
      op.error = op.del.error;
      break;
    case OpKind::kTouch:
      op.error = engine_->Touch(op.hash, op.ttl_ms);
      break;
  }
}

void Dispatcher::Stop() { stopped_.store(true, std::memory_order_release); }

void Dispatcher::WaitIdle() {
  for (auto& q : queues_) {
    MutexLock lock(&q->mu);
    while (q->head != nullptr || q->drain_scheduled) q->idle.Wait(&q->mu);
  }
  // Every deferral happens inside a drain, so none comes after this point.
  MutexLock lock(&reload_mu_);
  while (reload_head_ != nullptr || reloads_running_ > 0) {
    reload_idle_.Wait(&reload_mu_);
  }
}

std::vector<DispatchStats> Dispatcher::Stats() const {
  std::vector<DispatchStats> out(queues_.size());
  for (size_t n = 0; n < queues_.size(); ++n) {
    NodeQueue& q = *queues_[n];
    out[n].node = q.node;
    out[n].batches = q.batches.load(std::memory_order_relaxed);
    out[n].ops = q.ops.load(std::memory_order_relaxed);
    out[n].merged_writes = q.merged_writes.load(std::memory_order_relaxed);
    out[n].deadline_expired = q.deadline_expired.load(std::memory_order_relaxed);
    MutexLock lock(&q.mu);
    out[n].rejected_queue_full = q.rejected;
    out[n].queue_depth = q.depth;
  }
  return out;
}

}  // namespace furrballs::service
