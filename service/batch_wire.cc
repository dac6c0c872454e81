#include "service/batch_wire.h"

#include "service/wire_format.h"

namespace furrballs::service {
namespace {

// A forward reader over one message's bytes.
class Reader {
 public:
  explicit Reader(absl::string_view bytes)
      : p_(bytes.data()), end_(bytes.data() + bytes.size()) {}

  bool done() const { return p_ == end_; }

  bool Varint(uint64_t* v) {
    uint64_t result = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_ == end_) return false;
      const uint8_t byte = static_cast<uint8_t>(*p_++);
      result |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if (byte < 0x80) {
        *v = result;
        return true;
      }
    }
    return false;  // more than 10 bytes
  }

  // A field's tag; false at a malformed tag or field number 0.
  bool Tag(uint32_t* field, uint32_t* wire_type) {
    uint64_t tag;
    if (!Varint(&tag) || tag > UINT32_MAX || (tag >> 3) == 0) return false;
    *field = static_cast<uint32_t>(tag >> 3);
    *wire_type = static_cast<uint32_t>(tag & 7);
    return true;
  }

  bool Bytes(absl::string_view* v) {
    uint64_t len;
    if (!Varint(&len) || len > static_cast<uint64_t>(end_ - p_)) return false;
    *v = absl::string_view(p_, static_cast<size_t>(len));
    p_ += len;
    return true;
  }

  // Skips a field the reader does not know (or knows with another wire
  // type, which protobuf also treats as unknown). Groups, deprecated since
  // proto2, are refused.
  bool Skip(uint32_t wire_type) {
    uint64_t ignored;
    absl::string_view skipped;
    switch (wire_type) {
      case kVarint:
        return Varint(&ignored);
      case kFixed64:
        return Advance(8);
      case kLengthDelimited:
        return Bytes(&skipped);
      case kFixed32:
        return Advance(4);
      default:
        return false;
    }
  }

 private:
  bool Advance(size_t n) {
    if (static_cast<size_t>(end_ - p_) < n) return false;
    p_ += n;
    return true;
  }

  const char* p_;
  const char* const end_;
};

// Reads the fields of a GetRequest, SetRequest, DeleteRequest or
// TouchRequest into `op`: field 1 is the key in all four; the others are
// read per kind.
bool ParseOperands(absl::string_view bytes, OpView* op) {
  Reader in(bytes);
  while (!in.done()) {
    uint32_t field, wire_type;
    if (!in.Tag(&field, &wire_type)) return false;
    uint64_t v = 0;
    bool ok;
    if (field == 1 && wire_type == kLengthDelimited) {
      ok = in.Bytes(&op->key);
    } else if (op->kind == OpView::Kind::kSet && field == 2 &&
               wire_type == kLengthDelimited) {
      ok = in.Bytes(&op->value);
    } else if (((op->kind == OpView::Kind::kSet && field == 3) ||
                (op->kind == OpView::Kind::kTouch && field == 2)) &&
               wire_type == kVarint) {
      ok = in.Varint(&op->ttl_ms);
    } else if (op->kind == OpView::Kind::kSet && field == 4 &&
               wire_type == kVarint) {
      ok = in.Varint(&v);
      op->mode = static_cast<int32_t>(v);  // an enum is an int32 on the wire
    } else if (op->kind == OpView::Kind::kSet && field == 5 &&
               wire_type == kVarint) {
      ok = in.Varint(&op->expected_version);
    } else {
      ok = in.Skip(wire_type);
    }
    if (!ok) return false;
  }
  return true;
}

bool ParseOp(absl::string_view bytes, OpView* op) {
  Reader in(bytes);
  while (!in.done()) {
    uint32_t field, wire_type;
    if (!in.Tag(&field, &wire_type)) return false;
    if (field == 1 && wire_type == kVarint) {
      if (!in.Varint(&op->id)) return false;
      continue;
    }
    if (field >= 2 && field <= 5 && wire_type == kLengthDelimited) {
      absl::string_view operands;
      if (!in.Bytes(&operands)) return false;
      const auto kind = static_cast<OpView::Kind>(field - 1);
      // Setting another member of the oneof clears the one before; the same
      // member again merges into it.
      if (op->kind != kind) {
        const uint64_t id = op->id;
        *op = OpView();
        op->id = id;
        op->kind = kind;
      }
      if (!ParseOperands(operands, op)) return false;
      continue;
    }
    if (!in.Skip(wire_type)) return false;
  }
  return true;
}

void PutVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

size_t VarintSize(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

void PutTag(uint32_t field, WireType wire_type, std::string* out) {
  PutVarint((uint64_t{field} << 3) | wire_type, out);
}

// proto3 writes a scalar only when it is not zero; every field number here
// is below 16, so each tag is one byte.
size_t VarintFieldSize(uint64_t v) { return v == 0 ? 0 : 1 + VarintSize(v); }
size_t BytesFieldSize(absl::string_view v) {
  return v.empty() ? 0 : 1 + VarintSize(v.size()) + v.size();
}

void PutVarintField(uint32_t field, uint64_t v, std::string* out) {
  if (v == 0) return;
  PutTag(field, kVarint, out);
  PutVarint(v, out);
}

void PutBytesField(uint32_t field, absl::string_view v, std::string* out) {
  if (v.empty()) return;
  PutTag(field, kLengthDelimited, out);
  PutVarint(v.size(), out);
  out->append(v.data(), v.size());
}

// A code is an int32: negative values take ten bytes on the wire.
uint64_t CodeOnWire(int32_t code) {
  return static_cast<uint64_t>(static_cast<int64_t>(code));
}

size_t ResultSize(const OpAnswer& a) {
  switch (a.kind) {
    case OpAnswer::Kind::kGet:
      return VarintFieldSize(a.found) + BytesFieldSize(a.value) +
             VarintFieldSize(a.version) + VarintFieldSize(a.ttl_remaining_ms);
    case OpAnswer::Kind::kSet:
      return VarintFieldSize(a.version);
    case OpAnswer::Kind::kDelete:
      return VarintFieldSize(a.deleted);
    case OpAnswer::Kind::kTouch:
      return 0;
  }
  return 0;
}

void PutResult(const OpAnswer& a, std::string* out) {
  switch (a.kind) {
    case OpAnswer::Kind::kGet:
      PutVarintField(1, a.found, out);
      PutBytesField(2, a.value, out);
      PutVarintField(3, a.version, out);
      PutVarintField(4, a.ttl_remaining_ms, out);
      return;
    case OpAnswer::Kind::kSet:
      PutVarintField(1, a.version, out);
      return;
    case OpAnswer::Kind::kDelete:
      PutVarintField(1, a.deleted, out);
      return;
    case OpAnswer::Kind::kTouch:
      return;
  }
}

// PipelineResponse.result's field number for each kind: get = 4 ... touch = 7.
uint32_t ResultField(OpAnswer::Kind kind) {
  return static_cast<uint32_t>(kind) + 4;
}

}  // namespace

bool ParseBatchRequest(absl::string_view bytes, size_t max_ops, uint64_t* id,
                       uint64_t* timeout_ms, std::vector<OpView>* ops,
                       size_t* op_count) {
  ops->clear();
  *id = 0;
  *timeout_ms = 0;
  *op_count = 0;
  // The ops are counted first so that an over-large batch is refused before
  // its views are built; the id is read too, for the refusal.
  Reader count(bytes);
  while (!count.done()) {
    uint32_t field, wire_type;
    if (!count.Tag(&field, &wire_type)) return false;
    if (field == 1 && wire_type == kVarint) {
      if (!count.Varint(id)) return false;
      continue;
    }
    if (field == 2 && wire_type == kLengthDelimited) ++*op_count;
    if (!count.Skip(wire_type)) return false;
  }
  if (*op_count > max_ops) return false;
  Reader in(bytes);
  while (!in.done()) {
    uint32_t field, wire_type;
    if (!in.Tag(&field, &wire_type)) return false;
    if (field == 1 && wire_type == kVarint) {
      if (!in.Varint(id)) return false;
    } else if (field == 3 && wire_type == kVarint) {
      if (!in.Varint(timeout_ms)) return false;
    } else if (field == 2 && wire_type == kLengthDelimited) {
      absl::string_view op;
      if (!in.Bytes(&op)) return false;
      ops->emplace_back();
      if (!ParseOp(op, &ops->back())) return false;
    } else if (!in.Skip(wire_type)) {
      return false;
    }
  }
  return true;
}

void BeginBatchResponse(uint64_t id, int32_t code, absl::string_view message,
                        std::string* out) {
  PutVarintField(1, id, out);
  PutVarintField(2, CodeOnWire(code), out);
  PutBytesField(3, message, out);
}

void AppendOpAnswer(const OpAnswer& a, std::string* out) {
  const bool has_result = a.code == 0;
  const size_t result_size = has_result ? ResultSize(a) : 0;
  const size_t size =
      VarintFieldSize(a.id) + VarintFieldSize(CodeOnWire(a.code)) +
      BytesFieldSize(a.message) +
      (has_result ? 1 + VarintSize(result_size) + result_size : 0);
  PutTag(4, kLengthDelimited, out);  // BatchResponse.results
  PutVarint(size, out);
  PutVarintField(1, a.id, out);
  PutVarintField(2, CodeOnWire(a.code), out);
  PutBytesField(3, a.message, out);
  if (has_result) {
    PutTag(ResultField(a.kind), kLengthDelimited, out);
    PutVarint(result_size, out);
    PutResult(a, out);
  }
}

}  // namespace furrballs::service
