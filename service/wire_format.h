// service/wire_format.h: protobuf's wire types, for the service's own readers
// and writers of the furrballs.v1 messages (batch_wire.h, set_wire.h).
//
// Thread safety: constants only.
#ifndef FURRBALLS_SERVICE_WIRE_FORMAT_H_
#define FURRBALLS_SERVICE_WIRE_FORMAT_H_

#include <cstdint>

namespace furrballs::service {

// A field's wire type: the low three bits of its tag.
enum WireType : uint32_t {
  kVarint = 0,
  kFixed64 = 1,
  kLengthDelimited = 2,
  kStartGroup = 3,  // groups: deprecated since proto2, refused by our readers
  kEndGroup = 4,
  kFixed32 = 5,
};

}  // namespace furrballs::service

#endif  // FURRBALLS_SERVICE_WIRE_FORMAT_H_
