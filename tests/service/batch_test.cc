// End-to-end tests of the Batch stream on a real server on loopback (a
// simulated 4-node topology, both dispatch modes), driven through the
// generated stub: per-op answers in order across nodes, the limits, a frame
// that does not parse, and a client that stops reading (of a Batch stream,
// and of a Pipeline stream, which shares the byte bound).
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "furrballs/v1/furrballs.grpc.pb.h"
#include "service/server.h"
#include "tests/common/loopback_server.h"

namespace furrballs::service {
namespace {

using grpc::ClientContext;
using grpc::StatusCode;
namespace v1 = ::furrballs::v1;

ServerOptions TestOptions(DispatchMode mode) {
  return test_support::LoopbackServerOptions(mode);
}

class BatchTest : public ::testing::TestWithParam<DispatchMode> {
 protected:
  void StartServer(const ServerOptions& options) {
    auto server = Server::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(64 << 20);
    channel_ = grpc::CreateCustomChannel(
        "127.0.0.1:" + std::to_string(server_->port()),
        grpc::InsecureChannelCredentials(), args);
    stub_ = v1::Cache::NewStub(channel_);
  }

  void SetUp() override { StartServer(TestOptions(GetParam())); }

  void Restart(const ServerOptions& options) {
    server_.reset();
    StartServer(options);
  }

  // Writes a value of `bytes` bytes under `key`.
  void Put(const std::string& key, size_t bytes) {
    v1::BatchRequest set;
    v1::SetRequest* item = set.add_ops()->mutable_set();
    item->set_key(key);
    item->set_value(std::string(bytes, 'x'));
    ASSERT_EQ(RoundTrip(set).results(0).code(), 0);
  }

  // Sends `request` on a fresh stream and returns the one answer.
  v1::BatchResponse RoundTrip(const v1::BatchRequest& request) {
    ClientContext ctx;
    auto stream = stub_->Batch(&ctx);
    EXPECT_TRUE(stream->Write(request));
    stream->WritesDone();
    v1::BatchResponse response;
    EXPECT_TRUE(stream->Read(&response));
    v1::BatchResponse extra;
    EXPECT_FALSE(stream->Read(&extra));
    grpc::Status s = stream->Finish();
    EXPECT_TRUE(s.ok()) << s.error_message();
    return response;
  }

  // Requests of kind `op` the server answered OK so far.
  uint64_t Answered(RequestOp op) const {
    return server_->request_stats()
        .Snapshot()
        .requests[static_cast<int>(op)][StatusCode::OK];
  }

  // A client that writes `count` copies of `request` on the stream that
  // `open` starts and never reads. Returns how many answers to `op` requests
  // the server counted in the next two seconds: unbounded, it reads and
  // answers them all within milliseconds (a slow machine only makes a
  // bounded server look more bounded, never an unbounded one pass). Checks
  // that another stream on the same connection is served meanwhile.
  template <typename Request, typename Open>
  uint64_t AnsweredToAClientThatStopsReading(Open open, const Request& request,
                                             int count, RequestOp op) {
    const uint64_t before = Answered(op);
    ClientContext ctx;
    auto stream = open(&ctx);
    std::thread writer([&] {
      for (int i = 0; i < count && stream->Write(request); ++i) {
      }
    });
    const auto until =
        std::chrono::steady_clock::now() + std::chrono::seconds(2);
    uint64_t answered = 0;
    while (std::chrono::steady_clock::now() < until &&
           answered < static_cast<uint64_t>(count)) {
      std::this_thread::yield();
      answered = Answered(op) - before;
    }
    v1::BatchRequest other;
    other.add_ops()->mutable_get()->set_key("v");
    EXPECT_TRUE(RoundTrip(other).results(0).get().found());
    ctx.TryCancel();
    writer.join();
    stream->Finish();
    return answered;
  }

  std::unique_ptr<Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Cache::Stub> stub_;
};

TEST_P(BatchTest, EveryOpIsAnsweredInRequestOrderAcrossNodes) {
  constexpr int kKeys = 64;
  v1::BatchRequest sets;
  sets.set_id(7);
  for (int i = 0; i < kKeys; ++i) {
    v1::PipelineRequest* op = sets.add_ops();
    op->set_id(1000 + i);
    op->mutable_set()->set_key("b" + std::to_string(i));
    op->mutable_set()->set_value("value-" + std::to_string(i));
    if (i == 3) op->mutable_set()->set_ttl_ms(60'000);
  }
  v1::BatchResponse written = RoundTrip(sets);
  EXPECT_EQ(written.id(), 7u);
  EXPECT_EQ(written.code(), 0);
  ASSERT_EQ(written.results_size(), kKeys);
  for (int i = 0; i < kKeys; ++i) {
    EXPECT_EQ(written.results(i).id(), uint64_t(1000 + i));
    EXPECT_EQ(written.results(i).code(), 0) << written.results(i).message();
    EXPECT_GT(written.results(i).set().version(), 0u);
  }

  // Gets of every key (and a miss), a failing conditional write, a Delete,
  // a Touch, a bad key and an op with nothing set, in one message.
  v1::BatchRequest mixed;
  mixed.set_id(8);
  for (int i = 0; i < kKeys; ++i) {
    mixed.add_ops()->mutable_get()->set_key("b" + std::to_string(i));
  }
  mixed.add_ops()->mutable_get()->set_key("missing");
  v1::SetRequest* cas = mixed.add_ops()->mutable_set();
  cas->set_key("b0");
  cas->set_value("x");
  cas->set_mode(v1::SET_IF_VERSION);
  cas->set_expected_version(written.results(0).set().version() + 100);
  mixed.add_ops()->mutable_delete_()->set_key("b1");
  v1::TouchRequest* touch = mixed.add_ops()->mutable_touch();
  touch->set_key("b2");
  touch->set_ttl_ms(5'000);
  mixed.add_ops()->mutable_get()->set_key("");
  mixed.add_ops();
  mixed.add_ops()->mutable_get()->set_key("b1");  // after its Delete

  v1::BatchResponse answered = RoundTrip(mixed);
  EXPECT_EQ(answered.id(), 8u);
  ASSERT_EQ(answered.results_size(), mixed.ops_size());
  for (int i = 0; i < kKeys; ++i) {
    const v1::PipelineResponse& r = answered.results(i);
    ASSERT_EQ(r.code(), 0) << r.message();
    EXPECT_TRUE(r.get().found()) << i;
    EXPECT_EQ(r.get().value(), "value-" + std::to_string(i));
    EXPECT_EQ(r.get().version(), written.results(i).set().version());
  }
  EXPECT_GT(answered.results(3).get().ttl_remaining_ms(), 0u);
  int next = kKeys;
  EXPECT_FALSE(answered.results(next++).get().found());
  EXPECT_EQ(answered.results(next++).code(), StatusCode::ABORTED);
  EXPECT_TRUE(answered.results(next++).delete_().deleted());
  EXPECT_TRUE(answered.results(next++).has_touch());
  const v1::PipelineResponse& empty_key = answered.results(next++);
  EXPECT_EQ(empty_key.code(), StatusCode::INVALID_ARGUMENT);
  // Named as the unary call names it, not "Batch: key is empty".
  EXPECT_EQ(empty_key.message(), "Get: key is empty");
  const v1::PipelineResponse& no_op = answered.results(next++);
  EXPECT_EQ(no_op.code(), StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(no_op.message().rfind("Batch: ", 0), 0u)
      << "an op that names no operation is the Batch's: " << no_op.message();
  // Per-key order is request order, also when the ops run on node workers.
  EXPECT_FALSE(answered.results(next++).get().found());
}

TEST_P(BatchTest, ManyMessagesOnOneStreamAreAnsweredWithTheirIds) {
  ClientContext ctx;
  auto stream = stub_->Batch(&ctx);
  constexpr int kMessages = 50;
  std::thread writer([&] {
    for (int m = 0; m < kMessages; ++m) {
      v1::BatchRequest request;
      request.set_id(m);
      for (int i = 0; i < 16; ++i) {
        v1::SetRequest* set = request.add_ops()->mutable_set();
        set->set_key("s" + std::to_string(m) + "/" + std::to_string(i));
        set->set_value("v");
      }
      ASSERT_TRUE(stream->Write(request));
    }
    stream->WritesDone();
  });
  std::vector<bool> seen(kMessages);
  v1::BatchResponse response;
  int answers = 0;
  while (stream->Read(&response)) {
    ASSERT_LT(response.id(), uint64_t{kMessages});
    EXPECT_FALSE(seen[response.id()]);
    seen[response.id()] = true;
    EXPECT_EQ(response.results_size(), 16);
    ++answers;
  }
  writer.join();
  EXPECT_TRUE(stream->Finish().ok());
  EXPECT_EQ(answers, kMessages);
  EXPECT_EQ(Answered(RequestOp::kBatch), uint64_t{kMessages});
}

TEST_P(BatchTest, TooManyOpsIsInvalidArgumentNamingTheLimitAndTheStreamGoesOn) {
  ServerOptions o = TestOptions(GetParam());
  o.stream_limits.max_batch_ops = 8;
  Restart(o);

  ClientContext ctx;
  auto stream = stub_->Batch(&ctx);
  v1::BatchRequest big;
  big.set_id(1);
  for (int i = 0; i < 9; ++i) big.add_ops()->mutable_get()->set_key("k");
  ASSERT_TRUE(stream->Write(big));
  v1::BatchResponse refused;
  ASSERT_TRUE(stream->Read(&refused));
  EXPECT_EQ(refused.id(), 1u);
  EXPECT_EQ(refused.code(), StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(refused.message(),
            "Batch: 9 operations, over the limit of 8 (--max_batch_ops)");
  EXPECT_EQ(refused.results_size(), 0);

  v1::BatchRequest fits;
  fits.set_id(2);
  for (int i = 0; i < 8; ++i) fits.add_ops()->mutable_get()->set_key("k");
  ASSERT_TRUE(stream->Write(fits));
  v1::BatchResponse answered;
  ASSERT_TRUE(stream->Read(&answered));
  EXPECT_EQ(answered.code(), 0);
  EXPECT_EQ(answered.results_size(), 8);
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());

  // MultiGet and MultiSet share the limit.
  ClientContext multi_ctx;
  v1::MultiGetRequest multi;
  for (int i = 0; i < 9; ++i) multi.add_keys("k");
  v1::MultiGetResponse multi_response;
  grpc::Status s = stub_->MultiGet(&multi_ctx, multi, &multi_response);
  EXPECT_EQ(s.error_code(), StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(),
            "MultiGet: 9 items, over the limit of 8 (--max_batch_ops)");
}

// --max_response_bytes bounds the values one answer carries, counted as the
// Gets complete: a Get whose value does not fit is answered
// RESOURCE_EXHAUSTED on its own, naming the limit, and the rest of the
// message (the Gets that fit, a Set) is answered as usual.
TEST_P(BatchTest, GetsOverTheResponseLimitFailOneByOneNamingTheLimit) {
  ServerOptions o = TestOptions(GetParam());
  o.engine.max_value_bytes = 64 << 10;
  o.stream_limits.max_response_bytes = 200 << 10;
  Restart(o);

  Put("big", 60 << 10);

  // Four values of 60 KiB: three fit in 200 KiB.
  v1::BatchRequest gets;
  for (int i = 0; i < 4; ++i) gets.add_ops()->mutable_get()->set_key("big");
  v1::SetRequest* also = gets.add_ops()->mutable_set();
  also->set_key("small");
  also->set_value("v");
  v1::BatchResponse answer = RoundTrip(gets);
  EXPECT_EQ(answer.code(), 0) << answer.message();
  ASSERT_EQ(answer.results_size(), 5);
  int found = 0;
  int refused = 0;
  for (int i = 0; i < 4; ++i) {
    const v1::PipelineResponse& r = answer.results(i);
    if (r.code() == 0) {
      EXPECT_EQ(r.get().value().size(), size_t{60} << 10);
      ++found;
      continue;
    }
    EXPECT_EQ(r.code(), StatusCode::RESOURCE_EXHAUSTED);
    EXPECT_NE(r.message().find("limit of 204800 bytes (--max_response_bytes)"),
              std::string::npos)
        << r.message();
    EXPECT_FALSE(r.has_get());
    ++refused;
  }
  EXPECT_EQ(found, 3);
  EXPECT_EQ(refused, 1);
  EXPECT_EQ(answer.results(4).code(), 0);
  EXPECT_GT(answer.results(4).set().version(), 0u);

  // MultiGet counts its values the same way, with a code per key.
  ClientContext multi_ctx;
  v1::MultiGetRequest multi;
  for (int i = 0; i < 4; ++i) multi.add_keys("big");
  v1::MultiGetResponse multi_response;
  ASSERT_TRUE(stub_->MultiGet(&multi_ctx, multi, &multi_response).ok());
  ASSERT_EQ(multi_response.results_size(), 4);
  found = 0;
  refused = 0;
  for (const v1::GetResponse& r : multi_response.results()) {
    if (r.code() == 0 && r.found()) {
      EXPECT_EQ(r.value().size(), size_t{60} << 10);
      ++found;
      continue;
    }
    EXPECT_EQ(r.code(), StatusCode::RESOURCE_EXHAUSTED);
    EXPECT_FALSE(r.found());
    EXPECT_TRUE(r.value().empty());
    EXPECT_NE(r.message().find("MultiGet item"), std::string::npos);
    EXPECT_NE(r.message().find("limit of 204800 bytes (--max_response_bytes)"),
              std::string::npos)
        << r.message();
    ++refused;
  }
  EXPECT_EQ(found, 3);
  EXPECT_EQ(refused, 1);
}

TEST_P(BatchTest, ResponseLimitsThatCannotWorkStopTheStart) {
  ServerOptions o = TestOptions(GetParam());
  o.engine.max_value_bytes = 64 << 10;
  o.stream_limits.max_response_bytes = 32 << 10;
  auto small = Server::Start(o);
  ASSERT_FALSE(small.ok());
  EXPECT_EQ(small.status().message(),
            "--max_response_bytes=32768 cannot carry one value of "
            "--max_value_bytes=65536");

  o.stream_limits.max_response_bytes = 16 << 20;
  auto large = Server::Start(o);
  ASSERT_FALSE(large.ok());
  EXPECT_EQ(large.status().message(),
            "--max_response_bytes=16777216 plus the framing of "
            "--max_batch_ops=4096 answers (256 bytes each) does not fit in "
            "--max_message_bytes=16777216");
}

TEST_P(BatchTest, AFrameThatDoesNotParseEndsTheStreamWithAnError) {
  grpc::GenericStub generic(channel_);
  ClientContext ctx;
  grpc::CompletionQueue cq;
  auto call = generic.PrepareCall(&ctx, "/furrballs.v1.Cache/Batch", &cq);
  void* tag;
  bool ok;
  call->StartCall(&ctx);
  ASSERT_TRUE(cq.Next(&tag, &ok) && ok);
  grpc::Slice bad(std::string("\x12\x05" "ab", 4));
  grpc::ByteBuffer frame(&bad, 1);
  call->Write(frame, &ctx);
  ASSERT_TRUE(cq.Next(&tag, &ok));
  grpc::ByteBuffer ignored;
  call->Read(&ignored, &ctx);
  ASSERT_TRUE(cq.Next(&tag, &ok));
  EXPECT_FALSE(ok);  // no answer: the stream ended
  grpc::Status status;
  call->Finish(&status, &ctx);
  ASSERT_TRUE(cq.Next(&tag, &ok));
  EXPECT_EQ(status.error_code(), StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("could not be parsed"),
            std::string::npos)
      << status.error_message();
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
}

// A client that writes and never reads. The server must stop reading its
// stream once it holds --max_stream_bytes, so it answers only a bounded
// number of messages instead of its memory growing with them.
TEST_P(BatchTest, AClientThatStopsReadingStallsOnlyItself) {
  ServerOptions o = TestOptions(GetParam());
  o.engine.max_value_bytes = 64 << 10;
  o.stream_limits.max_stream_bytes = 1 << 20;
  Restart(o);
  Put("v", 64 << 10);
  // Each message asks for 1 MiB of answer: 16 Gets of 64 KiB; 200 of them
  // are 200 MiB of answers if all were built. The requests are small (200 ×
  // ~100 bytes fit in HTTP/2's windows), so the client delivers them all;
  // what the bound stops is the server reading them and building answers.
  v1::BatchRequest gets;
  for (int i = 0; i < 16; ++i) gets.add_ops()->mutable_get()->set_key("v");
  const uint64_t answered = AnsweredToAClientThatStopsReading(
      [&](ClientContext* ctx) { return stub_->Batch(ctx); }, gets, 200,
      RequestOp::kBatch);
  // 1 MiB held, plus what gRPC's transport took once written to it.
  EXPECT_GE(answered, 1u);
  EXPECT_LE(answered, 40u);
}

// The Pipeline stream has the same bound: an op is in flight until its
// answer is written, charged its request and the largest answer it can have
// (a Get: --max_value_bytes). Before, an op stopped counting once answered,
// so a client that kept writing and never read made the server queue every
// answer (here 2,000 x 64 KiB).
TEST_P(BatchTest, APipelineClientThatStopsReadingStallsOnlyItself) {
  ServerOptions o = TestOptions(GetParam());
  o.engine.max_value_bytes = 64 << 10;
  o.stream_limits.max_stream_bytes = 1 << 20;
  Restart(o);
  Put("v", 64 << 10);
  v1::PipelineRequest get;
  get.mutable_get()->set_key("v");
  const uint64_t answered = AnsweredToAClientThatStopsReading(
      [&](ClientContext* ctx) { return stub_->Pipeline(ctx); }, get, 2000,
      RequestOp::kPipeline);
  // 1 MiB held (15 Gets), plus what gRPC's transport took once written.
  EXPECT_GE(answered, 1u);
  EXPECT_LE(answered, 200u);
}

INSTANTIATE_TEST_SUITE_P(Modes, BatchTest,
                         ::testing::Values(DispatchMode::kDirect,
                                           DispatchMode::kNodeJob),
                         [](const auto& info) {
                           return info.param == DispatchMode::kDirect
                                      ? "direct"
                                      : "nodejob";
                         });

}  // namespace
}  // namespace furrballs::service
