// RequestCodec without a server: requests decode into the ops the engine
// runs (kind, hash, operands) or into the INVALID_ARGUMENT that names the
// field and the limit; finished ops encode into responses. The round trip
// runs real ops through a Dispatcher in direct mode against a real engine.
#include "service/request_codec.h"

#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "engine/furrball/furrball.h"

namespace furrballs::service {
namespace {

using grpc::StatusCode;

class RequestCodecTest : public ::testing::Test {
 protected:
  void SetUp() override {
    FurrBallOptions o;
    o.memory_budget_bytes = size_t{16} << 20;
    o.simulate_topology = true;
    o.node_count = 2;
    o.pin_workers = false;
    o.max_key_bytes = 8;
    o.max_value_bytes = 16;
    auto engine = FurrBall::Open(o);
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = std::move(*engine);
    codec_ = std::make_unique<RequestCodec>(engine_.get(), Limits{8, 16});
    dispatcher_ = std::make_unique<Dispatcher>(engine_.get(),
                                               DispatcherOptions{});
  }

  // Runs `op` (direct mode: inline) and returns its status.
  grpc::Status Run(CacheOp& op) {
    op.on_done = [](CacheOp*, void*) {};
    EXPECT_EQ(dispatcher_->Submit(&op), Error::kOk);
    return codec_->StatusOf(op, "test");
  }

  std::unique_ptr<FurrBall> engine_;
  std::unique_ptr<RequestCodec> codec_;
  std::unique_ptr<Dispatcher> dispatcher_;
};

TEST_F(RequestCodecTest, GetDecodesToTheKeysHashAndWritesIntoTheResponse) {
  v1::GetRequest request;
  request.set_key("k1");
  v1::GetResponse response;
  CacheOp op;
  ASSERT_TRUE(codec_->Decode(request, "Get", op, &response).ok());
  EXPECT_EQ(op.kind, OpKind::kGet);
  EXPECT_EQ(op.hash, engine_->Hash("k1"));
  EXPECT_EQ(op.value_out, response.mutable_value());
}

TEST_F(RequestCodecTest, SetCarriesModeTtlAndExpectedVersion) {
  v1::SetRequest request;
  request.set_key("k");
  request.set_value("v");
  request.set_mode(v1::SET_IF_VERSION);
  request.set_ttl_ms(500);
  request.set_expected_version(7);
  CacheOp op;
  ASSERT_TRUE(codec_->DecodeSet(request, "Set", op).ok());
  EXPECT_EQ(op.kind, OpKind::kSet);
  EXPECT_EQ(op.write.mode, SetMode::kIfVersion);
  EXPECT_EQ(op.write.ttl_ms, 500u);
  EXPECT_EQ(op.write.expected_version, 7u);
  EXPECT_EQ(op.value, "v");
  EXPECT_EQ(op.hash, engine_->Hash("k"));
}

TEST_F(RequestCodecTest, BadInputIsInvalidArgumentNamingFieldAndLimit) {
  CacheOp op;
  v1::GetResponse get;
  grpc::Status s = codec_->DecodeGet("123456789", "MultiGet item 3", op,
                                     get.mutable_value());
  EXPECT_EQ(s.error_code(), StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(),
            "MultiGet item 3: key is 9 bytes, over the limit of 8");

  v1::SetRequest big;
  big.set_key("k");
  big.set_value(std::string(17, 'x'));
  s = codec_->DecodeSet(big, "Set", op);
  EXPECT_EQ(s.error_code(), StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "Set: value is 17 bytes, over the limit of 16");

  v1::SetRequest bad_mode;
  bad_mode.set_key("k");
  bad_mode.set_mode(static_cast<v1::SetMode>(99));
  s = codec_->DecodeSet(bad_mode, "Set", op);
  EXPECT_EQ(s.error_code(), StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "Set: unknown mode 99");

  v1::TouchRequest long_ttl;
  long_ttl.set_key("k");
  long_ttl.set_ttl_ms(kMaxTtlMs + 1);
  v1::TouchResponse touched;
  s = codec_->Decode(long_ttl, "Touch", op, &touched);
  EXPECT_EQ(s.error_code(), StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("exceeds the maximum"), std::string::npos)
      << s.error_message();

  v1::PipelineRequest empty;
  v1::PipelineResponse answer;
  s = codec_->Decode(empty, op, &answer);
  EXPECT_EQ(s.error_code(), StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "Pipeline: request has no operation set");
}

TEST_F(RequestCodecTest, RoundTripThroughTheEngine) {
  v1::PipelineRequest set;
  set.mutable_set()->set_key("k");
  set.mutable_set()->set_value("hello");
  v1::PipelineResponse set_answer;
  CacheOp set_op;
  ASSERT_TRUE(codec_->Decode(set, set_op, &set_answer).ok());
  grpc::Status s = Run(set_op);
  ASSERT_TRUE(s.ok()) << s.error_message();
  RequestCodec::Encode(set_op, s, &set_answer);
  EXPECT_EQ(set_answer.code(), 0);
  ASSERT_TRUE(set_answer.has_set());
  const uint64_t version = set_answer.set().version();
  EXPECT_GT(version, 0u);

  v1::GetRequest get;
  get.set_key("k");
  v1::GetResponse get_answer;
  CacheOp get_op;
  ASSERT_TRUE(codec_->Decode(get, "Get", get_op, &get_answer).ok());
  ASSERT_TRUE(Run(get_op).ok());
  RequestCodec::Encode(get_op, &get_answer);
  EXPECT_TRUE(get_answer.found());
  EXPECT_EQ(get_answer.value(), "hello");
  EXPECT_EQ(get_answer.version(), version);

  // A conditional write that loses answers ABORTED, and the
  // pipelined answer carries the code with no result.
  v1::PipelineRequest stale;
  stale.mutable_set()->set_key("k");
  stale.mutable_set()->set_value("x");
  stale.mutable_set()->set_mode(v1::SET_IF_VERSION);
  stale.mutable_set()->set_expected_version(version + 1);
  v1::PipelineResponse stale_answer;
  CacheOp stale_op;
  ASSERT_TRUE(codec_->Decode(stale, stale_op, &stale_answer).ok());
  s = Run(stale_op);
  EXPECT_EQ(s.error_code(), StatusCode::ABORTED);
  RequestCodec::Encode(stale_op, s, &stale_answer);
  EXPECT_EQ(stale_answer.code(), int{StatusCode::ABORTED});
  EXPECT_FALSE(stale_answer.message().empty());
  EXPECT_EQ(stale_answer.result_case(), v1::PipelineResponse::RESULT_NOT_SET);

  v1::DeleteRequest del;
  del.set_key("k");
  v1::DeleteResponse deleted;
  CacheOp del_op;
  ASSERT_TRUE(codec_->Decode(del, "Delete", del_op, &deleted).ok());
  ASSERT_TRUE(Run(del_op).ok());
  RequestCodec::Encode(del_op, &deleted);
  EXPECT_TRUE(deleted.deleted());

  CacheOp miss_op;
  v1::GetResponse miss;
  ASSERT_TRUE(codec_->Decode(get, "Get", miss_op, &miss).ok());
  ASSERT_TRUE(Run(miss_op).ok());
  RequestCodec::Encode(miss_op, &miss);
  EXPECT_FALSE(miss.found());
  EXPECT_TRUE(miss.value().empty());
}

}  // namespace
}  // namespace furrballs::service
