// engine/arc/concurrent_arc_fuzz.cc: libFuzzer target that runs
// ConcurrentARC operation sequences chosen by the input against a model of
// the resident keys and, while the sequence is one plain ARC can express,
// against the paper's ARC (reference_arc.h) (docs/fuzzing.md).
//
// Thread safety: single-threaded, as libFuzzer calls it.
//
// Input: a capacity byte (c = 1-64), then two bytes per operation: the
// operation and a key number (keys collide on purpose, as in cmap_fuzz).
//
// Operation 7 also grows c (Grow by 1-64, up to 1,024) and steps a growth
// (GrowStep of 1-8 moves), so every other operation also runs while the
// table and ARC's index and arena are migrating; a growth is also a
// change of c for the reference ARC (ReferenceArc::Grow). It also
// shrinks c (Shrink by 1-64; refused during a growth), whose trim,
// compaction and copy the same GrowSteps and Sets then drive; the
// reference ARC is left behind from the first shrink (its Shrink models one
// driven to its end before the next access, which the equivalence tests
// check), the model of residents is not.
//
// Checked after every operation: the resident keys and values are the
// model's (every eviction goes through on_evict exactly once with the value
// the model holds, and only Set and ForceEvictOne evict), Find/Peek agree
// with the model, ARC's bounds and the table/list agreement hold
// (CheckInvariants). ColdestKeys must list what ForceEvictOne then evicts,
// in order. While only Sets, Finds and UpdateInPlaces have run, a Set is
// ARC's Access of the key and a hit an Access that hits, so the reference
// must agree on every eviction (key and the ghost list it goes to), on p
// and on every key's list. Erase and ForceEvictOne have no counterpart in
// the paper's ARC: from the first one on, only the model is checked.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/arc/concurrent_arc.h"
#include "engine/arc/reference_arc.h"
#include "engine/common/colliding_keys.h"

namespace furrballs {
namespace {

using Arc = ConcurrentARC<uint64_t>;

void Check(bool ok, const char* what, int op) {
  if (!ok) {
    std::fprintf(stderr, "concurrent_arc_fuzz: op %d: %s\n", op, what);
    std::abort();
  }
}

class Runner {
 public:
  explicit Runner(uint32_t capacity) : capacity_(capacity), ref_(capacity) {
    Arc::Options options;
    options.capacity = capacity;
    options.on_evict = [this](const HashPair& h, const uint64_t& v) {
      evicted_.emplace_back(h, v);
    };
    absl::StatusOr<std::unique_ptr<Arc>> arc = Arc::Create(options);
    Check(arc.ok(), "Create failed", -1);
    arc_ = *std::move(arc);
  }

  void Run(const uint8_t* ops, size_t n) {
    for (size_t i = 0; i + 1 < n; i += 2) {
      op_ = static_cast<int>(i / 2);
      const uint8_t k = ops[i + 1];
      evicted_.clear();
      switch (ops[i] % 8) {
        case 0: Access(k); break;
        case 1: Set(k); break;
        case 2: Find(k); break;
        case 3: Update(k); break;
        case 4: Peek(k); break;
        case 5: Erase(k); break;
        case 6: ForceEvict(1 + ops[i] / 8 % 4); break;
        case 7:
          switch (ops[i] >> 4 & 3) {
            case 2: Grow(k); break;
            case 3: GrowStep(1 + k % 8); break;
            case 1:
              if (ops[i] & 8) { Shrink(k); break; }
              [[fallthrough]];
            default:
              if (ops[i] & 8) {
                arc_->DrainPromotions();
              } else {
                Check(arc_->TryDrainPromotions(), "TryDrain failed unlocked",
                      op_);
              }
          }
          break;
      }
      Check(evicted_.empty(), "an eviction nobody accounted for", op_);
      Check(arc_->size() == model_.size(), "size differs from the model", op_);
      if (!arc_->growing()) resident_limit_ = capacity_;
      Check(model_.size() <= resident_limit_, "more residents than capacity", op_);
      const std::string bad = arc_->CheckInvariants();
      if (!bad.empty()) {
        std::fprintf(stderr, "concurrent_arc_fuzz: op %d: %s\n", op_,
                     bad.c_str());
        std::abort();
      }
    }
    Final();
  }

 private:
  bool Resident(uint8_t k) const { return model_.count(k) != 0; }

  // The evictions of the last write must be exactly what the reference's
  // Access reported (when it is in sync), each with the model's value.
  void TakeEvictions(const ArcAccessResult* want) {
    if (want != nullptr) {
      Check(evicted_.size() == (want->evicted ? 1u : 0u),
            "eviction count differs from the reference ARC", op_);
    }
    for (const auto& [h, v] : evicted_) {
      const uint8_t k = CollidingKeyNumber(h);
      const auto it = model_.find(k);
      Check(it != model_.end(), "evicted a key that was not resident", op_);
      Check(it->second == v, "evicted with another value", op_);
      model_.erase(it);
      if (want != nullptr) {
        Check(h == ArcTableKey(want->evicted_fingerprint),
              "evicted another key than the reference", op_);
        Check(arc_->Where(h) == want->evicted_to,
              "the victim went to another list than the reference's", op_);
      }
    }
    evicted_.clear();
  }

  void Set(uint8_t k) {
    const uint64_t v = ++next_value_;
    const bool resident = Resident(k);
    ArcAccessResult want;
    if (in_sync_) want = ref_.Access(CollidingKey(k));
    const CMapSetResult r = arc_->Set(CollidingKey(k), v);
    Check(r.err == Error::kOk, "Set failed single-threaded", op_);
    bool self_trimmed = false;
    // on_evict names keys as the table does ({h2, h2}: ArcTableKey).
    const HashPair table_key = ArcTableKey(CollidingKey(k).h2);
    for (const auto& e : evicted_) self_trimmed |= e.first == table_key;
    Check(r.inserted == (!resident || self_trimmed), "Set's inserted flag is wrong", op_);
    if (in_sync_) {
      Check(want.hit == resident, "the reference disagrees on residency",
            op_);
    }
    TakeEvictions(in_sync_ ? &want : nullptr);
    model_[k] = v;
    if (in_sync_) Check(arc_->Shape().p == ref_.p(), "p differs", op_);
  }

  // How the engine uses it: Find, and Set on a miss.
  void Access(uint8_t k) {
    if (!Find(k)) Set(k);
  }

  bool Find(uint8_t k) {
    const std::optional<uint64_t> got = arc_->Find(CollidingKey(k));
    const auto it = model_.find(k);
    if (it == model_.end()) {
      Check(!got.has_value(), "Find hit a key that is not resident", op_);
      return false;
    }
    Check(got.has_value() && *got == it->second, "Find missed or misread",
          op_);
    if (in_sync_) {
      Check(ref_.Access(CollidingKey(k)).hit, "the reference missed a hit", op_);
    }
    return true;
  }

  void Update(uint8_t k) {
    const uint64_t v = ++next_value_;
    const auto it = model_.find(k);
    const Error err = arc_->UpdateInPlace(CollidingKey(k), [&](uint64_t& value) {
      Check(it != model_.end() && value == it->second,
            "UpdateInPlace saw another value", op_);
      value = v;
    });
    if (it == model_.end()) {
      Check(err == Error::kKeyNotFound, "updated a key that is not resident",
            op_);
      return;
    }
    Check(err == Error::kOk, "could not update a resident key", op_);
    it->second = v;
    if (in_sync_) {
      Check(ref_.Access(CollidingKey(k)).hit, "the reference missed a hit", op_);
    }
  }

  void Peek(uint8_t k) {
    const std::optional<uint64_t> got = arc_->Peek(CollidingKey(k));
    const auto it = model_.find(k);
    Check(got.has_value() == (it != model_.end()) &&
              (!got.has_value() || *got == it->second),
          "Peek disagrees with the model", op_);
  }

  void Erase(uint8_t k) {
    in_sync_ = false;
    uint64_t erased = 0;
    const Error err = arc_->Erase(CollidingKey(k), &erased);
    const auto it = model_.find(k);
    if (it == model_.end()) {
      Check(err == Error::kKeyNotFound, "erased a key that is not resident",
            op_);
    } else {
      Check(err == Error::kOk && erased == it->second,
            "Erase of a resident key failed or misread", op_);
      model_.erase(it);
    }
    Check(arc_->Where(CollidingKey(k)) == ArcList::kNone,
          "an erased key is still listed (resident or ghost)", op_);
  }

  // ColdestKeys(m), then m forced evictions: they must evict those keys,
  // in that order, each into the ghost list of the list it was in.
  void ForceEvict(uint32_t m) {
    in_sync_ = false;
    std::vector<HashPair> coldest;
    arc_->ColdestKeys(m, &coldest);
    Check(coldest.size() == std::min<size_t>(m, model_.size()),
          "ColdestKeys returned too few or too many keys", op_);
    for (size_t i = 0; i < m; ++i) {
      const ArcList was =
          i < coldest.size() ? arc_->Where(coldest[i]) : ArcList::kNone;
      const ForcedEviction<uint64_t> r = arc_->ForceEvictOne();
      if (i >= coldest.size()) {
        Check(r.err == Error::kKeyNotFound && model_.empty(),
              "ForceEvictOne of an empty cache", op_);
        continue;
      }
      Check(r.err == Error::kOk, "ForceEvictOne failed", op_);
      Check(r.key == coldest[i], "evicted another key than ColdestKeys said",
            op_);
      Check(evicted_.size() == 1 && evicted_[0].first == r.key &&
                r.value.has_value() && evicted_[0].second == *r.value,
            "on_evict and the result disagree", op_);
      TakeEvictions(nullptr);
      const ArcList now = arc_->Where(r.key);
      Check((was == ArcList::kT1 && now == ArcList::kB1) ||
                (was == ArcList::kT2 && now == ArcList::kB2),
            "a forced victim went to the wrong ghost list", op_);
    }
  }

  // Grows c by 1 + k % 64 (at most to kMaxGrown); refused while growing.
  void Grow(uint8_t k) {
    const uint32_t to = capacity_ + 1 + k % 64;
    if (to > kMaxGrown) return;
    const bool was_growing = arc_->growing();
    const absl::Status s = arc_->Grow(to);
    if (was_growing) {
      Check(s.code() == absl::StatusCode::kInvalidArgument,
            "Grow during a growth was not refused", op_);
      return;
    }
    Check(s.ok(), "Grow failed", op_);
    Check(arc_->capacity() == to && arc_->growing(),
          "capacity() or growing() wrong after Grow", op_);
    capacity_ = to;
    if (in_sync_) ref_.Grow(to);
  }

  void Shrink(uint8_t k) {
    const uint32_t d = 1 + k % 64;
    if (d >= capacity_) return;
    const uint32_t to = capacity_ - d;
    const bool was_growing = arc_->growing();
    const absl::Status s = arc_->Shrink(to);
    if (was_growing) {
      Check(s.code() == absl::StatusCode::kInvalidArgument,
            "Shrink during a growth was not refused", op_);
      return;
    }
    Check(s.ok(), "Shrink failed", op_);
    in_sync_ = false;
    resident_limit_ = capacity_;
    capacity_ = to;
  }

  void GrowStep(size_t moves) {
    const bool done = arc_->GrowStep(moves);
    TakeEvictions(nullptr);
    Check(done == !arc_->growing(), "GrowStep and growing() disagree", op_);
    if (done) {
      Check(arc_->policy_memory_bytes() == ArcFlatLists<>::BytesFor(capacity_),
            "ARC holds more than BytesFor(c) after a growth", op_);
    }
  }

  void Final() {
    op_ = -1;
    while (!arc_->GrowStep(3)) {
    }
    TakeEvictions(nullptr);
    arc_->DrainPromotions();
    for (int k = 0; k < 256; ++k) {
      const HashPair h = CollidingKey(static_cast<uint8_t>(k));
      const ArcList where = arc_->Where(h);
      Check(IsResident(where) == Resident(static_cast<uint8_t>(k)),
            "a key's residency differs from the model", op_);
      if (in_sync_) {
        Check(where == ref_.Where(h), "a key is in another list than in the "
                                      "reference ARC", op_);
      }
    }
    const ConcurrentArcStats s = arc_->stats();
    Check(s.promotions_dropped == 0 && s.abandoned == 0,
          "a single-threaded run dropped a promotion or abandoned a write",
          op_);
  }

  static constexpr uint32_t kMaxGrown = 1024;

  uint32_t capacity_;
  uint32_t resident_limit_ = capacity_;
  std::unique_ptr<Arc> arc_;
  ReferenceArc ref_;
  bool in_sync_ = true;  // only operations the paper's ARC has, so far
  std::unordered_map<uint8_t, uint64_t> model_;  // the resident keys
  std::vector<std::pair<HashPair, uint64_t>> evicted_;  // by on_evict
  uint64_t next_value_ = 0;
  int op_ = 0;
};

}  // namespace
}  // namespace furrballs

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  furrballs::Runner(1 + data[0] % 64).Run(data + 1, size - 1);
  return 0;
}
