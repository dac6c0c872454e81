// engine/common/byte_codec.h: fixed-width little-endian fields appended to a
// string and read back with bounds checks, for the engine's small on-disk
// records (the warm-restart manifests, the hash secret file).
//
// Thread safety: AppendLe is a pure function; a ByteReader is
// thread-compatible and points into the caller's bytes.
//
// The records these build are read back from disk, where they may be torn,
// truncated or corrupted, so every read is checked against what is left and
// fails (false) rather than reads past the end; a decoder then rejects the
// record whole.
#ifndef FURRBALLS_ENGINE_COMMON_BYTE_CODEC_H_
#define FURRBALLS_ENGINE_COMMON_BYTE_CODEC_H_

#include <bit>
#include <cstddef>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>

namespace furrballs {

static_assert(std::endian::native == std::endian::little,
              "records are little-endian and encoded by plain copies");

template <typename T>
void AppendLe(std::string& out, T v) {
  static_assert(std::is_integral_v<T>, "fixed-width integers only");
  out.append(reinterpret_cast<const char*>(&v), sizeof(v));
}

class ByteReader {
 public:
  explicit ByteReader(std::string_view in) : in_(in) {}

  // Reads the next sizeof(T) bytes into *v; false (and *v untouched) if
  // fewer are left.
  template <typename T>
  bool Read(T* v) {
    static_assert(std::is_integral_v<T>, "fixed-width integers only");
    return Bytes(v, sizeof(T));
  }
  // Copies the next n bytes to out; false if fewer are left.
  bool Bytes(void* out, size_t n) {
    if (remaining() < n) return false;
    std::memcpy(out, in_.data() + pos_, n);
    pos_ += n;
    return true;
  }

  size_t remaining() const { return in_.size() - pos_; }
  bool done() const { return pos_ == in_.size(); }
  std::string_view rest() const { return in_.substr(pos_); }

 private:
  std::string_view in_;
  size_t pos_ = 0;  // <= in_.size()
};

}  // namespace furrballs

#endif  // FURRBALLS_ENGINE_COMMON_BYTE_CODEC_H_
