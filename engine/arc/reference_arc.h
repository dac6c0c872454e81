// engine/arc/reference_arc.h: a plain ARC, written straight from Megiddo &
// Modha's Fig. 4 (FAST 2003) on std::list + std::unordered_map, used by the
// tests as the oracle for the production ARC and by the benchmark as the
// "ARC (linked)" baseline. Test-only.
//
// Thread safety: thread-compatible (REQUIRES external synchronization).
//
// Nothing here is optimized or clever on purpose: each branch is one line of
// the paper, in the paper's order, with the paper's conditions (REPLACE when
// the directory holds >= c pages, not "when the cache is full"). The only
// interpretation is integer p with floor-division deltas, which the production
// core shares (see arc_policy.h).
//
// Grow(c') is the one addition the paper does not have: c becomes c' and the
// lists and p stay. The paper's invariant "if the directory holds >= c pages
// the cache holds exactly c" then no longer holds (ghosts remain while the
// cache has room), and its REPLACE conditions would evict from a cache that
// is not full, so it could never fill to c'. So a REPLACE is skipped while the
// cache holds fewer than c pages, which changes nothing while the invariant
// holds (on every trace without a Grow) and lets the grown cache fill first.
//
// Shrink(c') is the other addition: c becomes c', p at most c'; residents
// are evicted one at a time as a forced eviction does (the victim REPLACE
// would pick for a request not in B2, to B1 or B2), until c' remain; then
// the LRU of B1 is deleted while |T1| + |B1| > c', and the LRU of B2 (of B1
// when B2 is empty) while the directory holds more than 2c'. The paper's
// bounds then hold for c', and the paper's algorithm runs with it.
#ifndef FURRBALLS_ENGINE_ARC_REFERENCE_ARC_H_
#define FURRBALLS_ENGINE_ARC_REFERENCE_ARC_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <list>
#include <unordered_map>
#include <vector>

#include "engine/arc/arc_flat_list.h"
#include "engine/arc/arc_policy.h"
#include "engine/common/hash_pair.h"

namespace furrballs {

struct HashPairHasher {
  size_t operator()(const HashPair& h) const { return h.h2; }
};

class ReferenceArc {
 public:
  explicit ReferenceArc(size_t capacity) : c_(capacity) {
    where_.reserve(2 * capacity);
  }

  ArcAccessResult Access(const HashPair& x) {
    ArcAccessResult r;
    last_ = &r;
    const auto it = where_.find(x);
    const ArcList l = it == where_.end() ? ArcList::kNone : it->second.list;

    if (l == ArcList::kT1 || l == ArcList::kT2) {
      // Case I: a hit. Move x to MRU of T2.
      r.hit = true;
      MoveToMru(x, ArcList::kT2);
    } else if (l == ArcList::kB1) {
      // Case II: adapt toward recency, REPLACE, fetch x into T2.
      const size_t delta = b1_.size() >= b2_.size() ? 1 : b2_.size() / b1_.size();
      p_ = std::min(p_ + delta, c_);
      Replace(x);
      MoveToMru(x, ArcList::kT2);
    } else if (l == ArcList::kB2) {
      // Case III: adapt toward frequency, REPLACE, fetch x into T2.
      const size_t delta = b2_.size() >= b1_.size() ? 1 : b1_.size() / b2_.size();
      p_ = p_ >= delta ? p_ - delta : 0;
      Replace(x);
      MoveToMru(x, ArcList::kT2);
    } else {
      // Case IV: a complete miss.
      const size_t l1 = t1_.size() + b1_.size();
      const size_t total = l1 + t2_.size() + b2_.size();
      if (l1 == c_) {
        if (t1_.size() < c_) {
          DeleteLru(ArcList::kB1);
          Replace(x);
        } else {
          // B1 is empty: delete LRU of T1 and remove it from the cache.
          const HashPair victim = t1_.back();
          DeleteLru(ArcList::kT1);
          Record(victim, ArcList::kNone);
        }
      } else if (total >= c_) {
        if (total == 2 * c_) DeleteLru(ArcList::kB2);
        Replace(x);
      }
      PushMru(x, ArcList::kT1);
    }
    last_ = nullptr;
    return r;
  }

  // c grows to `capacity` (see the file comment). REQUIRES: capacity >= c.
  void Grow(size_t capacity) { c_ = capacity; }

  // c shrinks to `capacity` (see the file comment); returns the evicted
  // keys, in order. REQUIRES: 0 < capacity <= c.
  std::vector<HashPair> Shrink(size_t capacity) {
    c_ = capacity;
    p_ = std::min(p_, c_);
    std::vector<HashPair> evicted;
    while (t1_.size() + t2_.size() > c_) {
      const bool from_t1 = !t1_.empty() && (t1_.size() > p_ || t2_.empty());
      const HashPair victim = from_t1 ? t1_.back() : t2_.back();
      MoveToMru(victim, from_t1 ? ArcList::kB1 : ArcList::kB2);
      evicted.push_back(victim);
    }
    while (t1_.size() + b1_.size() > c_) DeleteLru(ArcList::kB1);
    while (t1_.size() + t2_.size() + b1_.size() + b2_.size() > 2 * c_) {
      DeleteLru(b2_.empty() ? ArcList::kB1 : ArcList::kB2);
    }
    return evicted;
  }

  size_t p() const { return p_; }
  size_t size(ArcList l) const { return List(l).size(); }
  ArcList Where(const HashPair& x) const {
    const auto it = where_.find(x);
    return it == where_.end() ? ArcList::kNone : it->second.list;
  }
  // MRU first.
  std::vector<HashPair> Contents(ArcList l) const {
    return std::vector<HashPair>(List(l).begin(), List(l).end());
  }

 private:
  struct Position {
    ArcList list;
    std::list<HashPair>::iterator it;
  };

  // REPLACE(x, p) from the paper, skipped while the cache has room (only
  // after a Grow; see the file comment).
  void Replace(const HashPair& x) {
    if (t1_.size() + t2_.size() < c_) return;
    const bool x_in_b2 = Where(x) == ArcList::kB2;
    if (!t1_.empty() && ((x_in_b2 && t1_.size() == p_) || t1_.size() > p_)) {
      const HashPair victim = t1_.back();
      MoveToMru(victim, ArcList::kB1);
      Record(victim, ArcList::kB1);
    } else {
      const HashPair victim = t2_.back();
      MoveToMru(victim, ArcList::kB2);
      Record(victim, ArcList::kB2);
    }
  }

  void Record(const HashPair& victim, ArcList to) {
    last_->evicted = true;
    last_->evicted_fingerprint = victim.h2;
    last_->evicted_to = to;
  }

  std::list<HashPair>& List(ArcList l) {
    switch (l) {
      case ArcList::kT1: return t1_;
      case ArcList::kT2: return t2_;
      case ArcList::kB1: return b1_;
      default: return b2_;
    }
  }
  const std::list<HashPair>& List(ArcList l) const {
    return const_cast<ReferenceArc*>(this)->List(l);
  }

  void PushMru(const HashPair& x, ArcList l) {
    List(l).push_front(x);
    where_[x] = Position{l, List(l).begin()};
  }
  void MoveToMru(const HashPair& x, ArcList l) {
    Position& pos = where_.at(x);
    List(l).splice(List(l).begin(), List(pos.list), pos.it);
    pos.list = l;
    pos.it = List(l).begin();
  }
  void DeleteLru(ArcList l) {
    where_.erase(List(l).back());
    List(l).pop_back();
  }

  size_t c_;
  size_t p_ = 0;
  std::list<HashPair> t1_, t2_, b1_, b2_;
  std::unordered_map<HashPair, Position, HashPairHasher> where_;
  ArcAccessResult* last_ = nullptr;
};

}  // namespace furrballs

#endif  // FURRBALLS_ENGINE_ARC_REFERENCE_ARC_H_
