// bench/service/empty_service.h: furrballs.v1.Cache with empty handlers, the
// transport's limit that the service benchmark measures Furrballs against
// (docs/service_bench.md).
//
// Thread safety: thread-safe; gRPC calls the handlers from its own threads.
//
// Every RPC is answered at once with OK and an empty answer of the right
// shape: Get says found=false, Set returns version 0, MultiGet and MultiSet
// return one empty result per key or item, and Pipeline echoes each request's
// id with an empty result of the request's kind. Nothing is validated,
// hashed or stored, so the time a client sees is gRPC's alone. The Pipeline
// stream pauses reading while `max_pipeline_in_flight` answers await their
// write, as the real service does.
//
// Batch is the floor of Furrballs' Batch stream (docs/service_bench.md, "The
// Batch stream's floor"): registered raw like CacheService's, each message
// is read with service/batch_wire.h and answered with the same encoder, one
// result per op in order: a Get finds a fixed 64-byte value (from static
// memory, as large as the benchmarks' values), a Set gets version 1, a Delete
// deleted=true, a Touch OK, an op of no kind INVALID_ARGUMENT. What the real
// reactor does besides (decoding into engine ops, the engine, admission,
// statistics, the stream's byte budget) is what the floor leaves out. One
// answer is written at a time and reading pauses while kMaxQueuedAnswers wait.
#ifndef FURRBALLS_BENCH_SERVICE_EMPTY_SERVICE_H_
#define FURRBALLS_BENCH_SERVICE_EMPTY_SERVICE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

#include <grpcpp/support/byte_buffer.h>

#include "furrballs/v1/furrballs.grpc.pb.h"

namespace furrballs::bench {

// Every method typed, but Batch raw (ByteBuffer in and out), as
// CacheService registers it.
using EmptyCacheServiceBase = v1::Cache::WithCallbackMethod_Get<
    v1::Cache::WithCallbackMethod_Set<v1::Cache::WithCallbackMethod_Delete<
        v1::Cache::WithCallbackMethod_Touch<
            v1::Cache::WithCallbackMethod_MultiGet<
                v1::Cache::WithCallbackMethod_MultiSet<
                    v1::Cache::WithCallbackMethod_Pipeline<
                        v1::Cache::WithCallbackMethod_Stats<
                            v1::Cache::WithRawCallbackMethod_Batch<
                                v1::Cache::Service>>>>>>>>>;

class EmptyCacheService final : public EmptyCacheServiceBase {
 public:
  // The value every Batch Get finds.
  static constexpr size_t kValueBytes = 64;
  // Batch answers waiting for their write before the stream stops reading.
  static constexpr size_t kMaxQueuedAnswers = 16;

  // A Batch message of more than `max_batch_ops` ops is answered
  // INVALID_ARGUMENT as a whole, as the real service does (--max_batch_ops).
  EmptyCacheService(size_t max_pipeline_in_flight, size_t max_batch_ops)
      : max_pipeline_in_flight_(max_pipeline_in_flight),
        max_batch_ops_(max_batch_ops) {}

  // Batch messages answered so far (a request with ops over the limit
  // included), for the benchmarks' ops per message.
  uint64_t batch_messages() const {
    return batch_messages_.load(std::memory_order_relaxed);
  }

  grpc::ServerUnaryReactor* Get(grpc::CallbackServerContext* ctx,
                                const v1::GetRequest* request,
                                v1::GetResponse* response) override;
  grpc::ServerUnaryReactor* Set(grpc::CallbackServerContext* ctx,
                                const v1::SetRequest* request,
                                v1::SetResponse* response) override;
  grpc::ServerUnaryReactor* Delete(grpc::CallbackServerContext* ctx,
                                   const v1::DeleteRequest* request,
                                   v1::DeleteResponse* response) override;
  grpc::ServerUnaryReactor* Touch(grpc::CallbackServerContext* ctx,
                                  const v1::TouchRequest* request,
                                  v1::TouchResponse* response) override;
  grpc::ServerUnaryReactor* MultiGet(grpc::CallbackServerContext* ctx,
                                     const v1::MultiGetRequest* request,
                                     v1::MultiGetResponse* response) override;
  grpc::ServerUnaryReactor* MultiSet(grpc::CallbackServerContext* ctx,
                                     const v1::MultiSetRequest* request,
                                     v1::MultiSetResponse* response) override;
  grpc::ServerBidiReactor<v1::PipelineRequest, v1::PipelineResponse>*
  Pipeline(grpc::CallbackServerContext* ctx) override;
  grpc::ServerUnaryReactor* Stats(grpc::CallbackServerContext* ctx,
                                  const v1::StatsRequest* request,
                                  v1::StatsResponse* response) override;
  // A frame that does not parse ends the stream with INVALID_ARGUMENT once
  // the answers before it are written.
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* Batch(
      grpc::CallbackServerContext* ctx) override;

 private:
  const size_t max_pipeline_in_flight_;
  const size_t max_batch_ops_;
  // Relaxed: a count read between loads, ordered by nothing else.
  std::atomic<uint64_t> batch_messages_{0};
};

}  // namespace furrballs::bench

#endif  // FURRBALLS_BENCH_SERVICE_EMPTY_SERVICE_H_
