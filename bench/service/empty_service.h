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
#ifndef FURRBALLS_BENCH_SERVICE_EMPTY_SERVICE_H_
#define FURRBALLS_BENCH_SERVICE_EMPTY_SERVICE_H_

#include <cstddef>

#include "furrballs/v1/furrballs.grpc.pb.h"

namespace furrballs::bench {

class EmptyCacheService final : public v1::Cache::CallbackService {
 public:
  explicit EmptyCacheService(size_t max_pipeline_in_flight)
      : max_pipeline_in_flight_(max_pipeline_in_flight) {}

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

 private:
  const size_t max_pipeline_in_flight_;
};

}  // namespace furrballs::bench

#endif  // FURRBALLS_BENCH_SERVICE_EMPTY_SERVICE_H_
