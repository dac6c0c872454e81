// engine/cmap/internal/group.h: CMap's control bytes, the one SIMD seam that
// scans 16 of them at a time (GroupSse2 and its portable twin GroupPortable),
// and the probe sequence over groups (report §2.7.2, §2.7.4).
//
// Thread safety: a Group is a value, a snapshot of 16 control bytes taken with
// relaxed atomic loads; it may be stale the moment it is taken (cmap.h says
// why that is fine). Everything else here is a pure function of its inputs.
//
// Control bytes. One byte per slot, in a dense array separate from the slots:
//
//   0x00..0x7F  OCCUPIED: the top 7 bits of the key's H2 (H2Short)
//   0x80        EMPTY: never used since construction
//   0xFE        DELETED: a tombstone, free for reuse
//   0xFF        SENTINEL: the guard group after the last real group
//
// 0x81..0xFD never occur. The encoding is chosen so that the tests below are
// one instruction each: OCCUPIED is "sign bit clear", free (EMPTY or DELETED)
// is "signed value < -1", and EMPTY / DELETED differ from SENTINEL in bit 0.
//
// Stored form. Memory holds each control byte XOR kCtrlStoredXor (StoredCtrl),
// so EMPTY is stored as 0x00: a table from a zeroing allocator is all EMPTY
// without being written, and its control bytes enter the RSS only where keys
// land, like its slots (1 byte per slot was touched at construction before:
// 0.95 MiB of a 256 MiB server's idle RSS, 1 GiB at a 256 GiB budget).
// The Groups answer in the table's encoding: GroupSse2 compares the stored
// bytes with stored targets (no instruction added to a probe), GroupPortable
// undoes the XOR on the two words it loads; CMap's single-byte accessors
// convert both ways.
//
// Race-free group loads. Control bytes are plain uint8_t written with
// __atomic builtins (report §2.7.5). A plain 16-byte SIMD load of them would
// be a non-atomic read racing with those writes: undefined behaviour in the
// C++ memory model, and a report from ThreadSanitizer. LoadCtrlWords instead
// reads the group as two relaxed 8-byte atomic loads (plain `mov`s on x86-64);
// GroupSse2 assembles them with one `_mm_set_epi64x`. These loads are wider
// than the 1-byte CAS that writes the same bytes. ISO C++ does not speak to
// mixed-size atomics, but GCC and Clang compile both to single aligned
// instructions, which x86-64 and AArch64 make single-copy atomic, and
// ThreadSanitizer models both as atomic accesses. cmap_bench's GroupLoad/*
// benchmarks price them against a plain `_mm_load_si128` (docs/cmap.md).
#ifndef FURRBALLS_ENGINE_CMAP_INTERNAL_GROUP_H_
#define FURRBALLS_ENGINE_CMAP_INTERNAL_GROUP_H_

#include <bit>
#include <concepts>
#include <cstddef>
#include <cstdint>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace furrballs::cmap_internal {

inline constexpr uint8_t kCtrlEmpty = 0x80;
inline constexpr uint8_t kCtrlDeleted = 0xFE;
inline constexpr uint8_t kCtrlSentinel = 0xFF;

inline constexpr size_t kGroupWidth = 16;

// Control bytes are stored XOR this (see "Stored form" above).
inline constexpr uint8_t kCtrlStoredXor = 0x80;
constexpr uint8_t StoredCtrl(uint8_t ctrl) { return ctrl ^ kCtrlStoredXor; }
constexpr uint8_t CtrlFromStored(uint8_t stored) {
  return stored ^ kCtrlStoredXor;
}
static_assert(StoredCtrl(0x80) == 0,
              "EMPTY must be stored as zero bytes, what a zeroing allocator "
              "hands out");

// The control byte of an occupied slot: the top 7 bits of H2.
constexpr uint8_t H2Short(uint64_t h2) { return static_cast<uint8_t>(h2 >> 57); }

constexpr bool IsOccupied(uint8_t ctrl) { return ctrl < kCtrlEmpty; }
constexpr bool IsFree(uint8_t ctrl) {
  return ctrl == kCtrlEmpty || ctrl == kCtrlDeleted;
}

static_assert(H2Short(~uint64_t{0}) == 0x7F,
              "H2Short must fit in 7 bits so OCCUPIED bytes have the sign bit "
              "clear and never equal a special value");
static_assert((kCtrlEmpty & 0x80) != 0 && (kCtrlDeleted & 0x80) != 0 &&
                  (kCtrlSentinel & 0x80) != 0,
              "special bytes must have the sign bit set: IsOccupied and "
              "GroupSse2::MaskFree test the sign");
static_assert(static_cast<int8_t>(kCtrlEmpty) < -1 &&
                  static_cast<int8_t>(kCtrlDeleted) < -1 &&
                  static_cast<int8_t>(kCtrlSentinel) == -1,
              "GroupSse2::MaskFree is one signed compare against SENTINEL (-1)");
static_assert((kCtrlEmpty & 1) == 0 && (kCtrlDeleted & 1) == 0 &&
                  (kCtrlSentinel & 1) == 1,
              "GroupPortable::MaskFree tells free bytes from SENTINEL by bit 0");
static_assert(kGroupWidth == 16,
              "one SSE2 register, and a group is exactly two 8-byte words");

// A set of slot positions within one group, bit i for slot i. Iterating it
// yields the positions in increasing order.
class BitMask {
 public:
  explicit BitMask(uint32_t mask) : mask_(mask) {}

  explicit operator bool() const { return mask_ != 0; }
  uint32_t mask() const { return mask_; }
  // REQUIRES: *this is non-empty.
  uint32_t LowestBitSet() const { return std::countr_zero(mask_); }

  uint32_t operator*() const { return LowestBitSet(); }
  BitMask& operator++() {
    mask_ &= mask_ - 1;
    return *this;
  }
  BitMask begin() const { return *this; }
  BitMask end() const { return BitMask(0); }
  friend bool operator==(const BitMask&, const BitMask&) = default;

 private:
  uint32_t mask_;
};

// Bytes of a group as two little-endian words: byte i of the group is byte
// (i % 8) of word (i / 8).
struct CtrlWords {
  uint64_t lo;
  uint64_t hi;
};

// May alias the uint8_t control bytes it reads.
using AliasingWord = uint64_t __attribute__((may_alias));

// The bytes of the group at `group`, as they are in memory (stored form).
// REQUIRES: `group` is 16-byte aligned.
inline CtrlWords LoadCtrlWords(const uint8_t* group) {
  const auto* words = reinterpret_cast<const AliasingWord*>(group);
  return CtrlWords{__atomic_load_n(&words[0], __ATOMIC_RELAXED),
                   __atomic_load_n(&words[1], __ATOMIC_RELAXED)};
}

// The interface both implementations provide; CMap's GroupImpl must model it.
// Match, MaskEmpty and MaskDeleted are exact for every byte value; MaskFree is
// exact for the values that can occur (OCCUPIED, EMPTY, DELETED, SENTINEL).
template <typename G>
concept CtrlGroup = requires(const uint8_t* ctrl, const G& g, uint8_t h2s) {
  G(ctrl);
  { g.Match(h2s) } -> std::same_as<BitMask>;
  { g.MaskEmpty() } -> std::same_as<BitMask>;
  { g.MaskDeleted() } -> std::same_as<BitMask>;
  { g.MaskFree() } -> std::same_as<BitMask>;
};

#if defined(__SSE2__)

class GroupSse2 {
 public:
  // `ctrl`: a group in stored form. REQUIRES: `ctrl` is 16-byte aligned.
  explicit GroupSse2(const uint8_t* ctrl) {
    const CtrlWords w = LoadCtrlWords(ctrl);
    ctrl_ = _mm_set_epi64x(static_cast<long long>(w.hi),
                           static_cast<long long>(w.lo));
  }

  // Slots whose control byte equals `h2s` (an OCCUPIED value).
  BitMask Match(uint8_t h2s) const { return MatchByte(h2s); }
  BitMask MaskEmpty() const { return MatchByte(kCtrlEmpty); }
  BitMask MaskDeleted() const { return MatchByte(kCtrlDeleted); }
  // EMPTY or DELETED. Stored, free bytes are 0x00 and 0x7E, SENTINEL 0x7F and
  // OCCUPIED 0x80..0xFF, so free is "signed value in [0, 0x7F)": below the
  // stored SENTINEL, sign bit clear. (Also the unreachable 0x81..0xFD,
  // stored 0x01..0x7D; the interface leaves those open.)
  BitMask MaskFree() const {
    const __m128i sentinel =
        _mm_set1_epi8(static_cast<char>(StoredCtrl(kCtrlSentinel)));
    const int below_sentinel =
        _mm_movemask_epi8(_mm_cmpgt_epi8(sentinel, ctrl_));
    const int occupied = _mm_movemask_epi8(ctrl_);
    return BitMask(static_cast<uint32_t>(below_sentinel & ~occupied));
  }

 private:
  // Slots whose control byte is `b`, compared in stored form: the target is
  // a constant (or computed once per probe), so a probe costs no more than
  // with the plain encoding.
  BitMask MatchByte(uint8_t b) const {
    const __m128i target = _mm_set1_epi8(static_cast<char>(StoredCtrl(b)));
    return BitMask(static_cast<uint32_t>(
        _mm_movemask_epi8(_mm_cmpeq_epi8(target, ctrl_))));
  }

  __m128i ctrl_;  // stored form
};

#endif  // __SSE2__

// The same interface with 64-bit SWAR arithmetic on the two words, for
// targets without SSE2 and as the reference the SSE2 version is tested
// against.
class GroupPortable {
 public:
  // `ctrl`: a group in stored form, which the constructor undoes.
  // REQUIRES: `ctrl` is 16-byte aligned.
  explicit GroupPortable(const uint8_t* ctrl) : w_(LoadCtrlWords(ctrl)) {
    constexpr uint64_t kXor = kLsbs * kCtrlStoredXor;
    w_.lo ^= kXor;
    w_.hi ^= kXor;
  }

  BitMask Match(uint8_t h2s) const { return MatchByte(h2s); }
  BitMask MaskEmpty() const { return MatchByte(kCtrlEmpty); }
  BitMask MaskDeleted() const { return MatchByte(kCtrlDeleted); }
  // Sign bit set and bit 0 clear: EMPTY or DELETED, not SENTINEL.
  // (Also half of the unreachable 0x81..0xFD; the interface leaves those
  // open.)
  BitMask MaskFree() const {
    return Combine(w_.lo & ~(w_.lo << 7) & kMsbs, w_.hi & ~(w_.hi << 7) & kMsbs);
  }

 private:
  static constexpr uint64_t kLsbs = 0x0101010101010101;
  static constexpr uint64_t kMsbs = 0x8080808080808080;

  // The sign bit of each byte of the result is set iff that byte of `x` is
  // zero. Exact: (x & 0x7F) + 0x7F cannot carry out of its byte.
  static uint64_t ZeroBytes(uint64_t x) {
    return ~(((x & ~kMsbs) + ~kMsbs) | x) & kMsbs;
  }

  // Gathers the sign bits of the 8 bytes into bits 0..7. The multiplier puts
  // byte i's bit at bit 56 + i; every other partial product lands either
  // above bit 63 or at a distinct position below bit 56, so nothing carries
  // into the top byte.
  static uint32_t GatherSignBits(uint64_t msbs) {
    return static_cast<uint32_t>(((msbs >> 7) * 0x0102040810204080) >> 56);
  }

  static BitMask Combine(uint64_t lo_msbs, uint64_t hi_msbs) {
    return BitMask(GatherSignBits(lo_msbs) | (GatherSignBits(hi_msbs) << 8));
  }

  BitMask MatchByte(uint8_t b) const {
    const uint64_t pattern = kLsbs * b;
    return Combine(ZeroBytes(w_.lo ^ pattern), ZeroBytes(w_.hi ^ pattern));
  }

  CtrlWords w_;
};

static_assert(CtrlGroup<GroupPortable>);
#if defined(__SSE2__)
static_assert(CtrlGroup<GroupSse2>);
using DefaultGroup = GroupSse2;
#else
using DefaultGroup = GroupPortable;
#endif

// A table's groups and the home group of a hash: the low 32 bits of H1
// modulo the group count, computed with Lemire's "fastmod" (a multiply and a
// high half instead of a division; exact for 32-bit operands), so that the
// count need not be a power of two and a table is sized to its load rather
// than to the next power of two (up to 2x the memory).
class GroupRange {
 public:
  // REQUIRES: 1 <= groups <= 2^32.
  explicit GroupRange(size_t groups)
      : groups_(groups), fastmod_(UINT64_MAX / groups + 1) {}

  size_t size() const { return groups_; }
  size_t Home(uint64_t h1) const {
    const uint64_t low = fastmod_ * static_cast<uint32_t>(h1);
    return static_cast<size_t>(
        (static_cast<unsigned __int128>(low) * groups_) >> 64);
  }

 private:
  size_t groups_;
  uint64_t fastmod_;  // ceil(2^64 / groups); wraps to 0 for groups == 1
};

// The sequence of groups a key visits: its home group, then the following
// groups in order, wrapping around (report §2.7.4). Every group is visited
// exactly once in `groups` steps. docs/cmap.md compares this with abseil's
// triangular sequence.
class ProbeSeq {
 public:
  ProbeSeq(uint64_t h1, const GroupRange& range)
      : groups_(range.size()), group_(range.Home(h1)) {}

  size_t group() const { return group_; }
  // How many groups precede group() on this key's path.
  size_t index() const { return index_; }
  void Next() {
    ++index_;
    if (++group_ == groups_) group_ = 0;
  }

 private:
  size_t groups_;
  size_t group_;
  size_t index_ = 0;
};

}  // namespace furrballs::cmap_internal

#endif  // FURRBALLS_ENGINE_CMAP_INTERNAL_GROUP_H_
