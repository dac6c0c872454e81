// batch_wire against protobuf's generated classes, both ways: requests that
// protobuf writes are read into the same fields (oneof replacement, unknown
// fields, repeated scalars included), answers written here parse with
// protobuf into the messages they stand for, and malformed or over-large
// requests are refused.
#include "service/batch_wire.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "furrballs/v1/furrballs.pb.h"

namespace furrballs::service {
namespace {

TEST(BatchWireTest, ReadsWhatProtobufWrites) {
  v1::BatchRequest request;
  request.set_id(77);
  request.set_timeout_ms(250);
  v1::PipelineRequest* get = request.add_ops();
  get->set_id(1);
  get->mutable_get()->set_key("alpha");
  v1::PipelineRequest* set = request.add_ops();
  set->mutable_set()->set_key("beta");
  set->mutable_set()->set_value(std::string(300, 'v'));  // multi-byte length
  set->mutable_set()->set_ttl_ms(1234567);
  set->mutable_set()->set_mode(v1::SET_IF_VERSION);
  set->mutable_set()->set_expected_version(uint64_t{1} << 40);
  request.add_ops()->mutable_delete_()->set_key("gamma");
  v1::PipelineRequest* touch = request.add_ops();
  touch->set_id(uint64_t{1} << 63);
  touch->mutable_touch()->set_key("delta");
  touch->mutable_touch()->set_ttl_ms(9);
  request.add_ops();  // no operation set
  const std::string bytes = request.SerializeAsString();

  uint64_t id = 0;
  uint64_t timeout_ms = 0;
  size_t count = 0;
  std::vector<OpView> ops;
  ASSERT_TRUE(ParseBatchRequest(bytes, 100, &id, &timeout_ms, &ops, &count));
  EXPECT_EQ(id, 77u);
  EXPECT_EQ(timeout_ms, 250u);
  ASSERT_EQ(count, 5u);
  ASSERT_EQ(ops.size(), 5u);
  EXPECT_EQ(ops[0].id, 1u);
  EXPECT_EQ(ops[0].kind, OpView::Kind::kGet);
  EXPECT_EQ(ops[0].key, "alpha");
  EXPECT_EQ(ops[1].kind, OpView::Kind::kSet);
  EXPECT_EQ(ops[1].key, "beta");
  EXPECT_EQ(ops[1].value, std::string(300, 'v'));
  EXPECT_EQ(ops[1].ttl_ms, 1234567u);
  EXPECT_EQ(ops[1].mode, v1::SET_IF_VERSION);
  EXPECT_EQ(ops[1].expected_version, uint64_t{1} << 40);
  EXPECT_EQ(ops[2].kind, OpView::Kind::kDelete);
  EXPECT_EQ(ops[2].key, "gamma");
  EXPECT_EQ(ops[3].id, uint64_t{1} << 63);
  EXPECT_EQ(ops[3].kind, OpView::Kind::kTouch);
  EXPECT_EQ(ops[3].ttl_ms, 9u);
  EXPECT_EQ(ops[4].kind, OpView::Kind::kNone);
}

TEST(BatchWireTest, LastOneofMemberWinsAndUnknownFieldsAreSkipped) {
  // A get followed by a delete in one op: protobuf keeps the delete.
  v1::PipelineRequest first;
  first.mutable_get()->set_key("old");
  v1::PipelineRequest second;
  second.mutable_delete_()->set_key("new");
  // One op whose bytes hold both members, then an unknown field; and an
  // unknown field of the request after it.
  const std::string op_bytes =
      first.SerializeAsString() + second.SerializeAsString() +
      std::string("\xf8\x07\x05", 3);  // unknown varint field 127 = 5
  const std::string bytes = std::string("\x12") +
                            static_cast<char>(op_bytes.size()) + op_bytes +
                            std::string("\x7a\x01x", 3);  // field 15 = "x"
  v1::BatchRequest parsed;
  ASSERT_TRUE(parsed.ParseFromString(bytes));
  ASSERT_EQ(parsed.ops_size(), 1);
  ASSERT_TRUE(parsed.ops(0).has_delete_());

  uint64_t id;
  uint64_t timeout_ms;
  size_t count;
  std::vector<OpView> ops;
  ASSERT_TRUE(ParseBatchRequest(bytes, 10, &id, &timeout_ms, &ops, &count));
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].kind, OpView::Kind::kDelete);
  EXPECT_EQ(ops[0].key, "new");
}

TEST(BatchWireTest, RefusesMalformedAndOverLargeRequests) {
  v1::BatchRequest request;
  for (int i = 0; i < 3; ++i) request.add_ops()->mutable_get()->set_key("k");
  const std::string bytes = request.SerializeAsString();
  uint64_t id;
  uint64_t timeout_ms;
  size_t count;
  std::vector<OpView> ops;
  EXPECT_FALSE(ParseBatchRequest(bytes, 2, &id, &timeout_ms, &ops, &count));
  EXPECT_EQ(count, 3u);  // counted, so the refusal can say how many
  EXPECT_TRUE(ops.empty());
  // Truncated anywhere inside, it is refused (never read past the end).
  // (Each op is 7 bytes: a cut between two ops is a shorter valid request.)
  for (size_t cut = 1; cut < bytes.size(); ++cut) {
    if (cut % 7 == 0) continue;
    EXPECT_FALSE(ParseBatchRequest(bytes.substr(0, cut), 10, &id, &timeout_ms, &ops,
                                   &count))
        << cut;
  }
  EXPECT_FALSE(ParseBatchRequest(std::string("\x00", 1), 10, &id, &timeout_ms,
                                 &ops, &count));
  EXPECT_FALSE(ParseBatchRequest("\x0b", 10, &id, &timeout_ms, &ops, &count));  // group
}

TEST(BatchWireTest, ProtobufReadsWhatIsWritten) {
  std::string out;
  BeginBatchResponse(9, 0, {}, &out);
  OpAnswer hit;
  hit.id = 300;
  hit.kind = OpAnswer::Kind::kGet;
  hit.found = true;
  hit.version = 5;
  hit.ttl_remaining_ms = 1000;
  const std::string value(200, 'x');
  hit.value = value;
  AppendOpAnswer(hit, &out);
  OpAnswer miss;
  miss.kind = OpAnswer::Kind::kGet;
  AppendOpAnswer(miss, &out);
  OpAnswer set;
  set.kind = OpAnswer::Kind::kSet;
  set.version = uint64_t{1} << 50;
  AppendOpAnswer(set, &out);
  OpAnswer del;
  del.kind = OpAnswer::Kind::kDelete;
  del.deleted = true;
  AppendOpAnswer(del, &out);
  OpAnswer touch;
  touch.kind = OpAnswer::Kind::kTouch;
  AppendOpAnswer(touch, &out);
  OpAnswer failed;
  failed.id = 4;
  failed.code = 3;
  failed.message = "Batch: key is empty";
  AppendOpAnswer(failed, &out);

  v1::BatchResponse response;
  ASSERT_TRUE(response.ParseFromString(out));
  EXPECT_EQ(response.id(), 9u);
  EXPECT_EQ(response.code(), 0);
  ASSERT_EQ(response.results_size(), 6);
  const v1::PipelineResponse& r0 = response.results(0);
  EXPECT_EQ(r0.id(), 300u);
  ASSERT_TRUE(r0.has_get());
  EXPECT_TRUE(r0.get().found());
  EXPECT_EQ(r0.get().value(), value);
  EXPECT_EQ(r0.get().version(), 5u);
  EXPECT_EQ(r0.get().ttl_remaining_ms(), 1000u);
  ASSERT_TRUE(response.results(1).has_get());  // a miss still says "get"
  EXPECT_FALSE(response.results(1).get().found());
  EXPECT_EQ(response.results(2).set().version(), uint64_t{1} << 50);
  EXPECT_TRUE(response.results(3).delete_().deleted());
  EXPECT_TRUE(response.results(4).has_touch());
  const v1::PipelineResponse& r5 = response.results(5);
  EXPECT_EQ(r5.id(), 4u);
  EXPECT_EQ(r5.code(), 3);
  EXPECT_EQ(r5.message(), "Batch: key is empty");
  EXPECT_EQ(r5.result_case(), v1::PipelineResponse::RESULT_NOT_SET);

  // What protobuf writes for the same message is byte for byte the same.
  EXPECT_EQ(response.SerializeAsString(), out);

  std::string refused;
  BeginBatchResponse(2, 8, "Batch: over the limit", &refused);
  v1::BatchResponse whole;
  ASSERT_TRUE(whole.ParseFromString(refused));
  EXPECT_EQ(whole.code(), 8);
  EXPECT_EQ(whole.message(), "Batch: over the limit");
  EXPECT_EQ(whole.results_size(), 0);
}

}  // namespace
}  // namespace furrballs::service
