#include "clients/cpp/batcher.h"

#include <algorithm>
#include <utility>

#include <absl/container/flat_hash_map.h>
#include <absl/strings/str_cat.h>
#include <absl/synchronization/notification.h>

#include "clients/cpp/status.h"

namespace furrballs::client::internal {

namespace v1 = ::furrballs::v1;

namespace {

// Batches of one stream written or awaiting their answer before the next
// one waits: one in flight while the next fills (flat combining).
constexpr size_t kBatchesInFlight = 1;

}  // namespace

// One Batch stream (protocol: batcher.h).
class BatchStream final
    : public grpc::ClientBidiReactor<v1::BatchRequest, v1::BatchResponse> {
 public:
  BatchStream(v1::Cache::Stub* stub, const Batcher::Options& options)
      : max_ops_(std::max<size_t>(1, options.max_ops)) {
    if (!options.bearer_token.empty()) {
      ctx_.AddMetadata("authorization",
                       absl::StrCat("Bearer ", options.bearer_token));
    }
    stub->async()->Batch(&ctx_, this);
    StartRead(&incoming_);
    StartCall();
  }

  // False if the stream has ended (the op was not taken).
  bool Submit(v1::PipelineRequest& op,
              std::chrono::system_clock::time_point deadline,
              Batcher::Callback& done) {
    const v1::BatchRequest* to_write = nullptr;
    {
      absl::MutexLock lock(&mu_);
      if (finished_ || broken_) return false;
      *filling_.add_ops() = std::move(op);
      filling_done_.push_back(std::move(done));
      filling_deadline_ = std::max(filling_deadline_, deadline);
      to_write = TakeBatchLocked();
    }
    if (to_write != nullptr) StartWrite(to_write);
    return true;
  }

  // Half-closes the stream once what was submitted is written, and waits
  // until it has ended.
  void Close() {
    bool writes_done = false;
    {
      absl::MutexLock lock(&mu_);
      closing_ = true;
      writes_done = TakeWritesDoneLocked();
    }
    if (writes_done) StartWritesDone();
    done_.WaitForNotification();
  }

  void OnWriteDone(bool ok) override {
    const v1::BatchRequest* next = nullptr;
    bool writes_done = false;
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
      if (!ok) {
        broken_ = true;  // OnDone will fail what waits
        return;
      }
      next = TakeBatchLocked();
      if (next == nullptr) writes_done = TakeWritesDoneLocked();
    }
    if (next != nullptr) StartWrite(next);
    if (writes_done) StartWritesDone();
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;  // the stream ended; OnDone follows
    v1::BatchResponse response = std::move(incoming_);
    incoming_.Clear();
    std::vector<Batcher::Callback> callbacks;
    {
      absl::MutexLock lock(&mu_);
      auto it = awaiting_.find(response.id());
      if (it != awaiting_.end()) {
        callbacks = std::move(it->second);
        awaiting_.erase(it);
      }
      ++delivering_;
    }
    Deliver(response, callbacks);
    // The next batch goes once the answers are handed out: the callers they
    // release (woken while Deliver runs, or submitting from their callback)
    // join it instead of the first of them going alone and the rest waiting
    // a round trip for it.
    const v1::BatchRequest* next = nullptr;
    bool writes_done = false;
    {
      absl::MutexLock lock(&mu_);
      --delivering_;
      next = TakeBatchLocked();
      if (next == nullptr) writes_done = TakeWritesDoneLocked();
    }
    if (next != nullptr) StartWrite(next);
    // After the write, so that the window update that posting a read sends
    // rides with it (batcher.h); an answer that comes first waits in gRPC.
    StartRead(&incoming_);
    if (writes_done) StartWritesDone();
  }

  void OnDone(const grpc::Status& status) override {
    const absl::Status st = ToAbslStatus(status);
    std::vector<Batcher::Callback> orphans;
    {
      absl::MutexLock lock(&mu_);
      finished_ = true;
      for (auto& [id, callbacks] : awaiting_) {
        for (auto& cb : callbacks) orphans.push_back(std::move(cb));
      }
      awaiting_.clear();
      for (auto& cb : filling_done_) orphans.push_back(std::move(cb));
      filling_done_.clear();
    }
    const absl::Status orphan_status =
        st.ok() ? absl::UnavailableError(
                      "Batch stream ended before this operation's answer")
                : st;
    for (auto& cb : orphans) cb(orphan_status);
    done_.Notify();
  }

 private:
  // The next batch to write, if one may go now: moves the filling batch
  // into outgoing_ and records its callbacks under a fresh id.
  const v1::BatchRequest* TakeBatchLocked()
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (writing_ || delivering_ != 0 || broken_ || finished_ ||
        filling_.ops_size() == 0 || awaiting_.size() >= kBatchesInFlight) {
      return nullptr;
    }
    outgoing_.Clear();
    const int n = std::min(filling_.ops_size(), static_cast<int>(max_ops_));
    const uint64_t id = next_id_++;
    outgoing_.set_id(id);
    std::vector<Batcher::Callback>& callbacks = awaiting_[id];
    if (n == filling_.ops_size()) {
      outgoing_.mutable_ops()->Swap(filling_.mutable_ops());
      callbacks.swap(filling_done_);
    } else {
      // Over max_ops: the first n go now, the rest with the next batch.
      for (int i = 0; i < n; ++i) {
        *outgoing_.add_ops() = std::move(*filling_.mutable_ops(i));
      }
      filling_.mutable_ops()->DeleteSubrange(0, n);
      callbacks.assign(std::make_move_iterator(filling_done_.begin()),
                       std::make_move_iterator(filling_done_.begin() + n));
      filling_done_.erase(filling_done_.begin(), filling_done_.begin() + n);
    }
    // The latest deadline of the batch: the server fails an op only when
    // none of its neighbours may still run; each caller keeps its own.
    const auto left = filling_deadline_ - std::chrono::system_clock::now();
    outgoing_.set_timeout_ms(static_cast<uint64_t>(std::max<int64_t>(
        1, std::chrono::ceil<std::chrono::milliseconds>(left).count())));
    if (filling_.ops_size() == 0) {
      filling_deadline_ = std::chrono::system_clock::time_point::min();
    }
    writing_ = true;
    return &outgoing_;
  }

  // True (once) when WritesDone is due: Close() was asked for and nothing
  // is left to write.
  bool TakeWritesDoneLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (closing_ && !writing_ && filling_.ops_size() == 0 &&
        !writes_done_sent_ && !broken_ && !finished_) {
      writes_done_sent_ = true;
      return true;
    }
    return false;
  }

  static void Deliver(v1::BatchResponse& response,
                      std::vector<Batcher::Callback>& callbacks) {
    if (response.code() != 0) {
      const absl::Status st =
          StatusFromCode(response.code(), response.message());
      for (auto& cb : callbacks) cb(st);
      return;
    }
    for (size_t i = 0; i < callbacks.size(); ++i) {
      if (i >= static_cast<size_t>(response.results_size())) {
        callbacks[i](absl::InternalError(absl::StrCat(
            "Batch: the server answered ", response.results_size(),
            " of ", callbacks.size(), " operations")));
        continue;
      }
      v1::PipelineResponse& r = *response.mutable_results(static_cast<int>(i));
      absl::Status st = StatusFromCode(r.code(), r.message());
      if (st.ok()) {
        callbacks[i](std::move(r));
      } else {
        callbacks[i](std::move(st));
      }
    }
  }

  const size_t max_ops_;
  grpc::ClientContext ctx_;
  v1::BatchResponse incoming_;  // only touched by the read chain
  absl::Notification done_;     // OnDone has finished with the stream

  absl::Mutex mu_;
  v1::BatchRequest filling_ ABSL_GUARDED_BY(mu_);
  std::vector<Batcher::Callback> filling_done_ ABSL_GUARDED_BY(mu_);
  std::chrono::system_clock::time_point filling_deadline_ ABSL_GUARDED_BY(
      mu_) = std::chrono::system_clock::time_point::min();
  // The batch being written; stable while writing_.
  v1::BatchRequest outgoing_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, std::vector<Batcher::Callback>> awaiting_
      ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  // Answers whose results OnReadDone is handing to their callbacks.
  int delivering_ ABSL_GUARDED_BY(mu_) = 0;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  bool writes_done_sent_ ABSL_GUARDED_BY(mu_) = false;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

Batcher::Batcher(v1::Cache::Stub* stub, Options options)
    : stub_(stub),
      options_(std::move(options)),
      slot_count_(static_cast<size_t>(std::max(1, options_.streams))),
      slots_(slot_count_) {}

// An operation with a deadline kept by the watcher: whoever claims it first
// (its answer, or the watcher at the deadline) calls `done`.
struct Batcher::Watched {
  Callback done;
  // Its entry in watched_ while `watched` (both guarded by watch_mu_).
  WatchSet::iterator where;
  bool watched = false;
  std::atomic<bool> claimed{false};

  bool Claim() { return !claimed.exchange(true, std::memory_order_acq_rel); }
};

Batcher::~Batcher() {
  std::vector<std::unique_ptr<BatchStream>> streams;
  {
    absl::MutexLock lock(&mu_);
    streams.swap(streams_);
  }
  for (auto& s : streams) s->Close();
  {
    absl::MutexLock lock(&watch_mu_);
    watch_stop_ = true;
  }
  if (watcher_.joinable()) watcher_.join();
}

void Batcher::SubmitWithDeadline(v1::PipelineRequest op,
                                 std::chrono::system_clock::time_point deadline,
                                 Callback done) {
  auto watched = std::make_shared<Watched>();
  watched->done = std::move(done);
  {
    absl::MutexLock lock(&watch_mu_);
    watched->where = watched_.emplace(deadline, watched);
    watched->watched = true;
    if (!watcher_.joinable()) watcher_ = std::thread([this] { WatchLoop(); });
  }
  Submit(std::move(op), deadline,
         [this, watched](absl::StatusOr<v1::PipelineResponse> r) {
           if (!watched->Claim()) return;  // the watcher failed it already
           Unwatch(*watched);
           watched->done(std::move(r));
           watched->done = nullptr;
         });
}

size_t Batcher::deadlines_watched() const {
  absl::MutexLock lock(&watch_mu_);
  return watched_.size();
}

void Batcher::Unwatch(Watched& w) {
  absl::MutexLock lock(&watch_mu_);
  if (!w.watched) return;
  watched_.erase(w.where);
  w.watched = false;
}

void Batcher::WatchLoop() {
  absl::MutexLock lock(&watch_mu_);
  while (!watch_stop_) {
    if (watched_.empty()) {
      watch_mu_.Await(absl::Condition(
          +[](Batcher* b) ABSL_EXCLUSIVE_LOCKS_REQUIRED(b->watch_mu_) {
            return b->watch_stop_ || !b->watched_.empty();
          },
          this));
      continue;
    }
    const auto next = watched_.begin()->first;
    if (std::chrono::system_clock::now() < next) {
      watch_until_ = next;
      watch_mu_.AwaitWithDeadline(
          absl::Condition(
              +[](Batcher* b) ABSL_EXCLUSIVE_LOCKS_REQUIRED(b->watch_mu_) {
                return b->watch_stop_ ||
                       (!b->watched_.empty() &&
                        b->watched_.begin()->first < b->watch_until_);
              },
              this),
          absl::FromChrono(next));
      watch_until_ = std::chrono::system_clock::time_point::max();
      continue;
    }
    std::shared_ptr<Watched> expired = std::move(watched_.begin()->second);
    watched_.erase(watched_.begin());
    expired->watched = false;
    watch_mu_.Unlock();
    if (expired->Claim()) {
      expired->done(absl::DeadlineExceededError("Deadline Exceeded"));
      expired->done = nullptr;
    }
    watch_mu_.Lock();
  }
}

BatchStream* Batcher::OpenStream(size_t slot, BatchStream* seen) {
  absl::MutexLock lock(&mu_);
  BatchStream* current = slots_[slot].load(std::memory_order_relaxed);
  if (current != seen) return current;
  streams_.push_back(std::make_unique<BatchStream>(stub_, options_));
  current = streams_.back().get();
  slots_[slot].store(current, std::memory_order_release);
  return current;
}

void Batcher::Submit(v1::PipelineRequest op,
                     std::chrono::system_clock::time_point deadline,
                     Callback done) {
  const size_t slot =
      next_slot_.fetch_add(1, std::memory_order_relaxed) % slot_count_;
  BatchStream* s = slots_[slot].load(std::memory_order_acquire);
  if (s != nullptr && s->Submit(op, deadline, done)) return;
  // No stream yet, or it has ended: open one. A new stream can end before
  // it takes the op; the second gets a try too, and if that has ended as
  // well the op fails with why.
  for (int attempt = 0; attempt < 2; ++attempt) {
    s = OpenStream(slot, s);
    if (s->Submit(op, deadline, done)) return;
  }
  done(absl::UnavailableError("Batch stream could not be opened"));
}

}  // namespace furrballs::client::internal
