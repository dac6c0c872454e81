// proto/served_descriptors.h: the descriptors of every protocol a Furrballs
// server serves, comments included, for server reflection.
//
// Thread safety: immutable data.
#ifndef FURRBALLS_PROTO_SERVED_DESCRIPTORS_H_
#define FURRBALLS_PROTO_SERVED_DESCRIPTORS_H_

#include <string_view>

namespace furrballs::proto {

// A serialized google.protobuf.FileDescriptorSet of furrballs/v1/furrballs.proto,
// grpc/health/v1/health.proto and grpc/reflection/v1alpha/reflection.proto,
// written at build time by protoc with --include_source_info, so it carries
// the .proto files' comments (which protoc leaves out of generated C++ code).
std::string_view ServedDescriptorSet();

}  // namespace furrballs::proto

#endif  // FURRBALLS_PROTO_SERVED_DESCRIPTORS_H_
