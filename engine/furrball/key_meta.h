// engine/furrball/key_meta.h: KeyMeta, the value each node's CMap keeps per
// key (report §2.1.1, §2.8.5): where the key's entry lives and its version
// and deadline.
//
// Thread safety: plain value. Copies live inside CMap slots and are read and
// written under the slot's seqlock.
#ifndef FURRBALLS_ENGINE_FURRBALL_KEY_META_H_
#define FURRBALLS_ENGINE_FURRBALL_KEY_META_H_

#include <cstdint>
#include <type_traits>

namespace furrballs {

// Widths of the packed fields. The deadline is a Clock::NowMs value, which
// for the default steady clock counts from boot: 40 bits last 34 years
// (FurrBall::Open refuses a clock already past half of that). The
// generation is the page's recycle count modulo 2^24: a reader that keeps a
// KeyMeta while its page is recycled 16.7 million times could mistake the
// new entry for the old one, which would take hours of recycling one page
// inside one read.
inline constexpr int kExpiryBits = 40;
inline constexpr int kGenerationBits = 24;
inline constexpr uint64_t kMaxExpiryMs = (uint64_t{1} << kExpiryBits) - 1;
inline constexpr uint32_t kGenerationMask = (uint32_t{1} << kGenerationBits) - 1;

// Where the entry's size and footprint live. They are in the entry header
// (entry.h) and nowhere else: a KeyMeta names one immutable byte image, so
// the header it points at holds the size and capacity of exactly the bytes
// the KeyMeta describes, and a copy here only cost 8 bytes per key slot
// (a 48-byte CMap slot instead of 40). Readers take them from the header
// inside the same seqlock window as the bytes (the Get protocol in
// node_shard.h); a reader on a stale KeyMeta may see a header of a recycled
// page, so it checks them against the page (ReadEntryHeaderWithin) before
// it copies.
struct KeyMeta {
  // Every write of a key takes a version above the key's last one (see
  // "Versions" in node_shard.h), so a key's (version, page, generation,
  // offset) names one immutable byte image: an in-place overwrite takes a
  // new version, and a relocation lands on a new (page, generation, offset). A reader that sees
  // the same KeyMeta before and after copying the bytes therefore copied
  // bytes nobody changed (the Get protocol in node_shard.h).
  uint64_t version = 0;
  // Monotonic deadline (Clock::NowMs), 0 = never; at most kMaxExpiryMs.
  uint64_t expiry_ms : kExpiryBits = 0;
  // The page's recycle count when written, masked by kGenerationMask.
  uint64_t generation : kGenerationBits = 0;
  uint32_t page = 0;        // page index within the node's pool
  uint32_t offset = 0;      // of the entry header within the page

  bool Expired(uint64_t now_ms) const {
    return expiry_ms != 0 && now_ms >= expiry_ms;
  }

  friend bool operator==(const KeyMeta&, const KeyMeta&) = default;
};

static_assert(std::is_trivially_copyable_v<KeyMeta>,
              "CMap stores values by word copies inside its seqlock");
static_assert(sizeof(KeyMeta) == 24 && alignof(KeyMeta) == 8,
              "no implicit padding, so a slot copy is fully defined; with "
              "CMap's seq and fingerprint a slot is 40 bytes");

// Whether `m` names the entry at (page, offset) of that page generation
// (the page's full counter; KeyMeta keeps its low kGenerationBits).
inline bool PointsAt(const KeyMeta& m, uint32_t page, uint32_t offset,
                     uint32_t generation) {
  return m.page == page && m.offset == offset &&
         m.generation == (generation & kGenerationMask);
}

}  // namespace furrballs

#endif  // FURRBALLS_ENGINE_FURRBALL_KEY_META_H_
