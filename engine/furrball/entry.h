// engine/furrball/entry.h: the self-describing entry format of value pages,
// and the word-atomic copies that read and write page bytes.
//
// Thread safety: the functions are thread-safe in the sense that every
// access to page memory is an atomic 8-byte load or store, so concurrent use
// is never a data race; whether the bytes a reader copied are consistent is
// decided by the caller's protocol (node_shard.h), not here.
//
// Layout. A page is a sequence of entries laid end to end from offset 0 up to
// the page's bump pointer. Each entry is
//
//   word 0   the header word (below)
//   word 1.. the payload: key bytes, then value bytes, zero-padded to a
//            multiple of 8
//
// and the header word is
//
//   bits  0..24  payload size in bytes (key + value)
//   bits 25..47  capacity, the entry's footprint, in 8-byte words
//   bits 48..61  key size
//   bits 62..63  kind (EntryKind)
//
// Until 2026-11-25 the header held size and capacity as two 32-bit halves
// and the key size and kind were a 2-byte field in front of the key: a 24 B
// key with a 64 B value took 104 B, and now takes 96 B (the key starts on a
// word boundary and the 2 bytes often cost a padding word). The widths are
// what the largest page (page_pool.h, kMaxPageSize: 32 MiB) needs, with the
// 16 bits of the key field: a capacity up to a whole page, 2^22 words, needs
// 23 bits, and a payload up to a page less its header 25; 23 + 25 + 16 = 64
// (static_asserts below and in page_pool.h). Keys are at most 16,383 bytes
// (14 bits; FurrBallOptions::max_key_bytes, 250 by default) and never empty
// (FurrBall::ValidateKey), so a key size of 0 marks an abandoned reservation
// (WriteDeadEntry).
//
// The kind says what the entry holds: a client's value, the head of a value
// stored in chunks, or one chunk under an internal key (chunked_value.h).
// The kind is part of what a read compares, so a client's Get never returns
// a chunk, and it travels with the entry through every copy (relocation,
// spill, reload).
//
// The table identifies a key by its 128-bit keyed hash only; the key itself
// is kept here, beside the value, so that a Get compares it with the key it
// was asked for and a hash collision (found by chance or by someone who
// knows the secret) is a miss, never another key's value. Everything that
// moves entries within a node (relocation, drain) copies the header's key
// field and the payload as they are; what leaves the page (a spilled page's
// PageBlob, a key moved to another node) takes the portable form below.
//
// The portable form of an entry is the payload as it was laid out in pages
// until 2026-11-25: u16 kind << 14 | key size, the key, the value. A
// PageBlob (format version 2, engine/spill/page_blob.h) holds these bytes,
// so the formats on disk did not change with the header: a blob written by
// the earlier layout reloads into the new one and back. The warm-restart
// manifest never held entry bytes (it keeps hashes, versions and TTLs).
//
// No hash in the header (until 2026-11-25 words 0 and 1 held H1 and H2, 16
// bytes per key). An entry's HashPair is the node's KeyHasher applied to
// the key in its payload, a chunk's internal key included (chunked_value.h
// hashes it with the same hasher), so a page walker that needs the hash to
// find the entry's slot recomputes it (NodeShard::ForEachKeyedEntry). This
// relies on every entry having been written under the hash of its own key,
// which the engine's callers guarantee (FurrBall's KeyRef). Nothing on the
// read path used the stored hash: a Get finds the entry through its KeyMeta
// and trusts the bytes only after comparing the stored key with the one
// asked for and re-checking the slot's seqlock (node_shard.h, the Get
// protocol). An entry written under another hash (a test's forced
// collision) is not found by the walk: it counts as live in its page's live
// word, so the page is not recycled under it (PagePool::FinishFreeze) until
// the key's slot lets go of it; it is never misread as another key's.
//
// capacity is the entry's footprint in bytes (header + payload + padding),
// a multiple of 8, so an entry at offset o is followed by one at
// o + capacity. Walking a page from 0 therefore enumerates its entries
// without any per-page key index (the report's KeyIndex), and whether an
// entry is live is answered by the CMap: it is iff the key's KeyMeta points
// at this page, generation and offset. Relocation, page drain, TTL
// reclamation and whole-page spill all use that walk.
//
// An in-place overwrite may shrink the value; the capacity stays, so the
// walk is unaffected and the spare bytes count as padding until the entry is
// relocated, which writes it back with a tight footprint. It rewrites the
// key with the same bytes and the header with the same key size, so a
// walker that reads the key while it runs hashes the same key.
//
// Memory order. Stores are release and loads acquire. On x86-64 both are
// plain MOVs (no fence, no locked instruction), so this costs only the
// compiler's freedom to merge words; in exchange a reader that observes any
// word stored by a writer also observes everything the writer did before
// that store (its seqlock acquisition, its page reservation), which is the
// edge the Get protocol relies on (node_shard.h). Relaxed word copies would
// need stand-alone fences, which ThreadSanitizer does not model.
#ifndef FURRBALLS_ENGINE_FURRBALL_ENTRY_H_
#define FURRBALLS_ENGINE_FURRBALL_ENTRY_H_

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace furrballs {
namespace furrball_internal {

inline constexpr uint32_t kEntryAlignment = 8;
inline constexpr uint32_t kEntryHeaderBytes = 8;
static_assert(kEntryHeaderBytes % kEntryAlignment == 0,
              "the key must start on a word boundary for word compares");
static_assert(sizeof(std::atomic<uint64_t>) == sizeof(uint64_t) &&
                  std::atomic<uint64_t>::is_always_lock_free,
              "page words are accessed through atomic_ref<uint64_t>");

// The header word's fields (see the layout above).
inline constexpr int kPayloadSizeBits = 25;
inline constexpr int kCapacityWordBits = 23;
inline constexpr int kKeySizeBits = 14;
inline constexpr int kKindBits = 2;
inline constexpr int kCapacityShift = kPayloadSizeBits;
inline constexpr int kKeyFieldShift = kCapacityShift + kCapacityWordBits;
static_assert(kPayloadSizeBits + kCapacityWordBits + kKeySizeBits +
                      kKindBits == 64,
              "the four fields fill the header word exactly: widening one "
              "needs another narrowed (a smaller page limit, page_pool.h)");
// The largest payload size and footprint the header can hold (bytes). The
// page limit is checked against these (page_pool.h, kMaxPageSize).
inline constexpr uint64_t kMaxEntryPayloadBytes =
    (uint64_t{1} << kPayloadSizeBits) - 1;
inline constexpr uint64_t kMaxEntryCapacity =
    ((uint64_t{1} << kCapacityWordBits) - 1) * kEntryAlignment;

// The largest key a header can describe.
inline constexpr size_t kMaxPayloadKeyBytes =
    (size_t{1} << kKeySizeBits) - 1;

// What an entry holds (the header's kind field).
enum class EntryKind : uint8_t {
  kValue = 0,        // a client's key and value
  kChunkedHead = 1,  // a client's key; the value names its chunks
  kChunk = 2,        // one chunk of a value, under an internal key
};
static_assert(static_cast<int>(EntryKind::kChunk) < (1 << kKindBits),
              "an EntryKind must fit the header's kind field");

// Which kinds a read accepts: a client's key is a value or a chunked head;
// an internal chunk key only ever names a chunk.
inline bool KindMatches(EntryKind stored, EntryKind wanted) {
  if (wanted == EntryKind::kChunk) return stored == EntryKind::kChunk;
  return stored != EntryKind::kChunk;
}

// The payload size of `key` with `value`.
constexpr uint64_t PayloadSize(uint64_t key_size, uint64_t value_size) {
  return key_size + value_size;
}

// The footprint of an entry holding `payload_size` payload bytes.
constexpr uint64_t EntryFootprint(uint64_t payload_size) {
  return (kEntryHeaderBytes + payload_size + kEntryAlignment - 1) &
         ~uint64_t{kEntryAlignment - 1};
}

// An entry header, decoded.
struct EntryHeader {
  uint32_t size = 0;      // payload bytes: key + value
  uint32_t capacity = 0;  // footprint, a multiple of kEntryAlignment
  uint16_t key_size = 0;  // 0: an abandoned reservation, no key
  EntryKind kind = EntryKind::kValue;

  // REQUIRES: key_size <= size (ReadEntryHeaderWithin checks it for a
  // reader that may see stale bytes; writers keep it).
  uint32_t value_size() const { return size - key_size; }
};

// The header's key field, also the portable form's first two bytes.
inline uint16_t KeyField(EntryKind kind, size_t key_size) {
  return static_cast<uint16_t>(
      key_size | (size_t{static_cast<uint8_t>(kind)} << kKeySizeBits));
}

// REQUIRES: h.size <= kMaxEntryPayloadBytes, h.capacity <= kMaxEntryCapacity
// and a multiple of kEntryAlignment, h.key_size <= kMaxPayloadKeyBytes.
constexpr uint64_t EncodeEntryHeader(const EntryHeader& h) {
  return uint64_t{h.size} |
         (uint64_t{h.capacity / kEntryAlignment} << kCapacityShift) |
         (uint64_t{h.key_size} << kKeyFieldShift) |
         (uint64_t{static_cast<uint8_t>(h.kind)}
          << (kKeyFieldShift + kKeySizeBits));
}

constexpr EntryHeader DecodeEntryHeader(uint64_t w) {
  EntryHeader h;
  h.size = static_cast<uint32_t>(w & kMaxEntryPayloadBytes);
  h.capacity = static_cast<uint32_t>(
      ((w >> kCapacityShift) & ((uint64_t{1} << kCapacityWordBits) - 1)) *
      kEntryAlignment);
  h.key_size = static_cast<uint16_t>((w >> kKeyFieldShift) &
                                     kMaxPayloadKeyBytes);
  h.kind = static_cast<EntryKind>(w >> (kKeyFieldShift + kKeySizeBits));
  return h;
}

inline void StoreWord(uint8_t* p, uint64_t v) {
  std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(p))
      .store(v, std::memory_order_release);
}

inline uint64_t LoadWord(const uint8_t* p) {
  return std::atomic_ref<uint64_t>(
             *reinterpret_cast<uint64_t*>(const_cast<uint8_t*>(p)))
      .load(std::memory_order_acquire);
}

inline EntryHeader ReadEntryHeader(const uint8_t* entry) {
  return DecodeEntryHeader(LoadWord(entry));
}

inline void WriteEntryHeader(uint8_t* entry, const EntryHeader& h) {
  StoreWord(entry, EncodeEntryHeader(h));
}

// Reads the header of the entry at `offset` of a page of `page_size` bytes
// for a reader whose KeyMeta may already be stale, so that the bytes may be
// a recycled page's: false if they cannot be the header of an entry there
// (footprint below the header or past the page's end, size past the
// footprint, key past the size). A true answer keeps the reader's copy
// inside the page; that the bytes are the entry's is the caller's protocol
// (node_shard.h).
inline bool ReadEntryHeaderWithin(const uint8_t* entry, uint32_t offset,
                                  uint32_t page_size, EntryHeader* out) {
  *out = ReadEntryHeader(entry);
  return out->capacity >= kEntryHeaderBytes &&
         uint64_t{offset} + out->capacity <= page_size &&
         out->size <= out->capacity - kEntryHeaderBytes &&
         out->key_size <= out->size;
}

// Writes the payload of `key` and `value` into the entry's payload area
// (word stores, the last word zero-padded). REQUIRES:
// EntryFootprint(PayloadSize(...)) <= the entry's capacity.
inline void WritePayloadWords(uint8_t* entry, std::string_view key,
                              std::string_view value) {
  uint8_t* dst = entry + kEntryHeaderBytes;
  uint64_t word = 0;
  size_t filled = 0;  // bytes of `word` in use
  auto put = [&](const char* src, size_t n) {
    if (filled == 0) {  // whole words straight from the source
      for (; n >= 8; n -= 8, src += 8, dst += 8) {
        std::memcpy(&word, src, 8);
        StoreWord(dst, word);
      }
      word = 0;
    }
    while (n > 0) {
      const size_t take = std::min(n, size_t{8} - filled);
      std::memcpy(reinterpret_cast<char*>(&word) + filled, src, take);
      filled += take;
      src += take;
      n -= take;
      if (filled == 8) {
        StoreWord(dst, word);
        dst += 8;
        word = 0;
        filled = 0;
      }
    }
  };
  put(key.data(), key.size());
  put(value.data(), value.size());
  if (filled > 0) StoreWord(dst, word);
}

// Copies `n` payload bytes starting at payload offset `from` into `dst`
// (word loads; `from` need not be aligned). The whole words in the middle are
// fixed-size copies: a copy of a variable length per word was a call to the
// library's memcpy for every 8 bytes of a Get's value.
inline void CopyPayloadRange(const uint8_t* entry, size_t from, size_t n,
                             char* dst) {
  const uint8_t* base = entry + kEntryHeaderBytes;
  // Bytes [skip, skip + take) of one word.
  auto copy_part = [&](size_t skip, size_t take) {
    char word[8];
    const uint64_t w = LoadWord(base + (from & ~size_t{7}));
    std::memcpy(word, &w, 8);
    for (size_t i = 0; i < take; ++i) dst[i] = word[skip + i];
    dst += take;
    from += take;
    n -= take;
  };
  if (const size_t skip = from & 7; skip != 0 && n > 0) {
    copy_part(skip, std::min(n, 8 - skip));
  }
  for (; n >= 8; n -= 8, from += 8, dst += 8) {
    const uint64_t w = LoadWord(base + from);
    std::memcpy(dst, &w, 8);
  }
  if (n > 0) copy_part(0, n);
}

// Whether the entry at `entry` with header `header` holds `key` with a kind
// that KindMatches `wanted`; *kind gets the stored kind. The answer is only
// meaningful if the caller's protocol then confirms that the entry did not
// change while it was read (node_shard.h, the Get protocol). REQUIRES:
// `header` passed ReadEntryHeaderWithin or is the entry's (HeaderOf).
inline bool PayloadKeyEquals(const uint8_t* entry, const EntryHeader& header,
                             std::string_view key,
                             EntryKind wanted = EntryKind::kValue,
                             EntryKind* kind = nullptr) {
  if (kind != nullptr) *kind = header.kind;
  if (header.key_size != key.size() || header.key_size > header.size ||
      !KindMatches(header.kind, wanted)) {
    return false;
  }
  // The key starts on the payload's first word: compare word by word.
  const uint8_t* p = entry + kEntryHeaderBytes;
  size_t i = 0;
  for (; i + 8 <= key.size(); i += 8) {
    const uint64_t w = LoadWord(p + i);
    if (std::memcmp(&w, key.data() + i, 8) != 0) return false;
  }
  if (i < key.size()) {
    const uint64_t w = LoadWord(p + i);
    if (std::memcmp(&w, key.data() + i, key.size() - i) != 0) return false;
  }
  return true;
}

// Copies the key of the entry at `entry` with header `header` into *key;
// false if it holds none (an abandoned reservation, WriteDeadEntry). For a
// walker of a frozen page, whose entries' keys no writer changes (see the
// layout above).
inline bool PayloadKey(const uint8_t* entry, const EntryHeader& header,
                       std::string* key) {
  if (header.key_size == 0 || header.key_size > header.size) return false;
  key->resize(header.key_size);
  CopyPayloadRange(entry, 0, header.key_size, key->data());
  return true;
}

// Writes a whole entry holding the payload of `key` and `value`: payload
// first, then the header. Also the in-place overwrite (the same key, a value
// that fits `capacity`). REQUIRES: 0 < key.size() <= kMaxPayloadKeyBytes;
// EntryFootprint(PayloadSize(...)) <= capacity <= kMaxEntryCapacity.
inline void WriteKeyedEntry(uint8_t* entry, std::string_view key,
                            std::string_view value, uint32_t capacity,
                            EntryKind kind = EntryKind::kValue) {
  WritePayloadWords(entry, key, value);
  WriteEntryHeader(
      entry, EntryHeader{
                 .size = static_cast<uint32_t>(
                     PayloadSize(key.size(), value.size())),
                 .capacity = capacity,
                 .key_size = static_cast<uint16_t>(key.size()),
                 .kind = kind});
}

// Writes a header for a reservation that will never hold a published value
// (the write was abandoned), so that the page stays walkable. It holds no
// key, so a walk finds none in it (PayloadKey).
inline void WriteDeadEntry(uint8_t* entry, uint32_t capacity) {
  WriteEntryHeader(entry, EntryHeader{.capacity = capacity});
}

// Copies the payload of entry `src`, whose header is `header`, to entry
// `dst` and writes dst's header with the same size, key and kind and
// `capacity`. Used by relocation.
inline void CopyEntry(const uint8_t* src, uint8_t* dst,
                      const EntryHeader& header, uint32_t capacity) {
  const size_t words = (header.size + kEntryAlignment - 1) / kEntryAlignment;
  for (size_t i = 0; i < words; ++i) {
    StoreWord(dst + kEntryHeaderBytes + 8 * i,
              LoadWord(src + kEntryHeaderBytes + 8 * i));
  }
  EntryHeader moved = header;
  moved.capacity = capacity;
  WriteEntryHeader(dst, moved);
}

// ---- The portable form (see the layout above) ----

inline constexpr uint32_t kPortableKeyFieldBytes = 2;

// The size of the portable form of an entry with header `header`.
inline uint32_t PortableSize(const EntryHeader& header) {
  return kPortableKeyFieldBytes + header.size;
}

// Writes the portable form of the entry at `entry` with header `header`
// into `dst` (PortableSize(header) bytes). The copy is the entry's only
// under the caller's protocol, as for PayloadKeyEquals.
inline void CopyPortable(const uint8_t* entry, const EntryHeader& header,
                         char* dst) {
  const uint16_t field = KeyField(header.kind, header.key_size);
  std::memcpy(dst, &field, sizeof(field));
  CopyPayloadRange(entry, 0, header.size, dst + kPortableKeyFieldBytes);
}

// Splits a portable form held in memory (a spilled page's copy, a moved
// key's) into its key, value and kind; false if it is too short to be one,
// names no key or a kind there is not. Fuzzed (entry_fuzz): the bytes come
// from disk.
inline bool SplitPortable(std::string_view portable, std::string_view* key,
                          std::string_view* value, EntryKind* kind) {
  uint16_t field = 0;
  if (portable.size() < kPortableKeyFieldBytes) return false;
  std::memcpy(&field, portable.data(), sizeof(field));
  *kind = static_cast<EntryKind>(field >> kKeySizeBits);
  const size_t key_size = field & kMaxPayloadKeyBytes;
  if (key_size == 0 || *kind > EntryKind::kChunk ||
      portable.size() - kPortableKeyFieldBytes < key_size) {
    return false;
  }
  *key = portable.substr(kPortableKeyFieldBytes, key_size);
  *value = portable.substr(kPortableKeyFieldBytes + key_size);
  return true;
}

}  // namespace furrball_internal
}  // namespace furrballs

#endif  // FURRBALLS_ENGINE_FURRBALL_ENTRY_H_
