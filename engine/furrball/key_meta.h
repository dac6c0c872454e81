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

struct KeyMeta {
  // Every write takes a fresh version from its node's counter (see
  // NodeShard::NextVersion), so (version, page, generation, offset) names one
  // immutable byte image: an in-place overwrite takes a new version, and a
  // relocation lands on a new (page, generation, offset). A reader that sees
  // the same KeyMeta before and after copying the bytes therefore copied
  // bytes nobody changed (the Get protocol in node_shard.h).
  uint64_t version = 0;
  uint64_t expiry_ms = 0;   // monotonic deadline (Clock::NowMs); 0 = never
  uint32_t page = 0;        // page index within the node's pool
  uint32_t offset = 0;      // of the entry header within the page
  uint32_t size = 0;        // value bytes
  uint32_t capacity = 0;    // the entry's footprint: header + value + padding
  uint32_t generation = 0;  // the page's recycle count when written
  // Zero. Keeps the struct free of implicit padding (CMap copies slots as
  // words) and is where the spill tier's per-key flags will go.
  uint32_t reserved = 0;

  bool Expired(uint64_t now_ms) const {
    return expiry_ms != 0 && now_ms >= expiry_ms;
  }

  friend bool operator==(const KeyMeta&, const KeyMeta&) = default;
};

static_assert(std::is_trivially_copyable_v<KeyMeta>,
              "CMap stores values by word copies inside its seqlock");
static_assert(sizeof(KeyMeta) == 40 && alignof(KeyMeta) == 8,
              "no implicit padding, so a slot copy is fully defined");
static_assert(sizeof(KeyMeta) <= 48,
              "KeyMeta must stay small enough to keep CMap slots inline "
              "(brief: <= 48 bytes)");

}  // namespace furrballs

#endif  // FURRBALLS_ENGINE_FURRBALL_KEY_META_H_
