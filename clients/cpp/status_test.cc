// Tests of the gRPC-to-Abseil status conversion: every canonical code keeps
// its number and its message; out-of-range codes become UNKNOWN.
#include "clients/cpp/status.h"

#include <string>

#include <gtest/gtest.h>

namespace furrballs::client {
namespace {

TEST(StatusTest, EveryCanonicalCodeKeepsCodeAndMessage) {
  for (int code = 1; code <= 16; ++code) {
    const std::string message = "what went wrong #" + std::to_string(code);
    grpc::Status g(static_cast<grpc::StatusCode>(code), message);
    absl::Status a = ToAbslStatus(g);
    EXPECT_EQ(static_cast<int>(a.code()), code);
    EXPECT_EQ(a.message(), message);
  }
}

TEST(StatusTest, NamedCodesMapToTheirAbslTwins) {
  EXPECT_TRUE(absl::IsInvalidArgument(
      ToAbslStatus(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "k"))));
  EXPECT_TRUE(absl::IsAborted(
      ToAbslStatus(grpc::Status(grpc::StatusCode::ABORTED, "v"))));
  EXPECT_TRUE(absl::IsAlreadyExists(
      ToAbslStatus(grpc::Status(grpc::StatusCode::ALREADY_EXISTS, "x"))));
  EXPECT_TRUE(absl::IsDeadlineExceeded(
      ToAbslStatus(grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "d"))));
  EXPECT_TRUE(absl::IsUnavailable(
      ToAbslStatus(grpc::Status(grpc::StatusCode::UNAVAILABLE, "u"))));
  EXPECT_TRUE(absl::IsResourceExhausted(
      ToAbslStatus(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "r"))));
}

TEST(StatusTest, OkStaysOk) {
  EXPECT_TRUE(ToAbslStatus(grpc::Status::OK).ok());
  EXPECT_TRUE(StatusFromCode(0, "ignored").ok());
}

TEST(StatusTest, CodesOutsideTheCanonicalRangeBecomeUnknown) {
  for (int code : {-1, 17, 1000}) {
    absl::Status s = StatusFromCode(code, "odd");
    EXPECT_TRUE(absl::IsUnknown(s)) << code;
    EXPECT_NE(s.message().find(std::to_string(code)), absl::string_view::npos);
    EXPECT_NE(s.message().find("odd"), absl::string_view::npos);
  }
}

// Only the response limit's RESOURCE_EXHAUSTED is worth sending again
// alone; a full queue or memory is not (the message tells them apart).
TEST(StatusTest, OverResponseLimitIsToldApartByItsMessage) {
  EXPECT_TRUE(IsOverResponseLimit(absl::ResourceExhaustedError(
      "Batch op 3: not answered: the values already in this answer reach "
      "the limit of 524288 bytes (--max_response_bytes); ask for this key "
      "again in another call")));
  EXPECT_FALSE(IsOverResponseLimit(absl::ResourceExhaustedError(
      "the owning node's request queue is full; retry later")));
  EXPECT_FALSE(IsOverResponseLimit(
      absl::InvalidArgumentError("limit (--max_response_bytes)")));
  EXPECT_FALSE(IsOverResponseLimit(absl::OkStatus()));
}

}  // namespace
}  // namespace furrballs::client
