// service/raw_call.h: RPC messages that the service parses and serializes
// itself, and the state of a unary RPC received that way.
//
// Thread safety: ParseMessage and SerializeMessage are pure functions. A
// RawUnaryCall belongs to one RPC: its handler fills it, and Reply() is
// called once, from any thread.
//
// Why raw. gRPC 1.51's callback API parses a request before the service sees
// it. A unary body that does not parse is answered UNIMPLEMENTED with no
// message (CallbackUnaryHandler::RunHandler), which tells the client that the
// method does not exist; a streamed frame that does not parse ends the reads
// just as the client's half-close does (OnReadDone(false)), so the stream
// would end OK with the frames after it silently dropped. CacheService
// therefore registers every method raw (ByteBuffer in and out, the generated
// WithRawCallbackMethod_* classes) and parses here, so that it can answer such
// input INVALID_ARGUMENT and say what was wrong. The parsing and
// serialization are gRPC's own (ProtoBufferReader, SerializationTraits), so
// the work per message is what the typed API does.
#ifndef FURRBALLS_SERVICE_RAW_CALL_H_
#define FURRBALLS_SERVICE_RAW_CALL_H_

#include <cstddef>
#include <string>

#include <google/protobuf/message_lite.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/server_callback.h>
#include <grpcpp/support/status.h>

namespace furrballs::service {

// Parses `bytes` as `message`; false if they are not a valid encoding of it.
bool ParseMessage(const grpc::ByteBuffer& bytes,
                  google::protobuf::MessageLite* message);

// Copies the slices of a message's `bytes` into `out` (cleared first, its
// capacity kept) so that views can point into one buffer, as
// service/batch_wire.h's parser wants; false if gRPC cannot read them.
bool FlattenMessage(const grpc::ByteBuffer& bytes, std::string* out);

// Frees the bytes of a request that has been parsed. gRPC keeps a unary
// request's buffer until the RPC is finished, so without this a MultiSet
// of large values holds them twice, as received and as parsed, for as long
// as it runs (32 x 64 KiB or 4 x 1 MiB per message in the memory fill test;
// docs/memory_bench.md, "Requests in flight are bounded"). The buffer is
// the call's: the raw callback API hands the handler a const pointer to a
// ByteBuffer that gRPC owns and destroys when the RPC is done, which an
// emptied buffer survives, and gRPC's typed API empties it the same way
// once it has deserialized it (SerializationTraits::Deserialize).
void ReleaseParsedBytes(const grpc::ByteBuffer& bytes);

// Replaces the contents of `bytes` with the encoding of `message`. Fails
// (INTERNAL) only for a message over protobuf's 2 GiB limit.
grpc::Status SerializeMessage(const google::protobuf::MessageLite& message,
                              grpc::ByteBuffer* bytes);

// Where a unary RPC that the service reads as a stream of one message
// (MultiSet: service/request_byte_gate.h says why) sends its answer: the
// response's bytes, when the status is OK, then the status.
class StreamedAnswer {
 public:
  virtual void Answer(const grpc::Status& status) = 0;

 protected:
  ~StreamedAnswer() = default;
};

// What a raw unary RPC needs until it is answered: its response message and
// where the response's bytes go. The RPC is finished by gRPC's default
// reactor (CallbackServerContext::DefaultReactor): gRPC runs a custom
// reactor's OnDone on an executor thread, a hop that cost about a third more
// server CPU per Get in an A/B run, while the default reactor's completion
// runs inline.
class RawUnaryReply {
 public:
  RawUnaryReply(const RawUnaryReply&) = delete;
  RawUnaryReply& operator=(const RawUnaryReply&) = delete;

  // Serializes the response when `status` is OK, deletes this object (the
  // messages are not needed once the response is bytes) and finishes the RPC
  // with `status`. Returns the reactor that finished it (null for a
  // streamed one). Call once.
  grpc::ServerUnaryReactor* Reply(const grpc::Status& status);

  // The reactor that Reply finishes (null for a streamed one).
  grpc::ServerUnaryReactor* reactor() const { return reactor_; }

  // Slots of the service's in-flight cap (service/in_flight_limit.h) that
  // the RPC holds, given back when it is answered.
  size_t in_flight_slots() const { return in_flight_slots_; }
  void add_in_flight_slots(size_t n) { in_flight_slots_ += n; }
  // Bytes of the service's request-bytes cap that the RPC holds, given back
  // when it is answered.
  size_t in_flight_bytes() const { return in_flight_bytes_; }
  void set_in_flight_bytes(size_t n) { in_flight_bytes_ = n; }

 protected:
  // `response` is the derived class's message; `reactor` and `reply` are
  // gRPC's, valid until the RPC is finished.
  RawUnaryReply(grpc::ServerUnaryReactor* reactor,
                const google::protobuf::MessageLite* response,
                grpc::ByteBuffer* reply)
      : reactor_(reactor), response_(response), reply_(reply) {}
  // Answered through `answer` instead, with the response's bytes in `reply`
  // (the answer's, valid until it is called).
  RawUnaryReply(StreamedAnswer* answer,
                const google::protobuf::MessageLite* response,
                grpc::ByteBuffer* reply)
      : answer_(answer), response_(response), reply_(reply) {}
  virtual ~RawUnaryReply() = default;

 private:
  grpc::ServerUnaryReactor* const reactor_ = nullptr;
  StreamedAnswer* const answer_ = nullptr;
  const google::protobuf::MessageLite* const response_;
  grpc::ByteBuffer* const reply_;
  size_t in_flight_slots_ = 0;
  size_t in_flight_bytes_ = 0;
};

// One raw unary RPC with its parsed request and the response it builds.
// Allocate with new; Reply deletes it.
template <typename Request, typename Response>
class RawUnaryCall final : public RawUnaryReply {
 public:
  RawUnaryCall(grpc::ServerUnaryReactor* reactor, grpc::ByteBuffer* reply)
      : RawUnaryReply(reactor, &response, reply) {}
  RawUnaryCall(StreamedAnswer* answer, grpc::ByteBuffer* reply)
      : RawUnaryReply(answer, &response, reply) {}

  Request request;
  Response response;
};

}  // namespace furrballs::service

#endif  // FURRBALLS_SERVICE_RAW_CALL_H_
