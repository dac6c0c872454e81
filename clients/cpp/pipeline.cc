// clients/cpp/pipeline.cc: Client::OpenPipeline and Pipeline (client.h),
// with the Pipeline stream's reactor and its protocol.
#include <deque>
#include <utility>

#include <absl/container/flat_hash_map.h>
#include <absl/strings/str_cat.h>
#include <absl/synchronization/notification.h>
#include <grpcpp/support/client_callback.h>

#include "clients/cpp/client.h"
#include "clients/cpp/ops.h"
#include "clients/cpp/status.h"

namespace furrballs::client {

namespace v1 = ::furrballs::v1;
using internal::AsDeleted;
using internal::AsEntry;
using internal::AsTouched;
using internal::AsVersion;
using internal::DeleteOp;
using internal::GetOp;
using internal::OpResult;
using internal::SetOp;
using internal::TouchOp;

namespace internal {

// The stream's reactor. Protocol (all state under mu_; no Start* call is made
// while holding mu_, because gRPC may run a reaction inline from it):
//   - One read is always outstanding from StartCall until the stream ends;
//     OnReadDone moves the response out of incoming_, starts the next read,
//     and hands the response to its callback.
//   - Writes go one at a time (the callback API allows one outstanding
//     write). writing_ says a write is in flight: Submit appends to queue_
//     and, if writing_ was false, sets it and writes queue_.front();
//     OnWriteDone pops the front and writes the next one, or clears writing_.
//     Only the thread that set writing_ (or OnWriteDone) touches the front,
//     so its address is stable while written. Once Close() was called and
//     the queue is empty, WritesDone is sent, once.
//   - OnDone is the reactor's last callback: under mu_ it sets finished_ (no
//     new op is accepted) and takes every unanswered op; it fails them with
//     the stream's status outside the lock, then notifies done_, which Close()
//     waits for. Notify is OnDone's last touch of the reactor.
// Lifetime: the Pipeline owns the reactor alone and destroys it only after
// done_, on the user's thread. A gRPC thread must never destroy it: its
// ClientContext holds a reference to the grpc::Channel, and a Channel released
// last on one of gRPC's callback threads tears down gRPC's shared callback
// completion queue from a thread that is still running on it (gRPC 1.51
// aborts with a double free).
class PipelineReactor final
    : public grpc::ClientBidiReactor<v1::PipelineRequest,
                                     v1::PipelineResponse> {
 public:
  explicit PipelineReactor(const PipelineOptions& options)
      : options_(options) {}

  void Start(v1::Cache::Stub* stub) {
    stub->async()->Pipeline(&ctx_, this);
    StartRead(&incoming_);
    StartCall();
  }

  grpc::ClientContext* context() { return &ctx_; }

  absl::Status Submit(v1::PipelineRequest request,
                      Pipeline::ResponseCallback done) {
    const v1::PipelineRequest* to_write = nullptr;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(this, &PipelineReactor::HasRoom));
      if (finished_) {
        return final_status_.ok()
                   ? absl::FailedPreconditionError("Pipeline stream has ended")
                   : final_status_;
      }
      if (closing_) return absl::FailedPreconditionError("Pipeline is closed");
      const uint64_t id = next_id_++;
      request.set_id(id);
      pending_.emplace(id, std::move(done));
      queue_.push_back(std::move(request));
      if (!writing_ && !broken_) {
        writing_ = true;
        to_write = &queue_.front();
      }
    }
    if (to_write != nullptr) StartWrite(to_write);
    return absl::OkStatus();
  }

  absl::Status Close() {
    bool writes_done = false;
    {
      absl::MutexLock lock(&mu_);
      if (!closing_) {
        closing_ = true;
        writes_done = TakeWritesDoneLocked();
      }
    }
    if (writes_done) StartWritesDone();
    done_.WaitForNotification();
    absl::MutexLock lock(&mu_);
    return final_status_;
  }

  void Cancel() { ctx_.TryCancel(); }

  size_t in_flight() const {
    absl::MutexLock lock(&mu_);
    return pending_.size();
  }

  void OnWriteDone(bool ok) override {
    const v1::PipelineRequest* next = nullptr;
    bool writes_done = false;
    {
      absl::MutexLock lock(&mu_);
      queue_.pop_front();
      if (!ok) {
        // The stream is broken; OnDone will say why and fail the pending
        // ops, including those still queued. Nothing more can be written.
        broken_ = true;
        writing_ = false;
        return;
      }
      if (!queue_.empty()) {
        next = &queue_.front();
      } else {
        writing_ = false;
        writes_done = TakeWritesDoneLocked();
      }
    }
    if (next != nullptr) StartWrite(next);
    if (writes_done) StartWritesDone();
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;  // the stream ended; OnDone follows
    v1::PipelineResponse response = std::move(incoming_);
    incoming_.Clear();
    Pipeline::ResponseCallback done;
    {
      absl::MutexLock lock(&mu_);
      auto it = pending_.find(response.id());
      if (it != pending_.end()) {
        done = std::move(it->second);
        pending_.erase(it);
      }
    }
    StartRead(&incoming_);
    // An id we never sent (or already answered) has nobody to go to; dropping
    // it is all a client can do.
    if (!done) return;
    absl::Status st = StatusFromCode(response.code(), response.message());
    if (st.ok()) {
      done(std::move(response));
    } else {
      done(std::move(st));
    }
  }

  void OnDone(const grpc::Status& status) override {
    const absl::Status st = ToAbslStatus(status);
    absl::flat_hash_map<uint64_t, Pipeline::ResponseCallback> orphans;
    {
      absl::MutexLock lock(&mu_);
      finished_ = true;
      final_status_ = st;
      orphans.swap(pending_);
    }
    const absl::Status orphan_status =
        st.ok() ? absl::UnavailableError(
                      "Pipeline stream ended before this operation's response")
                : st;
    for (auto& [id, done] : orphans) done(orphan_status);
    orphans.clear();
    done_.Notify();
  }

 private:
  bool HasRoom() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return finished_ || closing_ || pending_.size() < options_.max_in_flight;
  }

  // True (once) when WritesDone is due: Close() was asked for, every queued
  // write went out, and the stream still takes writes.
  bool TakeWritesDoneLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (closing_ && !writing_ && !writes_done_sent_ && !broken_ &&
        !finished_) {
      writes_done_sent_ = true;
      return true;
    }
    return false;
  }

  const PipelineOptions options_;
  grpc::ClientContext ctx_;
  v1::PipelineResponse incoming_;  // only touched by the read chain
  // Notified at the end of OnDone, when no gRPC thread will touch us again.
  absl::Notification done_;

  mutable absl::Mutex mu_;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  absl::flat_hash_map<uint64_t, Pipeline::ResponseCallback> pending_
      ABSL_GUARDED_BY(mu_);
  // Requests not yet fully written; front() is the one in flight.
  std::deque<v1::PipelineRequest> queue_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  bool writes_done_sent_ ABSL_GUARDED_BY(mu_) = false;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;  // OnDone has begun
  absl::Status final_status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace internal

std::unique_ptr<Pipeline> Client::OpenPipeline(const PipelineOptions& options) {
  auto reactor = std::make_unique<internal::PipelineReactor>(options);
  grpc::ClientContext* ctx = reactor->context();
  if (options.stream_timeout.count() > 0) {
    ctx->set_deadline(std::chrono::system_clock::now() +
                      options.stream_timeout);
  }
  if (!options_.bearer_token.empty()) {
    ctx->AddMetadata("authorization",
                     absl::StrCat("Bearer ", options_.bearer_token));
  }
  reactor->Start(stub_.get());
  return std::unique_ptr<Pipeline>(new Pipeline(std::move(reactor)));
}

Pipeline::Pipeline(std::unique_ptr<internal::PipelineReactor> reactor)
    : reactor_(std::move(reactor)) {}

// Close() returns only after OnDone has finished with the reactor, so the
// reactor (and the channel reference its context holds) is released here, on
// the user's thread.
Pipeline::~Pipeline() { Close().IgnoreError(); }

void Pipeline::Cancel() { reactor_->Cancel(); }

absl::Status Pipeline::Close() { return reactor_->Close(); }

size_t Pipeline::in_flight() const { return reactor_->in_flight(); }

absl::Status Pipeline::Submit(v1::PipelineRequest request,
                              ResponseCallback done) {
  return reactor_->Submit(std::move(request), std::move(done));
}

absl::Status Pipeline::Get(absl::string_view key, GetCallback done) {
  return Submit(GetOp(key), [done = std::move(done)](OpResult r) {
    done(AsEntry(std::move(r)));
  });
}

absl::Status Pipeline::Set(absl::string_view key, absl::string_view value,
                           const SetOptions& options, SetCallback done) {
  return Submit(SetOp(key, value, options),
                [done = std::move(done)](OpResult r) {
                  done(AsVersion(std::move(r)));
                });
}

absl::Status Pipeline::Delete(absl::string_view key, DeleteCallback done) {
  return Submit(DeleteOp(key), [done = std::move(done)](OpResult r) {
    done(AsDeleted(std::move(r)));
  });
}

absl::Status Pipeline::Touch(absl::string_view key, uint64_t ttl_ms,
                             TouchCallback done) {
  return Submit(TouchOp(key, ttl_ms), [done = std::move(done)](OpResult r) {
    done(AsTouched(std::move(r)));
  });
}

}  // namespace furrballs::client
