// clients/cpp/rendezvous.cc: see rendezvous.h.
#include "clients/cpp/rendezvous.h"

#include <algorithm>
#include <utility>

#include <xxhash.h>

namespace furrballs::client {

Rendezvous::Rendezvous(std::vector<std::string> endpoints, uint64_t seed)
    : endpoints_(std::move(endpoints)) {
  std::sort(endpoints_.begin(), endpoints_.end());
  endpoints_.erase(std::unique(endpoints_.begin(), endpoints_.end()),
                   endpoints_.end());
  seeds_.reserve(endpoints_.size());
  for (const std::string& e : endpoints_) {
    seeds_.push_back(XXH3_64bits_withSeed(e.data(), e.size(), seed));
  }
}

uint64_t Rendezvous::Score(size_t index, absl::string_view key) const {
  return XXH3_64bits_withSeed(key.data(), key.size(), seeds_[index]);
}

size_t Rendezvous::Owner(absl::string_view key) const {
  size_t best = 0;
  uint64_t best_score = Score(0, key);
  for (size_t i = 1; i < endpoints_.size(); ++i) {
    const uint64_t s = Score(i, key);
    // Strictly greater: on a tie the earlier (smaller) endpoint keeps the key.
    if (s > best_score) {
      best = i;
      best_score = s;
    }
  }
  return best;
}

}  // namespace furrballs::client
