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

// Widths of the packed fields.
//
// The deadline is a Clock::NowMs value, which for the default steady clock
// counts from boot: 40 bits last 34 years (FurrBall::Open refuses a clock
// already past half of that).
//
// The location is a page index and an offset in 8-byte words (entries are
// 8-aligned, entry.h): 2^16 pages per node and 2^24 words, i.e. pages up to
// 128 MiB (kMaxPageSize is 32 MiB, what an entry header can describe:
// page_pool.h). At the default 2 MiB pages that is 128 GiB per node; the
// memory plan picks larger pages for larger shares and refuses an explicit
// page size that would need more pages (memory_plan.cc), so the limit is a
// clear error at Open, never a truncated index.
//
// The generation is the page's recycle count modulo 2^16. It was 24 bits
// while KeyMeta had room; what it protects today is narrow. A Get validates
// its copy with the slot's sequence (node_shard.h, the Get protocol), not
// with KeyMeta equality, and movers, walkers and spills act on frozen pages,
// which cannot be recycled under them. Where a KeyMeta is compared across
// time outside a slot's lock (a writer's Peek, then its UpdateInPlace or
// second Peek), a stale one could match again only if the key left its
// entry, the page was recycled a multiple of 65,536 times, and the key came
// back to the same page and offset, all inside one operation under the
// key's lock; and the in-place overwrite, the one place where matching a
// stale KeyMeta could write out of bounds, re-reads the footprint under the
// slot's lock instead of trusting it.
inline constexpr int kVersionBits = 56;
inline constexpr int kLocalityBits = 8;
inline constexpr int kExpiryBits = 40;
inline constexpr int kOffsetWordBits = 24;
inline constexpr int kPageBits = 16;
inline constexpr int kGenerationBits = 16;
inline constexpr uint64_t kMaxExpiryMs = (uint64_t{1} << kExpiryBits) - 1;
// Versions stay below this (node_shard.h, "Versions").
inline constexpr uint64_t kVersionLimit = uint64_t{1} << kVersionBits;
inline constexpr uint32_t kGenerationMask = (uint32_t{1} << kGenerationBits) - 1;
// The most pages a node may have: KeyMeta::page is their index.
inline constexpr uint32_t kMaxPagesPerNode = uint32_t{1} << kPageBits;
// The offsets KeyMeta can hold are below this (bytes).
inline constexpr uint64_t kMaxKeyMetaOffset = uint64_t{8} << kOffsetWordBits;

// Where the entry's size and footprint live. They are in the entry header
// (entry.h) and nowhere else: a KeyMeta names one immutable byte image, so
// the header it points at holds the size and capacity of exactly the bytes
// the KeyMeta describes (a copy here cost 8 bytes per key slot until
// 2026-11-24). Readers take them from the header inside the same seqlock
// window as the bytes (the Get protocol in node_shard.h); a reader on a
// stale KeyMeta may see a header of a recycled page, so it checks them
// against the page (ReadEntryHeaderWithin) before it copies.
//
// Layout: 20 bytes, 4-aligned, so that CMap keeps the last 4 (page and
// generation) in its slot's seq word and a slot is 32 bytes
// (engine/cmap/internal/slot.h, "The tail"); at 8-byte alignment it would be
// 24 bytes and a 40-byte slot.
#pragma pack(push, 4)
struct KeyMeta {
  // Every write of a key takes a version above the key's last one (see
  // "Versions" in node_shard.h), so a key's (version, page, generation,
  // offset) names one immutable byte image: an in-place overwrite takes a
  // new version, and a relocation lands on a new (page, generation, offset). A reader that sees
  // the same KeyMeta before and after copying the bytes therefore copied
  // bytes nobody changed (the Get protocol in node_shard.h).
  // Below kVersionLimit: the top byte of the word is the locality counters'.
  uint64_t version : kVersionBits = 0;
  // SimpleMigratePolicy's two 4-bit counters (migrate_policy.h), in bits
  // the version leaves free, so counting costs no byte per key. Not part of
  // what names a byte image: they change on sampled reads (key_mover.h) and
  // operator== leaves them out.
  uint64_t locality : kLocalityBits = 0;
  // Monotonic deadline (Clock::NowMs), 0 = never; at most kMaxExpiryMs.
  uint64_t expiry_ms : kExpiryBits = 0;
  // The entry header's offset within the page, in 8-byte words (offset()).
  uint64_t offset_words : kOffsetWordBits = 0;
  // The page's index within the node's pool, < kMaxPagesPerNode.
  uint32_t page : kPageBits = 0;
  // The page's recycle count when written, masked by kGenerationMask.
  uint32_t generation : kGenerationBits = 0;

  // The entry header's offset within the page, in bytes.
  uint32_t offset() const { return static_cast<uint32_t>(offset_words) * 8; }
  // REQUIRES: `offset` is 8-aligned and below kMaxKeyMetaOffset.
  static uint64_t OffsetWords(uint32_t offset) { return offset / 8; }

  bool Expired(uint64_t now_ms) const {
    return expiry_ms != 0 && now_ms >= expiry_ms;
  }

  // The same byte image with the same deadline; the locality counters are
  // not compared (see `locality`).
  friend bool operator==(const KeyMeta& a, const KeyMeta& b) {
    return a.version == b.version && a.expiry_ms == b.expiry_ms &&
           a.offset_words == b.offset_words && a.page == b.page &&
           a.generation == b.generation;
  }
};
#pragma pack(pop)

static_assert(std::is_trivially_copyable_v<KeyMeta>,
              "CMap stores values by word copies inside its seqlock");
static_assert(sizeof(KeyMeta) == 20 && alignof(KeyMeta) == 4,
              "no implicit padding, so a slot copy is fully defined; 20 bytes "
              "leave a 4-byte tail, which CMap keeps in its seq word: with "
              "seq and fingerprint a slot is 32 bytes");
static_assert(kVersionBits + kLocalityBits == 64 &&
                  kExpiryBits + kOffsetWordBits == 64 &&
                  kPageBits + kGenerationBits == 32,
              "each bit-field unit is full: (version, locality), (deadline, "
              "offset) and (page, generation)");

// Whether `m` names the entry at (page, offset) of that page generation
// (the page's full counter; KeyMeta keeps its low kGenerationBits).
inline bool PointsAt(const KeyMeta& m, uint32_t page, uint32_t offset,
                     uint32_t generation) {
  return m.page == page && m.offset() == offset &&
         m.generation == (generation & kGenerationMask);
}

}  // namespace furrballs

#endif  // FURRBALLS_ENGINE_FURRBALL_KEY_META_H_
