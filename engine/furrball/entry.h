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
//   word 0   payload size (low 32 bits) | capacity (high 32 bits)
//   word 1.. the payload, zero-padded to a multiple of 8
//
// The payload is the key and its value (issue 13, goal 5):
//
//   u16 kind << 14 | key size | key bytes | value bytes
//
// The top two bits of the key-size field say what the entry holds
// (EntryKind): a client's value, the head of a value stored in chunks, or
// one chunk under an internal key (chunked_value.h). The kind is part of
// what a read compares, so a client's Get never returns a chunk, and it
// travels with the payload through every copy (relocation, spill, reload).
//
// The table identifies a key by its 128-bit keyed hash only; the key itself
// is kept here, beside the value, so that a Get compares it with the key it
// was asked for and a hash collision (found by chance or by someone who
// knows the secret) is a miss, never another key's value. Everything that
// moves entries (relocation, drain, spill, reload, warm restart) treats the
// payload as opaque bytes; the header's size is the payload's size.
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
// The spill tier's PageBlob and the warm-restart manifest never held entry
// headers (they keep their own per-key records), so their formats are
// unchanged.
//
// capacity is the entry's footprint in bytes (header + payload + padding),
// a multiple of 8, so an entry at offset o is followed by one at
// o + capacity. Pages are at most 2^27 bytes (key_meta.h: 2^24 words), so
// both fields fit 32 bits. Walking a page from 0 therefore enumerates its
// entries without any per-page key index (the report's KeyIndex), and
// whether an entry is live is answered by the CMap: it is iff the key's
// KeyMeta points at this page, generation and offset. Relocation, page
// drain, TTL reclamation and whole-page spill all use that walk; a spilled
// page is its own PageBlob.
//
// An in-place overwrite may shrink the value; the capacity stays, so the
// walk is unaffected and the spare bytes count as padding until the entry is
// relocated, which writes it back with a tight footprint. It rewrites the
// key with the same bytes, so a walker that reads the key while it runs
// hashes the same key.
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
              "the value must start on a word boundary for word copies");
static_assert(sizeof(std::atomic<uint64_t>) == sizeof(uint64_t) &&
                  std::atomic<uint64_t>::is_always_lock_free,
              "page words are accessed through atomic_ref<uint64_t>");

// The bytes in front of the key in a payload: its size and kind.
inline constexpr uint32_t kPayloadKeySizeBytes = 2;
inline constexpr int kPayloadKindShift = 14;
inline constexpr size_t kMaxPayloadKeyBytes =
    (size_t{1} << kPayloadKindShift) - 1;

// What an entry holds (the top bits of its payload's key-size field).
enum class EntryKind : uint8_t {
  kValue = 0,        // a client's key and value
  kChunkedHead = 1,  // a client's key; the value names its chunks
  kChunk = 2,        // one chunk of a value, under an internal key
};
static_assert(static_cast<int>(EntryKind::kChunk) <
                  (1 << (16 - kPayloadKindShift)),
              "an EntryKind must fit the key-size field's top bits");

// Which kinds a read accepts: a client's key is a value or a chunked head;
// an internal chunk key only ever names a chunk.
inline bool KindMatches(EntryKind stored, EntryKind wanted) {
  if (wanted == EntryKind::kChunk) return stored == EntryKind::kChunk;
  return stored != EntryKind::kChunk;
}

// The payload size of `key` with `value`.
constexpr uint64_t PayloadSize(uint64_t key_size, uint64_t value_size) {
  return kPayloadKeySizeBytes + key_size + value_size;
}

// The footprint of an entry holding `value_size` payload bytes.
constexpr uint64_t EntryFootprint(uint64_t value_size) {
  return (kEntryHeaderBytes + value_size + kEntryAlignment - 1) &
         ~uint64_t{kEntryAlignment - 1};
}

struct EntryHeader {
  uint32_t size = 0;      // payload bytes
  uint32_t capacity = 0;  // footprint
};

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
  EntryHeader h;
  const uint64_t w = LoadWord(entry);
  h.size = static_cast<uint32_t>(w);
  h.capacity = static_cast<uint32_t>(w >> 32);
  return h;
}

// Reads the header of the entry at `offset` of a page of `page_size` bytes
// for a reader whose KeyMeta may already be stale, so that the bytes may be
// a recycled page's: false if they cannot be the header of an entry there
// (footprint below the header or past the page's end, size past the
// footprint). A true answer keeps the reader's copy inside the page; that
// the bytes are the entry's is the caller's protocol (node_shard.h).
inline bool ReadEntryHeaderWithin(const uint8_t* entry, uint32_t offset,
                                  uint32_t page_size, EntryHeader* out) {
  *out = ReadEntryHeader(entry);
  return out->capacity >= kEntryHeaderBytes &&
         uint64_t{offset} + out->capacity <= page_size &&
         out->size <= out->capacity - kEntryHeaderBytes;
}

inline void WriteSizeWord(uint8_t* entry, uint32_t size, uint32_t capacity) {
  StoreWord(entry, uint64_t{size} | (uint64_t{capacity} << 32));
}

// Writes `value` into the entry's value area, zero-padding the last word.
// REQUIRES: EntryFootprint(value.size()) <= the entry's capacity.
inline void WriteValueWords(uint8_t* entry, std::string_view value) {
  uint8_t* dst = entry + kEntryHeaderBytes;
  const char* src = value.data();
  size_t left = value.size();
  while (left >= 8) {
    uint64_t w;
    std::memcpy(&w, src, 8);
    StoreWord(dst, w);
    dst += 8;
    src += 8;
    left -= 8;
  }
  if (left > 0) {
    uint64_t w = 0;
    std::memcpy(&w, src, left);
    StoreWord(dst, w);
  }
}

// Writes the payload of `key` and `value` into the entry's value area
// (word stores, the last word zero-padded). REQUIRES: key.size() <=
// kMaxPayloadKeyBytes; EntryFootprint(PayloadSize(...)) <= the capacity.
inline void WritePayloadWords(uint8_t* entry, std::string_view key,
                              std::string_view value,
                              EntryKind kind = EntryKind::kValue) {
  uint8_t* dst = entry + kEntryHeaderBytes;
  uint64_t word = 0;
  size_t filled = 0;  // bytes of `word` in use
  auto put = [&](const char* src, size_t n) {
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
  const uint16_t key_size = static_cast<uint16_t>(
      key.size() | (size_t{static_cast<uint8_t>(kind)} << kPayloadKindShift));
  put(reinterpret_cast<const char*>(&key_size), sizeof(key_size));
  put(key.data(), key.size());
  put(value.data(), value.size());
  if (filled > 0) StoreWord(dst, word);
}

// Copies `n` payload bytes starting at payload offset `from` into `dst`
// (word loads; `from` need not be aligned).
inline void CopyPayloadRange(const uint8_t* entry, size_t from, size_t n,
                             char* dst) {
  const uint8_t* base = entry + kEntryHeaderBytes;
  while (n > 0) {
    const size_t word_start = from & ~size_t{7};
    const size_t skip = from - word_start;
    const size_t take = std::min(n, size_t{8} - skip);
    const uint64_t w = LoadWord(base + word_start);
    std::memcpy(dst, reinterpret_cast<const char*>(&w) + skip, take);
    dst += take;
    from += take;
    n -= take;
  }
}

// Whether the payload of `payload_size` bytes at `entry` holds `key` with a
// kind that KindMatches `wanted`; *kind gets the stored kind. The answer is
// only meaningful if the caller's protocol then confirms that the entry did
// not change while it was read (node_shard.h, the Get protocol).
inline bool PayloadKeyEquals(const uint8_t* entry, uint32_t payload_size,
                             std::string_view key,
                             EntryKind wanted = EntryKind::kValue,
                             EntryKind* kind = nullptr) {
  if (payload_size < PayloadSize(key.size(), 0)) return false;
  uint16_t field = 0;
  CopyPayloadRange(entry, 0, sizeof(field), reinterpret_cast<char*>(&field));
  const EntryKind stored = static_cast<EntryKind>(field >> kPayloadKindShift);
  if (kind != nullptr) *kind = stored;
  if ((field & kMaxPayloadKeyBytes) != key.size() ||
      !KindMatches(stored, wanted)) {
    return false;
  }
  char chunk[64];
  for (size_t done = 0; done < key.size();) {
    const size_t n = std::min(sizeof(chunk), key.size() - done);
    CopyPayloadRange(entry, kPayloadKeySizeBytes + done, n, chunk);
    if (std::memcmp(chunk, key.data() + done, n) != 0) return false;
    done += n;
  }
  return true;
}

// The kind of the entry at `entry` and its key's size (*key_size). The
// answer is only meaningful under the caller's protocol, as above.
inline EntryKind PayloadKind(const uint8_t* entry, size_t* key_size) {
  uint16_t field = 0;
  CopyPayloadRange(entry, 0, sizeof(field), reinterpret_cast<char*>(&field));
  *key_size = field & kMaxPayloadKeyBytes;
  return static_cast<EntryKind>(field >> kPayloadKindShift);
}

// Copies the key of the payload of `payload_size` bytes at `entry` into
// *key; false if the payload is too short to hold one (an abandoned
// reservation's, WriteDeadEntry). For a walker of a frozen page, whose
// entries' keys no writer changes (see the layout above).
inline bool PayloadKey(const uint8_t* entry, uint32_t payload_size,
                       std::string* key) {
  if (payload_size < kPayloadKeySizeBytes) return false;
  size_t key_size = 0;
  PayloadKind(entry, &key_size);
  if (payload_size < PayloadSize(key_size, 0)) return false;
  key->resize(key_size);
  CopyPayloadRange(entry, kPayloadKeySizeBytes, key_size, key->data());
  return true;
}

// Splits a payload held in memory (a spilled page's copy) into its key,
// value and kind; false if it is too short to be one.
inline bool SplitPayload(std::string_view payload, std::string_view* key,
                         std::string_view* value, EntryKind* kind) {
  uint16_t field = 0;
  if (payload.size() < kPayloadKeySizeBytes) return false;
  std::memcpy(&field, payload.data(), sizeof(field));
  *kind = static_cast<EntryKind>(field >> kPayloadKindShift);
  const size_t key_size = field & kMaxPayloadKeyBytes;
  if (payload.size() < PayloadSize(key_size, 0)) return false;
  *key = payload.substr(kPayloadKeySizeBytes, key_size);
  *value = payload.substr(PayloadSize(key_size, 0));
  return true;
}

// Writes a whole entry: value first, then the header.
inline void WriteEntry(uint8_t* entry, std::string_view value,
                       uint32_t capacity) {
  WriteValueWords(entry, value);
  WriteSizeWord(entry, static_cast<uint32_t>(value.size()), capacity);
}

// Writes a whole entry holding the payload of `key` and `value`: payload
// first, then the header.
inline void WriteKeyedEntry(uint8_t* entry, std::string_view key,
                            std::string_view value, uint32_t capacity,
                            EntryKind kind = EntryKind::kValue) {
  WritePayloadWords(entry, key, value, kind);
  WriteSizeWord(entry,
                static_cast<uint32_t>(PayloadSize(key.size(), value.size())),
                capacity);
}

// Writes a header for a reservation that will never hold a published value
// (the write was abandoned), so that the page stays walkable. Its payload
// is empty, so a walk finds no key in it (PayloadKey).
inline void WriteDeadEntry(uint8_t* entry, uint32_t capacity) {
  WriteSizeWord(entry, 0, capacity);
}

// Copies `size` value bytes of the entry into `dst`.
inline void CopyValueOut(const uint8_t* entry, uint32_t size, char* dst) {
  const uint8_t* src = entry + kEntryHeaderBytes;
  size_t left = size;
  while (left >= 8) {
    const uint64_t w = LoadWord(src);
    std::memcpy(dst, &w, 8);
    dst += 8;
    src += 8;
    left -= 8;
  }
  if (left > 0) {
    const uint64_t w = LoadWord(src);
    std::memcpy(dst, &w, left);
  }
}

// Copies the `size` payload bytes from entry `src` to entry `dst` and
// writes dst's header with `capacity`. Used by relocation.
inline void CopyEntry(const uint8_t* src, uint8_t* dst, uint32_t size,
                      uint32_t capacity) {
  const size_t words = (size + kEntryAlignment - 1) / kEntryAlignment;
  for (size_t i = 0; i < words; ++i) {
    StoreWord(dst + kEntryHeaderBytes + 8 * i,
              LoadWord(src + kEntryHeaderBytes + 8 * i));
  }
  WriteSizeWord(dst, size, capacity);
}

}  // namespace furrball_internal
}  // namespace furrballs

#endif  // FURRBALLS_ENGINE_FURRBALL_ENTRY_H_
