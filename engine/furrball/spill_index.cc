#include "engine/furrball/spill_index.h"

#include <utility>

namespace furrballs {
namespace furrball_internal {

bool SpillIndex::Lookup(const HashPair& h, SpilledKey* out) const {
  if (size() == 0) return false;
  const Shard& s = ShardOf(h);
  MutexLock l(&s.mu);
  auto it = s.keys.find(h);
  if (it == s.keys.end()) return false;
  *out = it->second;
  return true;
}

void SpillIndex::Add(const HashPair& h, const SpilledKey& key) {
  // The page is counted before the entry is visible, so that a Take of it
  // racing this Add never releases a page that was not retained yet.
  Retain(key.page_id);
  SpilledKey old;
  bool replaced = false;
  {
    Shard& s = ShardOf(h);
    MutexLock l(&s.mu);
    auto [it, inserted] = s.keys.try_emplace(h, key);
    if (!inserted) {
      old = it->second;
      replaced = true;
      it->second = key;
    } else {
      size_.fetch_add(1, std::memory_order_relaxed);
    }
    NoteExpiry(replaced ? old.expiry_ms : 0, key.expiry_ms);
  }
  if (replaced) Release(old.page_id);
}

bool SpillIndex::Take(const HashPair& h, SpilledKey* out) {
  if (size() == 0) return false;
  SpilledKey taken;
  {
    Shard& s = ShardOf(h);
    MutexLock l(&s.mu);
    auto it = s.keys.find(h);
    if (it == s.keys.end()) return false;
    taken = it->second;
    s.keys.erase(it);
    size_.fetch_sub(1, std::memory_order_release);  // see size()
    NoteExpiry(taken.expiry_ms, 0);
  }
  Release(taken.page_id);
  if (out != nullptr) *out = taken;
  return true;
}

bool SpillIndex::TakeIf(const HashPair& h, const SpilledKey& expected) {
  {
    Shard& s = ShardOf(h);
    MutexLock l(&s.mu);
    auto it = s.keys.find(h);
    if (it == s.keys.end() || !(it->second == expected)) return false;
    s.keys.erase(it);
    size_.fetch_sub(1, std::memory_order_release);  // see size()
    NoteExpiry(expected.expiry_ms, 0);
  }
  Release(expected.page_id);
  return true;
}

bool SpillIndex::TakeIfOlder(const HashPair& h, uint64_t version) {
  if (size() == 0) return false;
  SpilledKey taken;
  {
    Shard& s = ShardOf(h);
    MutexLock l(&s.mu);
    auto it = s.keys.find(h);
    if (it == s.keys.end() || it->second.version >= version) return false;
    taken = it->second;
    s.keys.erase(it);
    size_.fetch_sub(1, std::memory_order_release);  // see size()
    NoteExpiry(taken.expiry_ms, 0);
  }
  Release(taken.page_id);
  return true;
}

bool SpillIndex::SetExpiry(const HashPair& h, uint64_t expiry_ms) {
  Shard& s = ShardOf(h);
  MutexLock l(&s.mu);
  auto it = s.keys.find(h);
  if (it == s.keys.end()) return false;
  NoteExpiry(it->second.expiry_ms, expiry_ms);
  it->second.expiry_ms = expiry_ms;
  return true;
}

void SpillIndex::Retain(uint64_t page_id) {
  MutexLock l(&pages_mu_);
  ++page_keys_[page_id];
}

void SpillIndex::Release(uint64_t page_id) {
  MutexLock l(&pages_mu_);
  auto it = page_keys_.find(page_id);
  if (it == page_keys_.end()) return;
  if (--it->second == 0) {
    page_keys_.erase(it);
    gone_pages_.erase(page_id);
    dead_pages_.push_back(page_id);
  }
}

void SpillIndex::MarkPagesGone(const std::vector<uint64_t>& page_ids) {
  MutexLock l(&pages_mu_);
  for (uint64_t id : page_ids) {
    if (page_keys_.count(id) != 0) gone_pages_.insert(id);
  }
}

std::vector<std::pair<HashPair, SpilledKey>> SpillIndex::FindStale(
    uint64_t now_ms, size_t max_entries, SweepCursor* cursor) {
  std::vector<std::pair<HashPair, SpilledKey>> stale;
  std::unordered_set<uint64_t> gone;
  {
    MutexLock l(&pages_mu_);
    gone = gone_pages_;
  }
  if (size() == 0 ||
      (gone.empty() && expiring_.load(std::memory_order_relaxed) <= 0)) {
    return stale;
  }
  // Bucket by bucket, so that a slice ends where the next one starts; a
  // rehash in between only makes a slice look at some entries twice or
  // skip some until the next round.
  size_t seen = 0;
  for (size_t shards = 0; shards <= kShards && seen < max_entries; ++shards) {
    Shard& s = shards_[cursor->shard % kShards];
    {
      MutexLock l(&s.mu);
      const size_t buckets = s.keys.bucket_count();
      for (; cursor->bucket < buckets && seen < max_entries; ++cursor->bucket) {
        for (auto it = s.keys.begin(cursor->bucket);
             it != s.keys.end(cursor->bucket); ++it) {
          ++seen;
          if (it->second.Expired(now_ms) || gone.count(it->second.page_id)) {
            stale.emplace_back(it->first, it->second);
          }
        }
      }
      if (cursor->bucket < buckets) break;  // the slice ended in this shard
    }
    cursor->shard = (cursor->shard + 1) % kShards;
    cursor->bucket = 0;
  }
  return stale;
}

std::vector<uint64_t> SpillIndex::TakeDeadPages() {
  MutexLock l(&pages_mu_);
  return std::exchange(dead_pages_, {});
}

void SpillIndex::RequeueDeadPage(uint64_t page_id) {
  MutexLock l(&pages_mu_);
  if (page_keys_.count(page_id) == 0) dead_pages_.push_back(page_id);
}

bool SpillIndex::HasKeys(uint64_t page_id) {
  MutexLock l(&pages_mu_);
  return page_keys_.count(page_id) != 0;
}

std::vector<std::pair<HashPair, SpilledKey>> SpillIndex::Snapshot() const {
  std::vector<std::pair<HashPair, SpilledKey>> out;
  for (const Shard& s : shards_) {
    MutexLock l(&s.mu);
    for (const auto& [h, k] : s.keys) out.emplace_back(h, k);
  }
  return out;
}

}  // namespace furrball_internal
}  // namespace furrballs
