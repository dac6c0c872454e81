#include "service/set_wire.h"

#include <algorithm>
#include <utility>

#include <absl/strings/str_cat.h>

#include "service/wire_format.h"

namespace furrballs::service {
namespace {

// A forward reader over a SlicedBytes, up to the end of the message it reads
// (a nested message's reader is a copy of its parent's that ends where the
// nested message does). Fields may cross chunk boundaries anywhere, even
// inside a varint. On the first failure it keeps what was wrong (error())
// and every later read fails.
class ChunkReader {
 public:
  explicit ChunkReader(const SlicedBytes& bytes)
      : chunks_(&bytes.chunks()), end_(bytes.size()) {}

  bool done() const { return pos_ == end_; }
  size_t pos() const { return pos_; }
  const std::string& error() const { return error_; }

  // A varint of at most `max_bytes` bytes: 10 for a value field, 5 for a
  // tag or a length, as protobuf reads them (its parser refuses a sixth
  // byte there). `what` names it in the error.
  bool Varint(uint64_t* v, int max_bytes = 10, const char* what = "varint") {
    const size_t start = pos_;
    uint64_t result = 0;
    for (int i = 0; i < max_bytes; ++i) {
      uint8_t byte;
      if (!Byte(&byte)) {
        return Fail(absl::StrCat("the varint at byte ", start,
                                 " is cut off by the end of its message "
                                 "(byte ",
                                 end_, ")"));
      }
      result |= static_cast<uint64_t>(byte & 0x7f) << (7 * i);
      if (byte < 0x80) {
        *v = result;
        return true;
      }
    }
    return Fail(absl::StrCat("the ", what, " at byte ", start,
                             " is longer than ", max_bytes, " bytes"));
  }

  // A field's tag.
  bool Tag(uint32_t* field, uint32_t* wire_type) {
    const size_t start = pos_;
    uint64_t tag;
    if (!Varint(&tag, 5, "tag")) return false;
    if (tag > UINT32_MAX || (tag >> 3) == 0) {
      return Fail(absl::StrCat("the tag at byte ", start, " (", tag,
                               ") has field number ", tag >> 3,
                               ", not 1 to 2^29-1"));
    }
    *field = static_cast<uint32_t>(tag >> 3);
    *wire_type = static_cast<uint32_t>(tag & 7);
    return true;
  }

  // The bytes of a length-delimited field `field`, as a span of the
  // message; with `inner`, also a reader of just those bytes.
  bool Bytes(uint32_t field, WireSpan* span, ChunkReader* inner = nullptr) {
    const size_t start = pos_;
    uint64_t length;
    if (!Varint(&length, 5, "length")) return false;
    if (length > INT32_MAX) {
      return Fail(absl::StrCat("field ", field, "'s length ", length,
                               " at byte ", start, " is not below 2^31"));
    }
    if (length > end_ - pos_) {
      return Fail(absl::StrCat("field ", field, "'s length ", length,
                               " at byte ", pos_, " runs past the end of its "
                               "message (",
                               end_ - pos_, " bytes left)"));
    }
    span->offset = pos_;
    span->length = static_cast<size_t>(length);
    if (inner != nullptr) {
      *inner = *this;
      inner->end_ = pos_ + span->length;
    }
    Advance(span->length);
    return true;
  }

  // Skips a field the reader does not know, or knows with another wire
  // type (which protobuf keeps as an unknown field).
  bool Skip(uint32_t field, uint32_t wire_type) {
    const size_t start = pos_;
    uint64_t ignored;
    WireSpan skipped;
    switch (wire_type) {
      case kVarint:
        return Varint(&ignored);
      case kLengthDelimited:
        return Bytes(field, &skipped);
      case kFixed64:
      case kFixed32: {
        const size_t n = wire_type == kFixed64 ? 8 : 4;
        if (end_ - pos_ < n) {
          return Fail(absl::StrCat("field ", field, " at byte ", start,
                                   " needs ", n, " bytes, ", end_ - pos_,
                                   " are left in its message"));
        }
        Advance(n);
        return true;
      }
      case kStartGroup:
      case kEndGroup:
        return Fail(absl::StrCat("field ", field, " before byte ", start,
                                 " is a group (wire type ", wire_type,
                                 "), which this server does not accept"));
      default:
        return Fail(absl::StrCat("field ", field, " before byte ", start,
                                 " has wire type ", wire_type,
                                 ", which does not exist"));
    }
  }

 private:
  bool Fail(std::string error) {
    if (error_.empty()) error_ = std::move(error);
    pos_ = end_;  // nothing more to read
    return false;
  }

  bool Byte(uint8_t* b) {
    if (pos_ == end_) return false;
    // pos_ < end_ <= the message's size, so a later chunk holds it.
    while (in_chunk_ == (*chunks_)[chunk_].size()) {
      ++chunk_;
      in_chunk_ = 0;
    }
    *b = static_cast<uint8_t>((*chunks_)[chunk_][in_chunk_++]);
    ++pos_;
    return true;
  }

  // REQUIRES: n <= end_ - pos_.
  void Advance(size_t n) {
    pos_ += n;
    while (n > 0) {
      const size_t left = (*chunks_)[chunk_].size() - in_chunk_;
      if (n <= left) {
        in_chunk_ += n;
        return;
      }
      n -= left;
      ++chunk_;
      in_chunk_ = 0;
    }
  }

  const std::vector<absl::string_view>* chunks_;
  size_t chunk_ = 0;     // the chunk holding pos_, or one before it
  size_t in_chunk_ = 0;  // pos_'s offset in chunks_[chunk_]
  size_t pos_ = 0;
  size_t end_;
  std::string error_;
};

absl::Status Invalid(absl::string_view context, const ChunkReader& in) {
  return absl::InvalidArgumentError(absl::StrCat(context, in.error()));
}

// The fields of one SetRequest.
bool ParseItem(ChunkReader in, SetItemSpans* item, std::string* error) {
  while (!in.done()) {
    uint32_t field, wire_type;
    if (!in.Tag(&field, &wire_type)) {
      *error = in.error();
      return false;
    }
    bool ok;
    if ((field == 1 || field == 2) && wire_type == kLengthDelimited) {
      ok = in.Bytes(field, field == 1 ? &item->key : &item->value);
    } else if (field >= 3 && field <= 5 && wire_type == kVarint) {
      uint64_t v;
      ok = in.Varint(&v);
      if (field == 3) item->ttl_ms = v;
      // An enum is an int32 on the wire; protobuf keeps the low 32 bits.
      if (field == 4) item->mode = static_cast<int32_t>(v);
      if (field == 5) item->expected_version = v;
    } else {
      ok = in.Skip(field, wire_type);
    }
    if (!ok) {
      *error = in.error();
      return false;
    }
  }
  return true;
}

}  // namespace

SlicedBytes::SlicedBytes(std::vector<absl::string_view> chunks)
    : chunks_(std::move(chunks)) {
  starts_.reserve(chunks_.size());
  for (absl::string_view c : chunks_) {
    starts_.push_back(size_);
    size_ += c.size();
  }
}

absl::string_view SlicedBytes::View(size_t offset, size_t length,
                                    std::string* copy) const {
  if (length == 0) return absl::string_view();
  // The last chunk starting at or before `offset`; empty chunks share their
  // start with the next one, so this skips them.
  size_t i = static_cast<size_t>(
      std::upper_bound(starts_.begin(), starts_.end(), offset) -
      starts_.begin() - 1);
  size_t in = offset - starts_[i];
  if (in + length <= chunks_[i].size()) {
    return chunks_[i].substr(in, length);
  }
  copy->clear();
  copy->reserve(length);
  while (copy->size() < length) {
    const absl::string_view part =
        chunks_[i].substr(in, length - copy->size());
    copy->append(part.data(), part.size());
    ++i;
    in = 0;
  }
  return *copy;
}

absl::Status CountMultiSetItems(const SlicedBytes& bytes, size_t* count) {
  *count = 0;
  ChunkReader in(bytes);
  while (!in.done()) {
    uint32_t field, wire_type;
    if (!in.Tag(&field, &wire_type)) return Invalid("", in);
    if (field == 1 && wire_type == kLengthDelimited) ++*count;
    if (!in.Skip(field, wire_type)) return Invalid("", in);
  }
  return absl::OkStatus();
}

absl::Status ParseMultiSetRequest(const SlicedBytes& bytes,
                                  std::vector<SetItemSpans>* items) {
  items->clear();
  ChunkReader in(bytes);
  while (!in.done()) {
    uint32_t field, wire_type;
    if (!in.Tag(&field, &wire_type)) return Invalid("", in);
    if (field != 1 || wire_type != kLengthDelimited) {
      if (!in.Skip(field, wire_type)) return Invalid("", in);
      continue;
    }
    WireSpan span;
    ChunkReader item(bytes);
    if (!in.Bytes(field, &span, &item)) return Invalid("", in);
    items->emplace_back();
    std::string error;
    if (!ParseItem(item, &items->back(), &error)) {
      return absl::InvalidArgumentError(
          absl::StrCat("item ", items->size() - 1, " (bytes ", span.offset,
                       " to ", span.offset + span.length, "): ", error));
    }
  }
  return absl::OkStatus();
}

}  // namespace furrballs::service
