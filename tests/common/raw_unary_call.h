// tests/common/raw_unary_call.h: a unary gRPC call whose request body is
// given as raw bytes, as a client with a broken encoder would send it, for
// tests of how the server answers bodies that do not parse.
//
// Thread safety: each call is independent; blocks the calling thread until
// the answer arrives.
#ifndef FURRBALLS_TESTS_COMMON_RAW_UNARY_CALL_H_
#define FURRBALLS_TESTS_COMMON_RAW_UNARY_CALL_H_

#include <future>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

namespace furrballs::test_support {

// A body that no message parses: field 1, length-delimited, announces five
// bytes and carries two.
inline const std::string kUnparsable("\x0a\x05" "ab", 4);

// Calls `method` ("/package.Service/Method") with `body` as its request's
// bytes and `metadata` as extra headers; returns the call's status.
inline grpc::Status RawUnaryCall(
    const std::shared_ptr<grpc::Channel>& channel, const std::string& method,
    const std::string& body,
    const std::vector<std::pair<std::string, std::string>>& metadata = {}) {
  grpc::GenericStub stub(channel);
  grpc::ClientContext ctx;
  for (const auto& [key, value] : metadata) ctx.AddMetadata(key, value);
  grpc::Slice slice(body);
  grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer response;
  std::promise<grpc::Status> done;
  stub.UnaryCall(&ctx, method, grpc::StubOptions(), &request, &response,
                 [&done](grpc::Status s) { done.set_value(std::move(s)); });
  return done.get_future().get();
}

}  // namespace furrballs::test_support

#endif  // FURRBALLS_TESTS_COMMON_RAW_UNARY_CALL_H_
