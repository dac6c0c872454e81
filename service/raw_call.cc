#include "service/raw_call.h"

#include <vector>

#include <grpcpp/impl/codegen/proto_utils.h>
#include <grpcpp/support/proto_buffer_reader.h>
#include <grpcpp/support/slice.h>

namespace furrballs::service {

bool ParseMessage(const grpc::ByteBuffer& bytes,
                  google::protobuf::MessageLite* message) {
  // ProtoBufferReader takes a mutable buffer but only reads its slices; the
  // buffer stays as it is (ReleaseParsedBytes empties it once the caller
  // is done with it).
  grpc::ProtoBufferReader reader(const_cast<grpc::ByteBuffer*>(&bytes));
  return reader.status().ok() && message->ParseFromZeroCopyStream(&reader);
}

bool FlattenMessage(const grpc::ByteBuffer& bytes, std::string* out) {
  std::vector<grpc::Slice> slices;
  if (!bytes.Dump(&slices).ok()) return false;
  out->clear();
  for (const grpc::Slice& s : slices) {
    out->append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return true;
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
  StreamedAnswer* const answer = answer_;
  grpc::Status final_status = status;
  if (status.ok()) {
    grpc::Status serialized = SerializeMessage(*response_, reply_);
    if (!serialized.ok()) final_status = serialized;
  }
  delete this;
  if (answer != nullptr) {
    answer->Answer(final_status);
  } else {
    reactor->Finish(final_status);
  }
  return reactor;
}

}  // namespace furrballs::service
