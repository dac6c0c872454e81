#include "engine/furrball/chunked_value.h"

#include <algorithm>
#include <cstring>

namespace furrballs {
namespace furrball_internal {
namespace {

// A page holds at least this many of the largest whole entries, so that a
// page's unusable tail stays small and a drain or an eviction of one page
// never has to move or drop one huge value.
constexpr uint32_t kWholeEntriesPerPage = 8;
// How many times a Get follows a head that another write replaced while it
// read the chunks, before it answers a miss.
constexpr int kMaxHeadReads = 4;

template <typename T>
void Put(char*& p, T v) {
  std::memcpy(p, &v, sizeof(v));
  p += sizeof(v);
}

template <typename T>
T Take(const char*& p) {
  T v;
  std::memcpy(&v, p, sizeof(v));
  p += sizeof(v);
  return v;
}

}  // namespace

uint32_t ChunkedHead::ChunkSize(uint32_t i) const {
  if (i + 1 < chunk_count) return chunk_bytes;
  return static_cast<uint32_t>(value_size - uint64_t{chunk_bytes} * i);
}

std::string EncodeChunkedHead(const ChunkedHead& head) {
  std::string out(kChunkedHeadBytes, '\0');
  char* p = out.data();
  Put(p, head.value_size);
  Put(p, head.chunk_count);
  Put(p, head.chunk_bytes);
  Put(p, head.write_id);
  return out;
}

std::optional<ChunkedHead> DecodeChunkedHead(std::string_view bytes) {
  if (bytes.size() != kChunkedHeadBytes) return std::nullopt;
  const char* p = bytes.data();
  ChunkedHead head;
  head.value_size = Take<uint64_t>(p);
  head.chunk_count = Take<uint32_t>(p);
  head.chunk_bytes = Take<uint32_t>(p);
  head.write_id = Take<uint64_t>(p);
  // The last chunk holds 1..chunk_bytes bytes.
  const uint64_t full = uint64_t{head.chunk_bytes} * head.chunk_count;
  if (head.chunk_count == 0 || head.chunk_bytes == 0 ||
      head.value_size > full || head.value_size <= full - head.chunk_bytes) {
    return std::nullopt;
  }
  return head;
}

ChunkKey MakeChunkKey(const HashPair& h, uint64_t write_id, uint32_t index) {
  ChunkKey key;
  char* p = key.data();
  Put(p, h.h1);
  Put(p, h.h2);
  Put(p, write_id);
  Put(p, index);
  return key;
}

uint32_t MaxWholeEntryBytes(uint32_t page_size) {
  return page_size / kWholeEntriesPerPage;
}

uint32_t ChunkBytesFor(uint32_t page_size) {
  const uint64_t room = MaxWholeEntryBytes(page_size) - kEntryHeaderBytes -
                        PayloadSize(kChunkKeyBytes, 0);
  return static_cast<uint32_t>(room & ~uint64_t{kEntryAlignment - 1});
}

ChunkedValues::ChunkedValues(ChunkStore* store, uint32_t page_size,
                             uint64_t write_id_base,
                             uint64_t retired_bytes_limit)
    : store_(store),
      max_whole_(MaxWholeEntryBytes(page_size)),
      chunk_bytes_(ChunkBytesFor(page_size)),
      retired_bytes_limit_(retired_bytes_limit),
      next_write_id_(write_id_base) {}

SetResult ChunkedValues::Set(const KeyRef& key, std::string_view value,
                             const WriteOptions& options) {
  ChunkedHead head;
  head.value_size = value.size();
  head.chunk_bytes = chunk_bytes_;
  head.chunk_count =
      static_cast<uint32_t>((value.size() + chunk_bytes_ - 1) / chunk_bytes_);
  // Relaxed: only uniqueness matters, which the atomic increment gives.
  head.write_id = next_write_id_.fetch_add(1, std::memory_order_relaxed);
  for (uint32_t i = 0; i < head.chunk_count; ++i) {
    const ChunkKey name = MakeChunkKey(key.hash, head.write_id, i);
    const std::string_view chunk_key(name.data(), name.size());
    const SetResult r = store_->SetEntry(
        KeyRef{store_->HashOf(chunk_key), chunk_key},
        value.substr(uint64_t{chunk_bytes_} * i, head.ChunkSize(i)),
        WriteOptions{}, EntryKind::kChunk, nullptr);
    if (r.error != Error::kOk) {
      DeleteChunks(key.hash, head.write_id, i);
      return SetResult{r.error, 0};
    }
  }
  std::string replaced;
  const SetResult r = store_->SetEntry(key, EncodeChunkedHead(head), options,
                                       EntryKind::kChunkedHead, &replaced);
  if (r.error != Error::kOk) {
    // No reader saw a head naming w: its chunks go at once.
    DeleteChunks(key.hash, head.write_id, head.chunk_count);
    return r;
  }
  RetireChunksOf(key.hash, replaced);
  return r;
}

GetResult ChunkedValues::Assemble(const KeyRef& key, GetResult head_result,
                                  std::string* value, bool read_disk) {
  // The chunks of every head read from here on stay until the section ends
  // (Grace in the header); the first head was read before it.
  struct Section {
    ChunkedValues* self;
    uint64_t epoch;
    ~Section() { self->LeaveRead(epoch); }
  } section{this, EnterRead()};
  std::string assembled;
  std::string chunk;
  for (int reads = 1;; ++reads) {
    const std::optional<ChunkedHead> head = DecodeChunkedHead(*value);
    if (!head.has_value()) break;
    assembled.clear();
    assembled.reserve(head->value_size);
    bool complete = true;
    for (uint32_t i = 0; i < head->chunk_count && complete; ++i) {
      const ChunkKey name = MakeChunkKey(key.hash, head->write_id, i);
      const std::string_view chunk_key(name.data(), name.size());
      const GetResult c =
          store_->GetEntry(KeyRef{store_->HashOf(chunk_key), chunk_key},
                           &chunk, EntryKind::kChunk, nullptr, read_disk);
      if (c.on_disk) {
        value->clear();
        GetResult r;
        r.on_disk = true;
        return r;
      }
      complete = c.found && chunk.size() == head->ChunkSize(i);
      if (complete) assembled.append(chunk);
      head_result.reloaded |= c.reloaded;
    }
    if (complete) {
      value->swap(assembled);
      return head_result;
    }
    // A chunk is gone: was the head replaced meanwhile (its writer deleted
    // the old chunks), or is this value lost?
    EntryKind kind = EntryKind::kValue;
    const GetResult again =
        store_->GetEntry(key, value, EntryKind::kValue, &kind, read_disk);
    if (!again.found || again.on_disk || kind == EntryKind::kValue) {
      return again;
    }
    if (again.version == head_result.version) {
      store_->DeleteEntry(key.hash, head_result.version, nullptr);
      DeleteChunks(key.hash, head->write_id, head->chunk_count);
      break;
    }
    if (reads == kMaxHeadReads) break;
    head_result = again;
  }
  value->clear();
  return GetResult{};
}

void ChunkedValues::RetireChunksOf(const HashPair& h,
                                   std::string_view head_bytes) {
  if (head_bytes.empty()) return;
  const std::optional<ChunkedHead> head = DecodeChunkedHead(head_bytes);
  if (!head.has_value()) return;
  const Retired retired{
      h, head->write_id, 0,
      uint64_t{head->chunk_count} *
          EntryFootprint(PayloadSize(kChunkKeyBytes, head->chunk_bytes)),
      head->chunk_count};
  // Deleted at once to stay within the bound: the oldest entries (their
  // readers are the likeliest to have left), or this one if it alone is
  // larger than the bound.
  std::deque<Retired> over;
  {
    MutexLock l(&mu_);
    if (retired.bytes > retired_bytes_limit_) {
      over.push_back(retired);
    } else {
      while (retired_bytes_ + retired.bytes > retired_bytes_limit_) {
        retired_bytes_ -= retired_.front().bytes;
        over.push_back(retired_.front());
        retired_.pop_front();
      }
      retired_.push_back(retired);
      // Under mu_, so entries are in epoch order (Drain takes a prefix).
      retired_.back().epoch = epoch_.load(std::memory_order_relaxed);
      retired_bytes_ += retired.bytes;
    }
    retired_count_.store(retired_.size(), std::memory_order_seq_cst);
  }
  for (const Retired& r : over) DeleteChunks(r.h, r.write_id, r.chunk_count);
  Drain();
}

void ChunkedValues::Drain() {
  std::deque<Retired> ready;
  {
    MutexLock l(&mu_);
    if (retired_.empty()) return;
    // epoch_ is written only under mu_, so the relaxed loads read its value.
    // Advance while the newest entry needs it and the readers of the epoch
    // before the current one have left (the seq_cst load pairs with the
    // readers' seq_cst increments and decrements, see Grace).
    for (int i = 0; i < 2; ++i) {
      const uint64_t e = epoch_.load(std::memory_order_relaxed);
      if (retired_.back().epoch + 2 <= e) break;
      if (readers_[(e + 1) & 1].n.load(std::memory_order_seq_cst) != 0) break;
      epoch_.store(e + 1, std::memory_order_seq_cst);
    }
    const uint64_t e = epoch_.load(std::memory_order_relaxed);
    while (!retired_.empty() && retired_.front().epoch + 2 <= e) {
      retired_bytes_ -= retired_.front().bytes;
      ready.push_back(retired_.front());
      retired_.pop_front();
    }
    retired_count_.store(retired_.size(), std::memory_order_seq_cst);
  }
  for (const Retired& r : ready) DeleteChunks(r.h, r.write_id, r.chunk_count);
}

size_t ChunkedValues::RetiredForTesting() {
  MutexLock l(&mu_);
  return retired_.size();
}

uint64_t ChunkedValues::EnterRead() {
  for (;;) {
    const uint64_t e = epoch_.load(std::memory_order_seq_cst);
    readers_[e & 1].n.fetch_add(1, std::memory_order_seq_cst);
    // Counted under e only if epoch_ is still e after the increment: a
    // drain that advanced meanwhile may have found the counter at 0.
    if (epoch_.load(std::memory_order_seq_cst) == e) return e;
    LeaveRead(e);
  }
}

void ChunkedValues::LeaveRead(uint64_t epoch) {
  // seq_cst with the retire's store of retired_count_: see Grace.
  if (readers_[epoch & 1].n.fetch_sub(1, std::memory_order_seq_cst) == 1 &&
      retired_count_.load(std::memory_order_seq_cst) != 0) {
    ScheduleDrain();
  }
}

void ChunkedValues::ScheduleDrain() {
  if (drain_scheduled_.exchange(true, std::memory_order_seq_cst)) return;
  if (!store_->RunSoon(&ChunkedValues::DrainJob, this)) {
    drain_scheduled_.store(false, std::memory_order_seq_cst);
    Drain();
  }
}

void ChunkedValues::DrainJob(void* self) {
  ChunkedValues* values = static_cast<ChunkedValues*>(self);
  // Cleared before draining: a reader leaving during this drain, after its
  // loads of readers_, schedules another.
  values->drain_scheduled_.store(false, std::memory_order_seq_cst);
  values->Drain();
}

void ChunkedValues::DeleteChunks(const HashPair& h, uint64_t write_id,
                                 uint32_t count) {
  for (uint32_t i = 0; i < count; ++i) {
    const ChunkKey name = MakeChunkKey(h, write_id, i);
    store_->DeleteEntry(
        store_->HashOf(std::string_view(name.data(), name.size())), 0,
        nullptr);
  }
}

}  // namespace furrball_internal
}  // namespace furrballs
