// Checks that the generated API links and that its wire format round-trips,
// so a broken code generation step fails here rather than in the server.
#include <gtest/gtest.h>

#include "furrballs/v1/furrballs.grpc.pb.h"
#include "furrballs/v1/furrballs.pb.h"

namespace furrballs::v1 {
namespace {

TEST(ProtoTest, PipelineRequestRoundTrips) {
  PipelineRequest req;
  req.set_id(7);
  req.mutable_set()->set_key("k");
  req.mutable_set()->set_value(std::string("\0v", 2));
  req.mutable_set()->set_mode(SET_IF_VERSION);
  req.mutable_set()->set_expected_version(3);

  PipelineRequest parsed;
  ASSERT_TRUE(parsed.ParseFromString(req.SerializeAsString()));
  EXPECT_EQ(parsed.id(), 7u);
  ASSERT_EQ(parsed.op_case(), PipelineRequest::kSet);
  EXPECT_EQ(parsed.set().value(), std::string("\0v", 2));
  EXPECT_EQ(parsed.set().expected_version(), 3u);
}

TEST(ProtoTest, ServiceDescriptorListsEveryMethod) {
  const auto* service = Cache::service_full_name();
  EXPECT_STREQ(service, "furrballs.v1.Cache");
  const auto* desc = GetRequest::descriptor()->file()->FindServiceByName("Cache");
  ASSERT_NE(desc, nullptr);
  for (const char* m : {"Get", "Set", "Delete", "Touch", "MultiGet",
                        "MultiSet", "Pipeline", "Stats"}) {
    EXPECT_NE(desc->FindMethodByName(m), nullptr) << m;
  }
  EXPECT_TRUE(desc->FindMethodByName("Pipeline")->client_streaming());
}

}  // namespace
}  // namespace furrballs::v1
