#include "engine/numatic/error_status.h"

#include <gtest/gtest.h>

namespace furrballs {
namespace {

TEST(ErrorStatusTest, CarriesTheErrorAndTheMessage) {
  const absl::Status status = ErrorStatus(Error::kNoSuchNode, "node 5 is gone");
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(status.message(), "node 5 is gone");
  EXPECT_EQ(ErrorOf(status), Error::kNoSuchNode);
}

TEST(ErrorStatusTest, CodesFollowTheErrorsMeaning) {
  EXPECT_EQ(ErrorStatus(Error::kAllocationFailed, "").code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(ErrorStatus(Error::kInvalidTopology, "").code(),
            absl::StatusCode::kInvalidArgument);
  // Two Errors share INVALID_ARGUMENT; the payload keeps them apart.
  EXPECT_EQ(ErrorOf(ErrorStatus(Error::kInvalidTopology, "")),
            Error::kInvalidTopology);
  EXPECT_EQ(ErrorOf(ErrorStatus(Error::kInvalidArgument, "")),
            Error::kInvalidArgument);
}

TEST(ErrorStatusTest, OkAndForeignStatuses) {
  EXPECT_EQ(ErrorOf(absl::OkStatus()), Error::kOk);
  EXPECT_EQ(ErrorOf(absl::ResourceExhaustedError("no")),
            Error::kAllocationFailed);
  EXPECT_EQ(ErrorOf(absl::NotFoundError("no")), Error::kNoSuchNode);
}

}  // namespace
}  // namespace furrballs
