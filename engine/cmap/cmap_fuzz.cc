// engine/cmap/cmap_fuzz.cc: libFuzzer target that runs CMap operation
// sequences chosen by the input against a std::unordered_map model
// (docs/fuzzing.md).
//
// Thread safety: single-threaded, as libFuzzer calls it. The windows in
// which another thread could interleave (between a Set's probe and its
// claim of a slot, inside an UpdateInPlace) are driven deterministically
// through CMapTestPeer, so the fuzzer explores those interleavings too.
//
// Input: a configuration byte (value layout inline or packed, SSE2 or
// portable groups, capacity 1-64), then two bytes per operation: the
// operation and a key number. Key numbers map to HashPairs that collide
// (engine/common/colliding_keys.h): home groups and control bytes are
// shared, so probes run long, overflow counts and tombstones are
// exercised, and the full fingerprint decides. After every operation the map must agree with the model on that
// key; at the end on every key, and its own accounting must hold (live
// count, occupied control bytes, overflow counts back to zero once empty,
// the sentinel group intact).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <unordered_map>
#include <vector>

#include "engine/cmap/cmap.h"
#include "engine/cmap/internal/cmap_test_peer.h"
#include "engine/common/colliding_keys.h"

namespace furrballs {
namespace {

using cmap_internal::CMapTestPeer;

struct InlineValue {  // 16 + 16 bytes fit the slot's cache line
  uint64_t a = 0, b = 0;
};
struct PackedValue {  // too large to inline: the packed value array
  uint64_t words[7] = {};
};

template <typename V>
V MakeValue(uint64_t n) {
  V v;
  if constexpr (sizeof(V) == sizeof(InlineValue)) {
    v.a = n;
    v.b = ~n;
  } else {
    for (uint64_t i = 0; i < 7; ++i) v.words[i] = n * 7 + i;
  }
  return v;
}
template <typename V>
uint64_t NumberOf(const V& v) {
  if constexpr (sizeof(V) == sizeof(InlineValue)) {
    return v.a;
  } else {
    return v.words[0] / 7;
  }
}

void Check(bool ok, const char* what, int op) {
  if (!ok) {
    std::fprintf(stderr, "cmap_fuzz: op %d: %s\n", op, what);
    std::abort();
  }
}

template <typename V, typename Group>
class Runner {
 public:
  explicit Runner(size_t capacity) : map_(capacity) {}

  void Run(const uint8_t* ops, size_t n) {
    Check(map_.ok(), "construction failed", -1);
    for (size_t i = 0; i + 1 < n; i += 2) {
      op_ = static_cast<int>(i / 2);
      const uint8_t k = ops[i + 1];
      switch (ops[i] % 8) {
        case 0: Set(k); break;
        case 1: Find(k); break;
        case 2: Erase(k); break;
        case 3: Update(k); break;
        case 4:  // another key claims a slot inside k's insert window
          PausedSet(k, [&] { Set(static_cast<uint8_t>(ops[i] >> 3)); });
          break;
        case 5:  // the same key inserted inside its own insert window
          PausedSet(k, [&] { Set(k); });
          break;
        case 6:  // another key erased inside k's insert window
          PausedSet(k, [&] { Erase(static_cast<uint8_t>(ops[i] >> 3)); });
          break;
        case 7: UpdateBlocksWriters(k); break;
      }
      Expect(k);
    }
    Final();
  }

 private:
  using Map = CMap<V, Group>;

  bool Present(uint8_t k) const { return model_.count(k) != 0; }

  // The map's answer for k must be the model's.
  void Expect(uint8_t k) {
    const std::optional<V> got = map_.Find(CollidingKey(k));
    const auto it = model_.find(k);
    if (it == model_.end()) {
      Check(!got.has_value(), "Find hit a key the model does not hold", op_);
    } else {
      Check(got.has_value(), "Find missed a key the model holds", op_);
      Check(NumberOf(*got) == it->second, "Find returned another value", op_);
    }
  }

  void Set(uint8_t k) {
    const uint64_t n = ++next_value_;
    const bool present = Present(k);
    const CMapSetResult r = map_.Set(CollidingKey(k), MakeValue<V>(n));
    if (!present && model_.size() == map_.capacity()) {
      Check(r.err == Error::kCacheFull, "a full map admitted a new key", op_);
      return;
    }
    Check(r.err == Error::kOk, "Set failed below capacity", op_);
    Check(r.inserted == !present, "Set's inserted flag is wrong", op_);
    model_[k] = n;
  }

  void Find(uint8_t k) { Expect(k); }

  void Erase(uint8_t k) {
    const FindAndEraseResult<V> r = map_.FindAndEraseByHash(CollidingKey(k));
    const auto it = model_.find(k);
    if (it == model_.end()) {
      Check(r.err == Error::kKeyNotFound && !r.value.has_value(),
            "erased a key the model does not hold", op_);
      return;
    }
    Check(r.err == Error::kOk && r.value.has_value(),
          "could not erase a key the model holds", op_);
    Check(NumberOf(*r.value) == it->second, "erase returned another value",
          op_);
    model_.erase(it);
  }

  void Update(uint8_t k) {
    const uint64_t n = ++next_value_;
    const auto it = model_.find(k);
    bool ran = false;
    const Error err = map_.UpdateInPlace(CollidingKey(k), [&](V& v) {
      ran = true;
      Check(it != model_.end() && NumberOf(v) == it->second,
            "UpdateInPlace saw another value", op_);
      v = MakeValue<V>(n);
    });
    if (it == model_.end()) {
      Check(err == Error::kKeyNotFound && !ran,
            "updated a key the model does not hold", op_);
      return;
    }
    Check(err == Error::kOk && ran, "could not update a held key", op_);
    it->second = n;
  }

  // Set of an absent k with `between` run after its probe and before it
  // claims a slot (what a concurrent writer may do there). Its outcome may
  // legitimately be kAbandonedSet (the slot or the key was taken meanwhile)
  // or kCacheFull; either way nothing of this Set may remain.
  template <typename Fn>
  void PausedSet(uint8_t k, Fn&& between) {
    if (Present(k)) return;  // SetWithPause REQUIRES an absent key
    const uint64_t n = ++next_value_;
    const CMapSetResult r =
        CMapTestPeer::SetWithPause(map_, CollidingKey(k), MakeValue<V>(n), between);
    if (r.err == Error::kOk) {
      Check(r.inserted, "a paused insert reported an overwrite", op_);
      Check(!Present(k), "a paused insert succeeded over the same key", op_);
      model_[k] = n;
      return;
    }
    Check(r.err == Error::kAbandonedSet || r.err == Error::kCacheFull,
          "a paused insert failed with an unexpected error", op_);
    if (r.err == Error::kCacheFull) {
      Check(model_.size() == map_.capacity(),
            "a paused insert found the map full below capacity", op_);
    }
  }

  // While UpdateInPlace holds k's slot, every other writer of k must back
  // off with kAbandonedSet and change nothing.
  void UpdateBlocksWriters(uint8_t k) {
    if (!Present(k)) return;
    const Error err = map_.UpdateInPlace(CollidingKey(k), [&](V&) {
      Check(map_.Set(CollidingKey(k), MakeValue<V>(0)).err == Error::kAbandonedSet,
            "a Set got into a slot an update holds", op_);
      Check(map_.FindAndEraseByHash(CollidingKey(k)).err == Error::kAbandonedSet,
            "an erase got into a slot an update holds", op_);
    });
    Check(err == Error::kOk, "could not update a held key", op_);
  }

  void Final() {
    op_ = -1;
    for (int k = 0; k < 256; ++k) Expect(static_cast<uint8_t>(k));
    Check(map_.size() == model_.size(), "live count differs from the model",
          op_);
    Check(CMapTestPeer::CountCtrl(map_, cmap_internal::IsOccupied) ==
              model_.size(),
          "occupied control bytes differ from the model", op_);
    Check(CMapTestPeer::SentinelIntact(map_), "the sentinel group changed",
          op_);
    std::vector<uint8_t> keys;
    for (const auto& [k, n] : model_) keys.push_back(k);
    for (uint8_t k : keys) Erase(k);
    Check(map_.size() == 0, "not empty after erasing every key", op_);
    Check(CMapTestPeer::OverflowTotal(map_) == 0,
          "overflow counts left after erasing every key", op_);
  }

  Map map_;
  std::unordered_map<uint8_t, uint64_t> model_;  // key number -> value number
  uint64_t next_value_ = 0;
  int op_ = 0;
};

template <typename V>
void RunWith(bool portable, size_t capacity, const uint8_t* ops, size_t n) {
#if defined(__SSE2__)
  if (!portable) {
    Runner<V, cmap_internal::GroupSse2>(capacity).Run(ops, n);
    return;
  }
#endif
  Runner<V, cmap_internal::GroupPortable>(capacity).Run(ops, n);
}

}  // namespace
}  // namespace furrballs

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t config = data[0];
  const bool packed = (config & 1) != 0;
  const bool portable = (config & 2) != 0;
  const size_t capacity = 1 + (config >> 2);  // 1..64
  if (packed) {
    furrballs::RunWith<furrballs::PackedValue>(portable, capacity, data + 1,
                                               size - 1);
  } else {
    furrballs::RunWith<furrballs::InlineValue>(portable, capacity, data + 1,
                                               size - 1);
  }
  return 0;
}
