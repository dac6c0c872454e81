// service/reflection.h: gRPC server reflection (grpc.reflection.v1alpha),
// answered from the descriptors of the protocols the server serves, comments
// included.
//
// Thread safety: thread-safe. Everything a ReflectionService holds is
// immutable once constructed; each stream is one reactor, whose callbacks
// gRPC runs one at a time (a read and a write are never outstanding at once).
//
// Why not gRPC's reflection plugin. gRPC 1.51's plugin answers from
// protobuf's generated descriptor pool, which has no comments (protoc leaves
// source info out of generated code, and the plugin copies none) and no
// grpc.health.v1 (gRPC's health service is built without protobuf-generated
// code). So `grpcurl describe` showed no comments, and grpc.health.v1.Health
// was listed but could be neither described nor called without a local
// .proto. This service answers from a FileDescriptorSet that protoc writes
// with source info at build time (proto/served_descriptors.h).
#ifndef FURRBALLS_SERVICE_REFLECTION_H_
#define FURRBALLS_SERVICE_REFLECTION_H_

#include <string>
#include <string_view>
#include <vector>

#include <absl/container/flat_hash_map.h>
#include <absl/container/flat_hash_set.h>
#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor_database.h>

#include "grpc/reflection/v1alpha/reflection.grpc.pb.h"

namespace furrballs::service {

class ReflectionService final
    : public grpc::reflection::v1alpha::ServerReflection::CallbackService {
 public:
  using Request = grpc::reflection::v1alpha::ServerReflectionRequest;
  using Response = grpc::reflection::v1alpha::ServerReflectionResponse;

  // Serves the files of `descriptor_set` (a serialized FileDescriptorSet
  // whose files' dependencies are all in it) and lists every service they
  // define. A set that does not parse or build is a broken build: the
  // process aborts with the reason.
  explicit ReflectionService(std::string_view descriptor_set);

  grpc::ServerBidiReactor<Request, Response>* ServerReflectionInfo(
      grpc::CallbackServerContext* ctx) override;

  // The answer to `request` on a stream that has already sent the files in
  // `sent` (updated): a file comes with those of its dependencies not yet
  // sent; a name that is not found is an error_response with NOT_FOUND.
  Response Answer(const Request& request,
                  absl::flat_hash_set<std::string>* sent) const;

  // Fully qualified names of the services listed.
  const std::vector<std::string>& services() const { return services_; }

 private:
  // Appends `file` (always) and its transitive dependencies (unless already
  // in `sent`) to `out`, and records them in `sent`.
  void AddFile(const google::protobuf::FileDescriptor* file,
               absl::flat_hash_set<std::string>* sent,
               grpc::reflection::v1alpha::FileDescriptorResponse* out) const;

  // Serialized FileDescriptorProtos (with source info) by file name.
  absl::flat_hash_map<std::string, std::string> files_;
  // The pool builds from database_, so database_ is declared first.
  google::protobuf::SimpleDescriptorDatabase database_;
  google::protobuf::DescriptorPool pool_{&database_};
  std::vector<std::string> services_;
};

// The reflection service of every Furrballs server, over
// proto/served_descriptors.h: it lists and describes furrballs.v1.Cache,
// grpc.health.v1.Health and grpc.reflection.v1alpha.ServerReflection. One
// instance for the process, built on first use and never destroyed: it is
// immutable, and a callback service may be registered with several servers.
ReflectionService* ServedReflection();

}  // namespace furrballs::service

#endif  // FURRBALLS_SERVICE_REFLECTION_H_
