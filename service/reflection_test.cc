// Tests of the reflection service's answers; grpcurl drives it over a real
// server in //tests/clients:grpcurl_ghz_test.
#include "service/reflection.h"

#include <string>
#include <vector>

#include <google/protobuf/descriptor.pb.h>
#include <gtest/gtest.h>

namespace furrballs::service {
namespace {

using Request = ReflectionService::Request;
using Response = ReflectionService::Response;

google::protobuf::FileDescriptorProto Parse(const std::string& bytes) {
  google::protobuf::FileDescriptorProto file;
  EXPECT_TRUE(file.ParseFromString(bytes));
  return file;
}

std::vector<std::string> FileNames(const Response& response) {
  std::vector<std::string> names;
  for (const std::string& bytes :
       response.file_descriptor_response().file_descriptor_proto()) {
    names.push_back(Parse(bytes).name());
  }
  return names;
}

TEST(ServedReflectionTest, ListsEveryServedService) {
  absl::flat_hash_set<std::string> sent;
  Request request;
  request.set_host("h");
  request.set_list_services("");
  Response response = ServedReflection()->Answer(request, &sent);
  EXPECT_EQ(response.valid_host(), "h");
  EXPECT_TRUE(response.original_request().has_list_services());
  std::vector<std::string> names;
  for (const auto& s : response.list_services_response().service()) {
    names.push_back(s.name());
  }
  EXPECT_EQ(names, (std::vector<std::string>{
                       "furrballs.v1.Cache", "grpc.health.v1.Health",
                       "grpc.reflection.v1alpha.ServerReflection"}));
}

// Each listed service, a nested enum and a field resolve to their file, and
// the file carries the .proto's comments.
TEST(ServedReflectionTest, SymbolsResolveToFilesWithComments) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"furrballs.v1.Cache", "furrballs/v1/furrballs.proto"},
      {"furrballs.v1.Cache.Get", "furrballs/v1/furrballs.proto"},
      {"furrballs.v1.GetResponse.code", "furrballs/v1/furrballs.proto"},
      {"grpc.health.v1.Health", "grpc/health/v1/health.proto"},
      {"grpc.health.v1.HealthCheckResponse.ServingStatus",
       "grpc/health/v1/health.proto"},
      {"grpc.reflection.v1alpha.ServerReflection",
       "grpc/reflection/v1alpha/reflection.proto"},
  };
  for (const auto& [symbol, file] : cases) {
    absl::flat_hash_set<std::string> sent;
    Request request;
    request.set_file_containing_symbol(symbol);
    Response response = ServedReflection()->Answer(request, &sent);
    ASSERT_FALSE(response.has_error_response())
        << symbol << ": " << response.error_response().error_message();
    EXPECT_EQ(FileNames(response), std::vector<std::string>{file}) << symbol;
  }
  absl::flat_hash_set<std::string> sent;
  Request request;
  request.set_file_by_filename("furrballs/v1/furrballs.proto");
  Response response = ServedReflection()->Answer(request, &sent);
  ASSERT_EQ(FileNames(response).size(), 1u);
  const std::string comments = Parse(
      response.file_descriptor_response().file_descriptor_proto(0))
                                   .source_code_info()
                                   .DebugString();
  EXPECT_NE(comments.find("Reads one key."), std::string::npos);
}

TEST(ServedReflectionTest, UnknownNamesAreNotFound) {
  absl::flat_hash_set<std::string> sent;
  Request by_symbol;
  by_symbol.set_file_containing_symbol("furrballs.v1.NoSuchThing");
  Request by_file;
  by_file.set_file_by_filename("no/such.proto");
  Request extension;
  extension.mutable_file_containing_extension()->set_containing_type(
      "furrballs.v1.GetRequest");
  extension.mutable_file_containing_extension()->set_extension_number(100);
  Request numbers;
  numbers.set_all_extension_numbers_of_type("furrballs.v1.NoSuchThing");
  for (const Request& request : {by_symbol, by_file, extension, numbers}) {
    Response response = ServedReflection()->Answer(request, &sent);
    EXPECT_EQ(response.error_response().error_code(),
              static_cast<int>(grpc::StatusCode::NOT_FOUND))
        << request.DebugString();
    EXPECT_FALSE(response.error_response().error_message().empty());
  }
  Response empty = ServedReflection()->Answer(Request(), &sent);
  EXPECT_EQ(empty.error_response().error_code(),
            static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT));
}

TEST(ServedReflectionTest, ExtensionNumbersOfAKnownType) {
  absl::flat_hash_set<std::string> sent;
  Request request;
  request.set_all_extension_numbers_of_type("furrballs.v1.GetRequest");
  Response response = ServedReflection()->Answer(request, &sent);
  ASSERT_TRUE(response.has_all_extension_numbers_response());
  EXPECT_EQ(response.all_extension_numbers_response().base_type_name(),
            "furrballs.v1.GetRequest");
  EXPECT_EQ(response.all_extension_numbers_response().extension_number_size(),
            0);
}

// A file comes with its dependencies, each of them once per stream; the file
// asked for comes every time.
TEST(ReflectionServiceTest, DependenciesAreSentOncePerStream) {
  google::protobuf::FileDescriptorSet set;
  google::protobuf::FileDescriptorProto* base = set.add_file();
  base->set_name("base.proto");
  base->set_package("t");
  base->add_message_type()->set_name("Base");
  google::protobuf::FileDescriptorProto* top = set.add_file();
  top->set_name("top.proto");
  top->set_package("t");
  top->add_dependency("base.proto");
  google::protobuf::DescriptorProto* m = top->add_message_type();
  m->set_name("Top");
  google::protobuf::FieldDescriptorProto* f = m->add_field();
  f->set_name("base");
  f->set_number(1);
  f->set_label(google::protobuf::FieldDescriptorProto::LABEL_OPTIONAL);
  f->set_type(google::protobuf::FieldDescriptorProto::TYPE_MESSAGE);
  f->set_type_name(".t.Base");
  ReflectionService service(set.SerializeAsString());

  absl::flat_hash_set<std::string> sent;
  Request request;
  request.set_file_containing_symbol("t.Top");
  EXPECT_EQ(FileNames(service.Answer(request, &sent)),
            (std::vector<std::string>{"top.proto", "base.proto"}));
  EXPECT_EQ(FileNames(service.Answer(request, &sent)),
            std::vector<std::string>{"top.proto"});
  request.set_file_by_filename("base.proto");
  EXPECT_EQ(FileNames(service.Answer(request, &sent)),
            std::vector<std::string>{"base.proto"});
  EXPECT_TRUE(service.services().empty());
}

}  // namespace
}  // namespace furrballs::service
