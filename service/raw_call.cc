#include "service/raw_call.h"

#include <grpcpp/impl/codegen/proto_utils.h>
#include <grpcpp/support/proto_buffer_reader.h>

namespace furrballs::service {

bool ParseMessage(const grpc::ByteBuffer& bytes,
                  google::protobuf::MessageLite* message) {
  // ProtoBufferReader takes a mutable buffer but only reads its slices; the
  // buffer stays as it is (ReleaseParsedBytes empties it once the caller
  // is done with it).
  grpc::ProtoBufferReader reader(const_cast<grpc::ByteBuffer*>(&bytes));
  return reader.status().ok() && message->ParseFromZeroCopyStream(&reader);
}

void ReleaseParsedBytes(const grpc::ByteBuffer& bytes) {
  const_cast<grpc::ByteBuffer&>(bytes).Clear();
}

grpc::Status SerializeMessage(const google::protobuf::MessageLite& message,
                              grpc::ByteBuffer* bytes) {
  bool own_buffer = false;  // always true for a ByteBuffer destination
  return grpc::SerializationTraits<google::protobuf::MessageLite>::Serialize(
      message, bytes, &own_buffer);
}

grpc::ServerUnaryReactor* RawUnaryReply::Reply(const grpc::Status& status) {
  grpc::ServerUnaryReactor* const reactor = reactor_;
  grpc::Status final_status = status;
  if (status.ok()) {
    grpc::Status serialized = SerializeMessage(*response_, reply_);
    if (!serialized.ok()) final_status = serialized;
  }
  delete this;
  reactor->Finish(final_status);
  return reactor;
}

}  // namespace furrballs::service
