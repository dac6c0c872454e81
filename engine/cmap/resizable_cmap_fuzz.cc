// engine/cmap/resizable_cmap_fuzz.cc: libFuzzer target that runs
// ResizableCMap operation sequences, growth included, against a
// std::unordered_map model (docs/fuzzing.md).
//
// Thread safety: single-threaded, as libFuzzer calls it. The one window a
// concurrent writer has into a migration, an UpdateInPlace holding a slot
// the migrator wants, is driven deterministically: MigrateSome runs inside
// the update's callback.
//
// Input: a configuration byte (initial capacity 1-64 and whether tables
// release their pages with madvise), then two bytes per operation: the
// operation and a key number. Growth doubles the capacity (up to 4096 keys)
// and a shrink migrates into a smaller table of at least the live keys
// (refused while growing or below them), migration moves 1-8 keys a step,
// so the fuzzer interleaves every operation with every stage of both. After every operation the map
// must agree with the model on that key (and on the key numbers next to
// it); at the end on every key, with its accounting (live count, admission
// at capacity, overflow counts back to zero once empty).
//
// Keys collide in what the tables see. ResizableCMap keys its tables by h2
// alone (resizable_cmap.h, "Table keys"), so engine/common's CollidingKey,
// whose keys share home groups through h1, would not collide here: key k has
// h2 = (k % 3) << 57 | (k + 1) << 32 | k / 32, i.e. 3 control bytes, 8 home
// groups (the low 32 bits) and a distinct fingerprint.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <optional>
#include <unordered_map>
#include <vector>

#include "engine/cmap/internal/cmap_test_peer.h"
#include "engine/cmap/internal/test_meta.h"
#include "engine/cmap/resizable_cmap.h"

namespace furrballs {
namespace {

using cmap_internal::CMapTestPeer;
using cmap_internal::TestMeta;

HashPair FuzzKey(uint8_t k) {
  const uint64_t h2 = (uint64_t{k} % 3) << 57 | (uint64_t{k} + 1) << 32 |
                      (uint64_t{k} / 32);
  return HashPair{uint64_t{k} * 0x9e3779b97f4a7c15ull, h2};
}

constexpr size_t kMaxCapacity = 4096;

void Check(bool ok, const char* what, int op) {
  if (!ok) {
    std::fprintf(stderr, "resizable_cmap_fuzz: op %d: %s\n", op, what);
    std::abort();
  }
}

class Runner {
 public:
  Runner(size_t capacity, RawAllocator alloc)
      : alloc_(alloc), map_(capacity, alloc) {}

  void Run(const uint8_t* ops, size_t n) {
    Check(map_.ok(), "construction failed", -1);
    for (size_t i = 0; i + 1 < n; i += 2) {
      op_ = static_cast<int>(i / 2);
      const uint8_t k = ops[i + 1];
      switch (ops[i] % 8) {
        case 0: Set(k); break;
        case 1: Expect(k); break;
        case 2: Erase(k); break;
        case 3: Update(k); break;
        case 4: if (k & 1) Shrink(k); else Grow(); break;
        case 5: Migrate(1 + k % 8); break;
        case 6: map_.ReleaseRetired(); break;
        case 7: MigrateInsideUpdate(k); break;
      }
      for (int d = -1; d <= 1; ++d) Expect(static_cast<uint8_t>(k + d));
    }
    Final();
  }

 private:
  using Map = ResizableCMap<TestMeta>;

  bool Present(uint8_t k) const { return model_.count(k) != 0; }

  void Expect(uint8_t k) {
    const std::optional<TestMeta> got = map_.Find(FuzzKey(k));
    const auto it = model_.find(k);
    if (it == model_.end()) {
      Check(!got.has_value(), "Find hit a key the model does not hold", op_);
      return;
    }
    Check(got.has_value(), "Find missed a key the model holds", op_);
    Check(cmap_internal::IsWholeFor(*got, k) && got->version == it->second, "Find returned another value",
          op_);
    int calls = 0;
    const Map::VisitOutcome o = map_.TryVisit(FuzzKey(k), [&](const TestMeta& v) {
      ++calls;
      Check(v.version == it->second, "TryVisit saw another value", op_);
    });
    Check(o == Map::VisitOutcome::kVisited && calls == 1,
          "TryVisit did not visit a held key once", op_);
  }

  void Set(uint8_t k) {
    const uint32_t n = ++next_value_;
    const bool present = Present(k);
    const CMapSetResult r = map_.Set(FuzzKey(k), cmap_internal::MakeTestMeta(k, n));
    if (!present && model_.size() == map_.capacity()) {
      Check(r.err == Error::kCacheFull, "a full map admitted a new key", op_);
      return;
    }
    Check(r.err == Error::kOk, "Set failed below capacity", op_);
    Check(r.inserted == !present, "Set's inserted flag is wrong", op_);
    model_[k] = n;
    Check(map_.size() == model_.size(), "size differs from the model", op_);
  }

  void Erase(uint8_t k) {
    const FindAndEraseResult<TestMeta> r = map_.FindAndEraseByHash(FuzzKey(k));
    const auto it = model_.find(k);
    if (it == model_.end()) {
      Check(r.err == Error::kKeyNotFound, "erased a key the model lacks", op_);
      return;
    }
    Check(r.err == Error::kOk && r.value->version == it->second,
          "erase did not return the key's value", op_);
    model_.erase(it);
  }

  void Update(uint8_t k) {
    const uint32_t n = ++next_value_;
    const auto it = model_.find(k);
    int calls = 0;
    const Error err = map_.UpdateInPlace(FuzzKey(k), [&](TestMeta& v) {
      ++calls;
      Check(it != model_.end() && v.version == it->second,
            "UpdateInPlace saw another value", op_);
      v = cmap_internal::MakeTestMeta(k, n);
    });
    if (it == model_.end()) {
      Check(err == Error::kKeyNotFound && calls == 0,
            "updated a key the model lacks", op_);
      return;
    }
    Check(err == Error::kOk && calls == 1, "could not update a held key", op_);
    it->second = n;
  }

  void Grow() {
    const size_t cap = map_.capacity();
    if (2 * cap > kMaxCapacity) return;  // bounds the memory of a run
    const bool was_growing = map_.growing();
    const Error err = map_.BeginGrow(Map::AllocateTable(2 * cap, alloc_));
    if (was_growing) {
      Check(err == Error::kInvalidArgument, "a second growth was admitted",
            op_);
      return;
    }
    Check(err == Error::kOk, "a growth was refused", op_);
    Check(map_.capacity() == 2 * cap, "capacity did not double", op_);
  }

  void Shrink(uint8_t k) {
    const size_t cap = map_.capacity();
    const size_t live = model_.size();
    if (cap <= 1) return;
    const size_t to = std::max<size_t>(1, live + (k >> 1) % (cap - live + 1));
    if (to >= cap) return;
    const bool was_growing = map_.growing();
    const Error err = map_.BeginShrink(Map::AllocateTable(to, alloc_));
    if (was_growing || to < live) {
      Check(err == Error::kInvalidArgument, "a shrink was admitted while growing or below size", op_);
      return;
    }
    Check(err == Error::kOk, "a shrink was refused", op_);
    Check(map_.capacity() == to, "capacity is not the shrink's", op_);
  }

  void Migrate(size_t keys) {
    const size_t left = map_.MigrateSome(keys);
    Check(left <= model_.size(), "more keys left than live", op_);
    Check(map_.size() == model_.size(), "migration changed the size", op_);
  }

  // While an update holds k's slot, a migration must leave it where it is
  // (and everything else intact), and writers of k must back off.
  void MigrateInsideUpdate(uint8_t k) {
    if (!Present(k)) return;
    const Error err = map_.UpdateInPlace(FuzzKey(k), [&](TestMeta&) {
      map_.MigrateSome(8);
      Check(map_.Set(FuzzKey(k), cmap_internal::MakeTestMeta(k, 0)).err == Error::kAbandonedSet,
            "a Set got into a slot an update holds", op_);
      Check(map_.FindAndEraseByHash(FuzzKey(k)).err == Error::kAbandonedSet,
            "an erase got into a slot an update holds", op_);
    });
    Check(err == Error::kOk, "could not update a held key", op_);
  }

  void Final() {
    op_ = -1;
    for (int k = 0; k < 256; ++k) Expect(static_cast<uint8_t>(k));
    while (map_.MigrateSome(64) > 0) {
    }
    Check(!map_.growing(), "a growth did not finish", op_);
    map_.ReleaseRetired();
    for (int k = 0; k < 256; ++k) Expect(static_cast<uint8_t>(k));
    Check(map_.size() == model_.size(), "live count differs", op_);
    const auto* table = CMapTestPeer::CurrentTable(map_);
    Check(CMapTestPeer::CountCtrl(*table, cmap_internal::IsOccupied) ==
              model_.size(),
          "occupied control bytes differ from the model", op_);
    std::vector<uint8_t> keys;
    for (const auto& [k, n] : model_) keys.push_back(k);
    for (uint8_t k : keys) Erase(k);
    Check(map_.size() == 0, "not empty after erasing every key", op_);
    Check(CMapTestPeer::OverflowTotal(*table) == 0,
          "overflow counts left after erasing every key", op_);
  }

  RawAllocator alloc_;
  Map map_;
  std::unordered_map<uint8_t, uint32_t> model_;  // key number -> value number
  uint32_t next_value_ = 0;
  int op_ = 0;
};

}  // namespace
}  // namespace furrballs

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t config = data[0];
  const size_t capacity = 1 + (config & 63);
  const furrballs::RawAllocator alloc =
      (config & 64) != 0 ? furrballs::RawAllocator::Mapped()
                         : furrballs::RawAllocator::Default();
  furrballs::Runner(capacity, alloc).Run(data + 1, size - 1);
  return 0;
}
