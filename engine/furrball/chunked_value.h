// engine/furrball/chunked_value.h: values larger than one entry's room in a
// page, stored as a head entry under the client's key and chunks under
// internal keys (issue 13, goal 4; memcached chains large items the same
// way).
//
// Thread safety: ChunkedValues is thread-safe (an atomic write-id counter,
// the readers' epoch counters and a mutex-guarded retire queue, below); it
// calls a ChunkStore, which must be thread-safe too.
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
//      chunks are retired (Grace, below): deleted once no reader can still
//      be reading them. A Delete of K, or a small value Set over a chunked
//      one, retires the same way.
//
// A Get of K reads K's entry; a head is assembled by reading chunks 0..n-1
// of its w, inside a read section (Grace). Since w is never reused and
// chunks are written before the head that names them, the chunks of a head
// that a reader sees were all written, with exactly these bytes (the
// full-key check of each read keeps other keys out), so an assembled value
// is never partial or mixed. If a chunk is missing the head is read again:
// a head of another write is followed (a bounded number of times); the
// same head means the value is lost, and the reader deletes its remaining
// chunks and the head, the latter only if its version is still the one
// read (NodeShard::Delete's if_version), then misses. A chunk goes missing
// through eviction, or when the head was read before the read section
// began (the first head is read by the plain Get, which a small value's
// Get must not pay a section for) and its write was retired and deleted
// meanwhile: the head read again inside the section is protected.
//
// Grace. Before it, a Set that replaced a head deleted the old chunks at
// once, so a reader of a key overwritten continuously found a chunk gone
// on every head it followed and missed, although the key always held a
// whole value (chunked_value_overwrite_test). Now replaced chunks wait for
// the readers that could be reading them, with two-epoch reclamation:
//
//   - epoch_ (a counter, only advanced under mu_) and readers_[2] (readers
//     inside a section, by epoch parity). A reader enters by loading epoch_
//     = e, incrementing readers_[e & 1] and loading epoch_ again; if it
//     moved it leaves and retries, so a reader counted under e read e after
//     its increment. It leaves by decrementing the same counter. All these
//     operations are seq_cst (they pair with the drainer's, below).
//   - A retire appends {K's hash, w, chunk count, bytes, epoch_} to
//     retired_ under mu_, so entries are in epoch order.
//   - A drain, under mu_, advances epoch_ from e to e + 1 when
//     readers_[(e + 1) & 1], the readers of e - 1, is 0 (at most twice a
//     drain, and only while an entry needs it), then takes every entry
//     retired at an epoch r <= epoch_ - 2 and, after releasing mu_,
//     deletes its chunks.
//
// Why that is safe: let a reader R enter at epoch e and then read a head
// whose write is retired at r. The retire happened after the head was
// replaced, and the replacement after R's read, so r >= e: had epoch_ gone
// past r before R loaded e, the advance (under mu_, after the retire)
// would happen-before R's load, R's head read would come after the
// replacement and return the new head. The entry is deleted at epoch_ >=
// r + 2 >= e + 2, and the advance to e + 2 found readers_[e & 1] at 0
// after R had counted itself there (R's check load preceded the advance to
// e + 1 in the seq_cst order), so R had left. Nothing waits: a reader never
// blocks, a writer only takes mu_ (held for a few pointer moves and the
// queue's allocation, never across a chunk deletion or a key lock).
//
// Who drains: the writer that retires, at once (with no reader inside,
// its two advances free its own entry immediately), and, when the last
// reader of an epoch parity leaves while entries wait, a drain job
// (ChunkStore::RunSoon: a NodeJob of the reader's node; inline if its
// queue refuses it; at most one queued, drain_scheduled_). The reader's
// decrement and its load of retired_count_, and the retire's store of
// retired_count_ and its drain's loads of readers_, are seq_cst, so of a
// reader leaving and a write retiring at the same time at least one sees
// the other: an entry never waits for a reader that has left.
//
// Bound. Retired chunks are ordinary entries, in the budget, evictable
// like any cold key (a reader whose chunk was evicted misses, as before).
// What grace adds is bounded by retired_bytes_limit (a quarter of the
// pages, FurrBallImpl): a retire that would pass it deletes the oldest
// entries' chunks at once, and a write larger than the limit is deleted
// at once; a reader of those may miss, which is the price of the bound
// (only a reader descheduled while writers replace a quarter of the cache
// pays it). retired_ thus holds at most limit / (an eighth of a page)
// entries of 48 bytes. In the smallest caches a quarter of the pages is
// less than one 1 MiB value (a 4 MiB budget), so such a value is deleted
// at once when replaced, as before grace, and its readers can still miss
// under continuous overwrites.
//
// Shutdown and warm restart: FurrBallImpl's destructor stops the workers
// (their queued drain jobs run), then drains, with no reader left, before
// the shards spill for a warm restart, so no retired chunk is persisted.
// The spill tier: a retired chunk may spill meanwhile; its deletion drops
// it from the spill index like any Delete. A head replaced while only on
// disk names no write id to retire (below).
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
#include <deque>
#include <optional>
#include <string>
#include <string_view>

#include <absl/base/thread_annotations.h>

#include "engine/common/hash_pair.h"
#include "engine/furrball/entry.h"
#include "engine/furrball/furrball.h"
#include "engine/furrball/sync.h"

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
  // Runs job(context) soon on another thread (a NodeJob); false if it
  // cannot be queued, and then the caller runs it.
  virtual bool RunSoon(void (*job)(void* context), void* context) = 0;
};

class ChunkedValues {
 public:
  // `page_size`: the pages' size (it sets the chunk size); `write_id_base`:
  // a random number drawn at start-up (see the protocol, step 1);
  // `retired_bytes_limit`: the most chunk bytes kept for readers (Grace).
  ChunkedValues(ChunkStore* store, uint32_t page_size, uint64_t write_id_base,
                uint64_t retired_bytes_limit);

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
  // Retires the chunks named by a head's bytes (a replaced or deleted
  // head, as the shard reported it under `h`); nothing if empty.
  void RetireChunksOf(const HashPair& h, std::string_view head_bytes);
  // Deletes the retired chunks no reader can need any more (Grace).
  void Drain();

  // The retired writes not yet deleted, for tests.
  size_t RetiredForTesting();

 private:
  struct Retired {
    HashPair h;
    uint64_t write_id;
    uint64_t epoch;
    uint64_t bytes;
    uint32_t chunk_count;
  };

  // Enters and leaves a read section; Enter returns the epoch to leave.
  uint64_t EnterRead();
  void LeaveRead(uint64_t epoch);
  // Has Drain run soon, by a worker, unless one is queued already.
  void ScheduleDrain();
  static void DrainJob(void* self);
  // Deletes chunks [0, count) of write `write_id`.
  void DeleteChunks(const HashPair& h, uint64_t write_id, uint32_t count);

  ChunkStore* const store_;
  const uint32_t max_whole_;
  const uint32_t chunk_bytes_;
  const uint64_t retired_bytes_limit_;
  std::atomic<uint64_t> next_write_id_;

  // Grace (the protocol above). The counters are written by every chunked
  // read, so each has a cache line of its own.
  alignas(64) std::atomic<uint64_t> epoch_{2};
  struct alignas(64) ReaderCount {
    std::atomic<uint64_t> n{0};
  };
  ReaderCount readers_[2];
  alignas(64) std::atomic<uint64_t> retired_count_{0};  // retired_.size()
  std::atomic<bool> drain_scheduled_{false};
  Mutex mu_;
  std::deque<Retired> retired_ ABSL_GUARDED_BY(mu_);
  uint64_t retired_bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace furrball_internal
}  // namespace furrballs

#endif  // FURRBALLS_ENGINE_FURRBALL_CHUNKED_VALUE_H_
