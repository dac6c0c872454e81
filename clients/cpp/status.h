// clients/cpp/status.h: conversion of gRPC statuses (and the per-item codes
// of MultiSet and Pipeline responses) to absl::Status.
//
// Thread safety: pure functions.
//
// gRPC and Abseil share the canonical code numbering (google.rpc.Code), so the
// conversion keeps the code and the message exactly; a number outside that
// range (a buggy or newer peer) becomes UNKNOWN with the number in the
// message rather than an absl::StatusCode no switch statement expects.
#ifndef FURRBALLS_CLIENTS_CPP_STATUS_H_
#define FURRBALLS_CLIENTS_CPP_STATUS_H_

#include <cstdint>

#include <absl/status/status.h>
#include <absl/strings/string_view.h>
#include <grpcpp/support/status.h>

namespace furrballs::client {

// The status with the same code and message. OK stays OK (message dropped,
// as absl::Status has none for OK).
absl::Status ToAbslStatus(const grpc::Status& status);

// The status for a google.rpc.Code number carried inside a response
// (SetResult.code, PipelineResponse.code).
absl::Status StatusFromCode(int32_t code, absl::string_view message);

// Whether `status` is the RESOURCE_EXHAUSTED a Get in a Batch or MultiGet
// answer gets when its value did not fit beside the others under the
// server's --max_response_bytes (service/response_budget.h), told apart from
// a full queue or memory by the flag its message names. Such a Get succeeds
// when sent alone: the server keeps that limit at least one value's size.
bool IsOverResponseLimit(const absl::Status& status);

}  // namespace furrballs::client

#endif  // FURRBALLS_CLIENTS_CPP_STATUS_H_
