// engine/furrball/chunked_value.h: values larger than one entry's room in a
// page, stored as a head entry under the client's key and chunks under
// internal keys (issue 13, goal 4; memcached chains large items the same
// way).
//
// Thread safety: ChunkedValues is thread-safe (its only state is an atomic
// write-id counter); it calls a ChunkStore, which must be thread-safe too.
//
// Why chunks. An entry lives inside one page, so before this a page had to
// hold the largest value: the default 1 MiB max_value_bytes forced 2 MiB
// pages, and a 4 MiB budget could not have the few pages the reclaimer
// needs. A value whose entry would be larger than MaxWholeEntryBytes(page)
// (an eighth of a page) is cut into chunks of ChunkBytesFor(page) bytes,
// so the page size follows the budget (memory_plan.h) and no page holds an
// entry so large that packing and compaction suffer.
//
// Protocol. A chunked Set of key K (hash h) with value V:
//
//   1. w = a fresh write id: a per-cache random 64-bit base plus a counter,
//      so ids are unique within a run and, with overwhelming probability,
//      across warm restarts (spilled chunks of an earlier run keep theirs).
//   2. Chunk i of V is Set (kAlways, no TTL) under the internal key
//      ChunkKey(h, w, i) = h1 | h2 | w | i (28 bytes) with kind kChunk
//      (entry.h). A client can never name it: every client read and
//      condition compares kinds, and a client's key of the same bytes reads
//      as another key (a client Set of those bytes only replaces the chunk,
//      as an eviction could).
//   3. Only then the head, {size, chunk count, chunk bytes, w}, is Set
//      under K with kind kChunkedHead and the client's WriteOptions, so the
//      mode (add, replace, CAS), the TTL and the version are the head's and
//      behave as for a small value. If the head is not written (a condition
//      failed, no memory) the chunks of w are deleted.
//   4. The entry the head replaced, if it was a chunked head in memory, is
//      reported by the shard (NodeShard::Set's replaced_head) and its
//      chunks are deleted. Delete does the same.
//
// A Get of K reads K's entry; a head is assembled by reading chunks 0..n-1
// of its w. Since w is never reused and chunks are written before the head
// that names them, the chunks of a head that a reader sees were all
// written, with exactly these bytes (the full-key check of each read keeps
// other keys out), so an assembled value is never partial or mixed. If a
// chunk is missing (evicted, or deleted by a concurrent overwrite of K) the
// head is read again: a head of another write is followed (a bounded
// number of times); the same head means the value is lost, and the reader
// deletes its remaining chunks and the head, the latter only if its version
// is still the one read (NodeShard::Delete's if_version), then misses.
//
// Every write id is used by one writer, so concurrent Sets of K never mix
// chunks: whichever head lands last names a complete set. Touch changes the
// head's TTL only; chunks have none and live until their head's cleanup or
// eviction. Chunks are ordinary entries for eviction, relocation, the spill
// tier and warm restarts; a spilled chunk reloads on its Get like any key,
// and the no-resurrection guarantee of each entry gives the value's: a
// Delete or a Set of K drops K's head (in memory or in the spill index), so
// no old head comes back to name old chunks.
//
// What is left to eviction: chunks of a head that was evicted, expired,
// or replaced or deleted while only on disk (the spill index keeps no
// payload, so there is no write id to delete) are never read again and age
// out like any cold key. Chunk reads count neither as hits nor as misses
// (the head's read counts the Get, as a hit even when a chunk then turns
// out to be gone); their Sets and Deletes are counted like a client's, and
// chunks count in live_keys and live_bytes.
#ifndef FURRBALLS_ENGINE_FURRBALL_CHUNKED_VALUE_H_
#define FURRBALLS_ENGINE_FURRBALL_CHUNKED_VALUE_H_

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "engine/common/hash_pair.h"
#include "engine/furrball/entry.h"
#include "engine/furrball/furrball.h"

namespace furrballs {
namespace furrball_internal {

// The value of a head entry.
struct ChunkedHead {
  uint64_t value_size = 0;
  uint32_t chunk_count = 0;
  uint32_t chunk_bytes = 0;  // every chunk's size but the last one's
  uint64_t write_id = 0;

  // The size of chunk `i`.
  uint32_t ChunkSize(uint32_t i) const;
};
inline constexpr size_t kChunkedHeadBytes = 24;
std::string EncodeChunkedHead(const ChunkedHead& head);
// nullopt unless `bytes` is a well-formed head (sizes that add up).
std::optional<ChunkedHead> DecodeChunkedHead(std::string_view bytes);

// The internal key of chunk `index` of write `write_id` of the key with
// hash `h`.
inline constexpr size_t kChunkKeyBytes = 28;
using ChunkKey = std::array<char, kChunkKeyBytes>;
ChunkKey MakeChunkKey(const HashPair& h, uint64_t write_id, uint32_t index);

// The largest entry footprint stored whole on pages of `page_size` bytes,
// and the chunk size of larger values (a chunk's entry fits the former).
uint32_t MaxWholeEntryBytes(uint32_t page_size);
uint32_t ChunkBytesFor(uint32_t page_size);

// The engine's operations on one entry, each taking the key's write lock
// as the FurrBall does (FurrBallImpl implements it).
class ChunkStore {
 public:
  virtual ~ChunkStore() = default;
  virtual HashPair HashOf(std::string_view key) const = 0;
  // NodeShard::Get with `wanted`/`kind`; read_disk = false answers a key
  // only on disk with on_disk (FurrBall::GetFromMemory).
  virtual GetResult GetEntry(const KeyRef& key, std::string* value,
                             EntryKind wanted, EntryKind* kind,
                             bool read_disk) = 0;
  // NodeShard::Set and NodeShard::Delete.
  virtual SetResult SetEntry(const KeyRef& key, std::string_view value,
                             const WriteOptions& options, EntryKind kind,
                             std::string* replaced_head) = 0;
  virtual DeleteResult DeleteEntry(const HashPair& h, uint64_t if_version,
                                   std::string* replaced_head) = 0;
};

class ChunkedValues {
 public:
  // `page_size`: the pages' size (it sets the chunk size); `write_id_base`:
  // a random number drawn at start-up (see the protocol, step 1).
  ChunkedValues(ChunkStore* store, uint32_t page_size, uint64_t write_id_base);

  // Whether a value of `value_size` bytes under a key of `key_size` bytes
  // is stored in chunks.
  bool NeedsChunks(size_t key_size, size_t value_size) const {
    return EntryFootprint(PayloadSize(key_size, value_size)) > max_whole_;
  }

  // Steps 1-4 of the protocol.
  SetResult Set(const KeyRef& key, std::string_view value,
                const WriteOptions& options);
  // Assembles the value of the head `head_result` / *value (the head's
  // bytes) just read for `key`; *value gets the value. A miss if a chunk
  // is gone (after the cleanup above); on_disk without read_disk when a
  // chunk is only on disk.
  GetResult Assemble(const KeyRef& key, GetResult head_result,
                     std::string* value, bool read_disk);
  // Deletes the chunks named by a head's bytes (a replaced or deleted
  // head, as the shard reported it under `h`); nothing if empty.
  void DeleteChunksOf(const HashPair& h, std::string_view head_bytes);

 private:
  // Deletes chunks [0, count) of write `write_id`.
  void DeleteChunks(const HashPair& h, uint64_t write_id, uint32_t count);

  ChunkStore* const store_;
  const uint32_t max_whole_;
  const uint32_t chunk_bytes_;
  std::atomic<uint64_t> next_write_id_;
};

}  // namespace furrball_internal
}  // namespace furrballs

#endif  // FURRBALLS_ENGINE_FURRBALL_CHUNKED_VALUE_H_
