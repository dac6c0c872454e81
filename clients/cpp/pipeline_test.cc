// Tests of the Pipeline stream's protocol against a scripted in-process
// Cache service (not the real server, whose answer order is not under the
// test's control): responses in reverse order reach the callbacks of their
// own requests, an id the client never sent is dropped, and operations the
// server never answers fail when the stream ends.
#include <memory>
#include <string>
#include <vector>

#include <absl/strings/str_cat.h>
#include <absl/synchronization/mutex.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "clients/cpp/client.h"
#include "furrballs/v1/furrballs.grpc.pb.h"

namespace furrballs::client {
namespace {

namespace v1 = ::furrballs::v1;

// Reads every request until the client half-closes, then answers all but the
// last `unanswered` of them in reverse order (a Get answered with the value
// "for-<key>"), preceded by one response with an id nobody sent, and ends the
// stream OK.
class ReversingPipeline final
    : public grpc::ServerBidiReactor<v1::PipelineRequest,
                                     v1::PipelineResponse> {
 public:
  explicit ReversingPipeline(size_t unanswered) : unanswered_(unanswered) {
    StartRead(&incoming_);
  }

  void OnReadDone(bool ok) override {
    if (ok) {
      received_.push_back(incoming_);
      StartRead(&incoming_);
      return;
    }
    // Half-close: build the answers, then write them one at a time.
    v1::PipelineResponse stray;
    stray.set_id(0xdeadbeef);
    stray.mutable_get()->set_found(true);
    stray.mutable_get()->set_value("nobody asked");
    answers_.push_back(stray);
    const size_t answered =
        received_.size() > unanswered_ ? received_.size() - unanswered_ : 0;
    for (size_t i = answered; i-- > 0;) {
      const v1::PipelineRequest& r = received_[i];
      v1::PipelineResponse a;
      a.set_id(r.id());
      if (r.has_get()) {
        a.mutable_get()->set_found(true);
        a.mutable_get()->set_value(absl::StrCat("for-", r.get().key()));
        a.mutable_get()->set_version(r.id());
      } else {
        a.set_code(static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT));
        a.set_message("only Get is scripted");
      }
      answers_.push_back(a);
    }
    WriteNext();
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "write failed"));
      return;
    }
    WriteNext();
  }

  void OnDone() override { delete this; }

 private:
  void WriteNext() {
    if (next_ == answers_.size()) {
      Finish(grpc::Status::OK);
      return;
    }
    StartWrite(&answers_[next_++]);
  }

  const size_t unanswered_;
  v1::PipelineRequest incoming_;
  std::vector<v1::PipelineRequest> received_;
  std::vector<v1::PipelineResponse> answers_;
  size_t next_ = 0;
};

class ScriptedCache final : public v1::Cache::CallbackService {
 public:
  explicit ScriptedCache(size_t unanswered) : unanswered_(unanswered) {}
  grpc::ServerBidiReactor<v1::PipelineRequest, v1::PipelineResponse>*
  Pipeline(grpc::CallbackServerContext*) override {
    return new ReversingPipeline(unanswered_);
  }

 private:
  const size_t unanswered_;
};

class PipelineProtocolTest : public ::testing::Test {
 protected:
  void Start(size_t unanswered) {
    service_ = std::make_unique<ScriptedCache>(unanswered);
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                       &port_);
    b.RegisterService(service_.get());
    server_ = b.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port_, 0);
    client_ = std::make_unique<Client>(absl::StrCat("127.0.0.1:", port_));
  }

  void TearDown() override {
    client_.reset();
    if (server_ != nullptr) server_->Shutdown();
  }

  int port_ = 0;
  std::unique_ptr<ScriptedCache> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<Client> client_;
};

TEST_F(PipelineProtocolTest, ReversedResponsesReachTheirOwnCallbacks) {
  ASSERT_NO_FATAL_FAILURE(Start(/*unanswered=*/0));
  constexpr int kOps = 500;
  std::unique_ptr<Pipeline> p = client_->OpenPipeline(
      PipelineOptions{.stream_timeout = std::chrono::milliseconds(30000)});
  absl::Mutex mu;
  std::vector<std::string> got(kOps);
  std::vector<int> calls(kOps);
  for (int i = 0; i < kOps; ++i) {
    ASSERT_TRUE(p->Get(absl::StrCat("k", i),
                       [&, i](absl::StatusOr<std::optional<Entry>> e) {
                         absl::MutexLock lock(&mu);
                         ++calls[i];
                         if (e.ok() && e->has_value()) got[i] = (*e)->value;
                       })
                    .ok());
  }
  // A non-Get op gets its per-op error while the others succeed.
  absl::Status set_status;
  ASSERT_TRUE(p->Set("s", "v", {}, [&](absl::StatusOr<uint64_t> v) {
                 absl::MutexLock lock(&mu);
                 set_status = v.status();
               }).ok());
  absl::Status closed = p->Close();
  EXPECT_TRUE(closed.ok()) << closed;
  absl::MutexLock lock(&mu);
  for (int i = 0; i < kOps; ++i) {
    EXPECT_EQ(calls[i], 1) << i;
    EXPECT_EQ(got[i], absl::StrCat("for-k", i)) << i;
  }
  EXPECT_TRUE(absl::IsInvalidArgument(set_status)) << set_status;
}

TEST_F(PipelineProtocolTest, UnansweredOpsFailWhenTheStreamEnds) {
  ASSERT_NO_FATAL_FAILURE(Start(/*unanswered=*/3));
  std::unique_ptr<Pipeline> p = client_->OpenPipeline(
      PipelineOptions{.stream_timeout = std::chrono::milliseconds(30000)});
  absl::Mutex mu;
  std::vector<absl::Status> status(10);
  std::vector<int> calls(10);
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(p->Get(absl::StrCat("k", i),
                       [&, i](absl::StatusOr<std::optional<Entry>> e) {
                         absl::MutexLock lock(&mu);
                         ++calls[i];
                         status[i] = e.status();
                       })
                    .ok());
  }
  absl::Status closed = p->Close();
  EXPECT_TRUE(closed.ok()) << closed;
  absl::MutexLock lock(&mu);
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(calls[i], 1) << i;
    if (i < 7) {
      EXPECT_TRUE(status[i].ok()) << i << ": " << status[i];
    } else {
      EXPECT_TRUE(absl::IsUnavailable(status[i])) << i << ": " << status[i];
    }
  }
  // After the stream ended, Submit is refused and runs no callback.
  bool called = false;
  absl::Status late = p->Get("late", [&](absl::StatusOr<std::optional<Entry>>) {
    called = true;
  });
  EXPECT_FALSE(late.ok());
  EXPECT_FALSE(called);
}

}  // namespace
}  // namespace furrballs::client
