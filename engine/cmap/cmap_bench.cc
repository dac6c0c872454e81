// CMap micro-benchmarks (docs/cmap.md has the numbers and how they were made).
//
// Comparison: CMap against absl::flat_hash_map under an absl::Mutex (reader
// lock for lookups, writer lock for writes) and tbb::concurrent_hash_map,
// each holding the same N keys with 16-byte values, for Find (hits), Set
// (overwrites of present keys) and a 90/10 mix, at 1 and 2 threads, with
// uniform and Zipfian (theta 0.99) key choice. Keys are hashed once, outside
// the timed loops, for every competitor: all three maps key on the same
// 128-bit HashPair and use h1 as their hash, so the comparison is of the
// tables, not of hash functions. Every map is filled before it is measured,
// and every thread walks its own stretch of one pre-generated index sequence.
//
// Times are real time per operation across all threads (Google Benchmark's
// UseRealTime with Threads(n)): at 2 threads, perfect scaling halves them.
//
// Design checks, filtered by name:
//   GroupLoad/...   CMap Find through GroupSse2 (two relaxed 8-byte atomic
//                   loads per group), through a plain 16-byte SSE2 load (a
//                   data race; here only to price the atomic loads), and
//                   through GroupPortable, interleaved in one benchmark; the
//                   per-variant times are counters.
//   ChurnedMiss/... misses on a CMap held at full capacity after 40 *
//                   capacity erase+insert pairs.
//   Resizable/...   ResizableCMap against CMap, both holding the same 100k
//                   keys, one thread, uniform: Find hits, Find misses and
//                   Set (overwrites), on a CMap, on a ResizableCMap that is
//                   not growing, and on one halfway through a growth to
//                   200k keys (half its keys in each table), interleaved in
//                   one benchmark as GroupLoad's are; per-variant times are
//                   counters. Resizable/100k/migrate_some_64 times one
//                   MigrateSome(64) of a growth from 100k to 200k keys.
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <absl/container/flat_hash_map.h>
#include <absl/synchronization/mutex.h>
#include <benchmark/benchmark.h>
#include <emmintrin.h>
#include <oneapi/tbb/concurrent_hash_map.h>

#include "engine/cmap/cmap.h"
#include "engine/cmap/resizable_cmap.h"
#include "engine/common/hash_pair.h"

namespace furrballs {
namespace {

struct Value16 {
  uint64_t a;
  uint64_t b;
};
static_assert(sizeof(Value16) == 16);

// ---------------------------------------------------------------------------
// Workloads: pre-hashed keys and index sequences.
// ---------------------------------------------------------------------------

constexpr size_t kSequenceLength = size_t{1} << 22;  // a power of two

enum class Dist { kUniform, kZipf };

// Zipfian ranks over [0, n) with parameter theta, by the method of Gray et
// al., "Quickly Generating Billion-Record Synthetic Databases" (SIGMOD 1994),
// as in YCSB's ZipfianGenerator.
class Zipf {
 public:
  Zipf(uint64_t n, double theta) : n_(n), theta_(theta) {
    for (uint64_t i = 1; i <= n; ++i) zeta_n_ += 1.0 / std::pow(double(i), theta);
    const double zeta2 = 1.0 + 1.0 / std::pow(2.0, theta);
    alpha_ = 1.0 / (1.0 - theta);
    eta_ = (1.0 - std::pow(2.0 / double(n), 1.0 - theta)) /
           (1.0 - zeta2 / zeta_n_);
  }

  uint64_t Next(std::mt19937_64& rng) {
    const double u = std::uniform_real_distribution<double>(0, 1)(rng);
    const double uz = u * zeta_n_;
    if (uz < 1.0) return 0;
    if (uz < 1.0 + std::pow(0.5, theta_)) return 1;
    const auto rank =
        static_cast<uint64_t>(double(n_) * std::pow(eta_ * u - eta_ + 1.0, alpha_));
    return std::min(rank, n_ - 1);
  }

 private:
  uint64_t n_;
  double theta_;
  double zeta_n_ = 0;
  double alpha_;
  double eta_;
};

struct Workload {
  std::vector<HashPair> keys;
  std::vector<uint32_t> uniform;  // indices into keys
  std::vector<uint32_t> zipf;     // ranks, scattered over keys by a shuffle

  const std::vector<uint32_t>& Sequence(Dist d) const {
    return d == Dist::kUniform ? uniform : zipf;
  }
};

const Workload& GetWorkload(size_t n) {
  static std::mutex mu;
  static std::map<size_t, std::unique_ptr<Workload>> workloads;
  std::lock_guard<std::mutex> lock(mu);
  std::unique_ptr<Workload>& w = workloads[n];
  if (w == nullptr) {
    w = std::make_unique<Workload>();
    const KeyHasher hasher(1);
    for (size_t i = 0; i < n; ++i) {
      w->keys.push_back(hasher.Hash("user:" + std::to_string(i)));
    }
    std::mt19937_64 rng(42);
    // Rank r is key permutation[r], so hot keys are spread over the table.
    std::vector<uint32_t> permutation(n);
    for (size_t i = 0; i < n; ++i) permutation[i] = static_cast<uint32_t>(i);
    std::shuffle(permutation.begin(), permutation.end(), rng);
    Zipf zipf(n, 0.99);
    w->uniform.resize(kSequenceLength);
    w->zipf.resize(kSequenceLength);
    for (size_t i = 0; i < kSequenceLength; ++i) {
      w->uniform[i] = static_cast<uint32_t>(rng() % n);
      w->zipf[i] = permutation[zipf.Next(rng)];
    }
  }
  return *w;
}

// ---------------------------------------------------------------------------
// The three maps behind one interface.
// ---------------------------------------------------------------------------

template <typename GroupImpl>
class CMapAdapter {
 public:
  explicit CMapAdapter(size_t n) : map_(n) {}
  std::optional<Value16> Find(const HashPair& h) const { return map_.Find(h); }
  // False when CMap failed fast (kAbandonedSet); the benchmark counts those.
  bool Set(const HashPair& h, const Value16& v) {
    return map_.Set(h, v).err == Error::kOk;
  }

 private:
  CMap<Value16, GroupImpl> map_;
};

// ResizableCMap, and optionally stopped halfway through a growth to twice
// its capacity: half the keys in the old table, half in the new.
template <bool kGrowing>
class ResizableAdapter {
 public:
  explicit ResizableAdapter(size_t n) : map_(n, RawAllocator::Default()) {}
  std::optional<Value16> Find(const HashPair& h) const { return map_.Find(h); }
  bool Set(const HashPair& h, const Value16& v) {
    const bool ok = map_.Set(h, v).err == Error::kOk;
    // The map is filled through Set: start growing once it is full.
    if (kGrowing && !map_.growing() && map_.size() == map_.capacity()) {
      const size_t n = map_.capacity();
      if (map_.BeginGrow(Map::AllocateTable(2 * n, RawAllocator::Default())) !=
          Error::kOk) {
        std::abort();
      }
      while (map_.MigrateSome(64) > n / 2) {
      }
    }
    return ok;
  }

 private:
  using Map = ResizableCMap<Value16>;
  Map map_;
};

struct PreHashed {
  size_t operator()(const HashPair& h) const { return h.h1; }
};

class AbslMutexAdapter {
 public:
  explicit AbslMutexAdapter(size_t n) { map_.reserve(n); }
  std::optional<Value16> Find(const HashPair& h) const {
    absl::ReaderMutexLock lock(&mu_);
    const auto it = map_.find(h);
    if (it == map_.end()) return std::nullopt;
    return it->second;
  }
  bool Set(const HashPair& h, const Value16& v) {
    absl::MutexLock lock(&mu_);
    map_.insert_or_assign(h, v);
    return true;
  }

 private:
  mutable absl::Mutex mu_;
  absl::flat_hash_map<HashPair, Value16, PreHashed> map_ ABSL_GUARDED_BY(mu_);
};

class TbbAdapter {
 public:
  explicit TbbAdapter(size_t n) : map_(n) {}
  std::optional<Value16> Find(const HashPair& h) const {
    Map::const_accessor acc;
    if (!map_.find(acc, h)) return std::nullopt;
    return acc->second;
  }
  bool Set(const HashPair& h, const Value16& v) {
    Map::accessor acc;
    map_.insert(acc, h);
    acc->second = v;
    return true;
  }

 private:
  struct HashCompare {
    size_t hash(const HashPair& h) const { return h.h1; }
    bool equal(const HashPair& a, const HashPair& b) const { return a == b; }
  };
  using Map = tbb::concurrent_hash_map<HashPair, Value16, HashCompare>;
  Map map_;
};

// One filled map per (type, key count), built on first use and shared by the
// benchmark threads (a function-local static is initialised exactly once).
template <typename Adapter>
Adapter& GetMap(size_t n) {
  static std::mutex mu;
  static std::map<size_t, std::unique_ptr<Adapter>> maps;
  std::lock_guard<std::mutex> lock(mu);
  std::unique_ptr<Adapter>& m = maps[n];
  if (m == nullptr) {
    m = std::make_unique<Adapter>(n);
    const Workload& w = GetWorkload(n);
    for (size_t i = 0; i < n; ++i) {
      if (!m->Set(w.keys[i], Value16{i, ~i})) std::abort();
    }
  }
  return *m;
}

// ---------------------------------------------------------------------------
// The comparison.
// ---------------------------------------------------------------------------

enum class Op { kFind, kSet, kMixed };

template <typename Adapter>
void BM_Op(benchmark::State& state, Op op, size_t n, Dist dist) {
  Adapter& map = GetMap<Adapter>(n);
  const Workload& w = GetWorkload(n);
  const std::vector<uint32_t>& seq = w.Sequence(dist);
  size_t pos = (static_cast<size_t>(state.thread_index()) * 0x9E3779B97F4A7C15u) &
               (kSequenceLength - 1);
  uint64_t lookups = 0, found = 0, abandoned = 0, i = 0;
  for (auto _ : state) {
    const HashPair& h = w.keys[seq[pos]];
    pos = (pos + 1) & (kSequenceLength - 1);
    const bool write = op == Op::kSet || (op == Op::kMixed && i % 10 == 0);
    if (write) {
      abandoned += !map.Set(h, Value16{i, pos});
    } else {
      const std::optional<Value16> v = map.Find(h);
      benchmark::DoNotOptimize(v);
      ++lookups;
      found += v.has_value();
    }
    ++i;
  }
  if (found != lookups) state.SkipWithError("a lookup missed");
  state.SetItemsProcessed(state.iterations());
  state.counters["abandoned"] = benchmark::Counter(
      static_cast<double>(abandoned), benchmark::Counter::kAvgThreads);
}

// ---------------------------------------------------------------------------
// Design checks.
// ---------------------------------------------------------------------------

// GroupSse2 with a plain 16-byte load: a data race against concurrent ctrl
// CASes (undefined behaviour, and a ThreadSanitizer report). Never used by
// CMap; it exists here only to price LoadCtrlWords.
class GroupSse2PlainLoad {
 public:
  // Undoes the stored form (group.h) with one XOR, so that it can keep
  // GroupSse2's compares against the plain encoding below.
  explicit GroupSse2PlainLoad(const uint8_t* ctrl)
      : ctrl_(_mm_xor_si128(
            _mm_load_si128(reinterpret_cast<const __m128i*>(ctrl)),
            _mm_set1_epi8(static_cast<char>(cmap_internal::kCtrlStoredXor)))) {}
  cmap_internal::BitMask Match(uint8_t h2s) const { return Eq(h2s); }
  cmap_internal::BitMask MaskEmpty() const { return Eq(cmap_internal::kCtrlEmpty); }
  cmap_internal::BitMask MaskDeleted() const {
    return Eq(cmap_internal::kCtrlDeleted);
  }
  cmap_internal::BitMask MaskFree() const {
    const __m128i sentinel =
        _mm_set1_epi8(static_cast<char>(cmap_internal::kCtrlSentinel));
    return cmap_internal::BitMask(static_cast<uint32_t>(
        _mm_movemask_epi8(_mm_cmpgt_epi8(sentinel, ctrl_))));
  }

 private:
  cmap_internal::BitMask Eq(uint8_t b) const {
    return cmap_internal::BitMask(static_cast<uint32_t>(_mm_movemask_epi8(
        _mm_cmpeq_epi8(_mm_set1_epi8(static_cast<char>(b)), ctrl_))));
  }
  __m128i ctrl_;
};

// Runs op(map, i) on three maps in turns, kTurnChunk consecutive positions
// i of the uniform sequence at a time, the first of each turn rotating, so
// that order and machine noise fall on all three alike. Returns each map's
// nanoseconds per op.
constexpr size_t kTurnChunk = 4096;
template <typename M0, typename M1, typename M2, typename Op>
std::array<double, 3> TakeTurns(benchmark::State& state, M0& m0, M1& m1,
                                M2& m2, Op&& op) {
  auto timed = [&](auto& map, size_t pos) {
    const auto start = std::chrono::steady_clock::now();
    for (size_t i = 0; i < kTurnChunk; ++i) op(map, pos + i);
    return std::chrono::duration<double, std::nano>(
               std::chrono::steady_clock::now() - start)
        .count();
  };
  std::array<double, 3> ns = {0, 0, 0};
  size_t pos = 0, turn = 0;
  for (auto _ : state) {
    for (size_t k = 0; k < 3; ++k) {
      switch ((turn + k) % 3) {
        case 0: ns[0] += timed(m0, pos); break;
        case 1: ns[1] += timed(m1, pos); break;
        default: ns[2] += timed(m2, pos);
      }
    }
    ++turn;
    pos += kTurnChunk;
  }
  for (double& t : ns) t /= static_cast<double>(turn * kTurnChunk);
  return ns;
}

// Find through the three groups on three maps holding the same keys, hits
// (present keys) or misses (absent keys), one thread, uniform, in turns;
// each reports its own ns per lookup.
void BM_GroupLoad(benchmark::State& state, size_t n, bool hits) {
  CMapAdapter<GroupSse2>& atomic = GetMap<CMapAdapter<GroupSse2>>(n);
  CMapAdapter<GroupSse2PlainLoad>& plain =
      GetMap<CMapAdapter<GroupSse2PlainLoad>>(n);
  CMapAdapter<GroupPortable>& portable = GetMap<CMapAdapter<GroupPortable>>(n);
  const Workload& w = GetWorkload(n);
  uint64_t found = 0, lookups = 0;
  const std::array<double, 3> ns =
      TakeTurns(state, atomic, plain, portable, [&](const auto& map, size_t i) {
        HashPair h = w.keys[w.uniform[i & (kSequenceLength - 1)]];
        if (!hits) h.h2 = ~h.h2;  // same home group, absent
        const std::optional<Value16> v = map.Find(h);
        benchmark::DoNotOptimize(v);
        found += v.has_value();
        ++lookups;
      });
  if (found != (hits ? lookups : 0)) state.SkipWithError("wrong hits");
  state.counters["sse2_atomic_ns"] = ns[0];
  state.counters["sse2_plain_ns"] = ns[1];
  state.counters["portable_ns"] = ns[2];
}

// Misses on a map at full capacity and exactly 3/4 load, after churn.
void BM_ChurnedMiss(benchmark::State& state) {
  constexpr size_t kCapacity = 196608;  // 3/4 of 16384 groups
  static CMap<Value16>* map = [] {
    auto* m = new CMap<Value16>(kCapacity, KeyHasher(5));
    std::mt19937_64 rng(9);
    std::vector<HashPair> live;
    for (size_t i = 0; i < kCapacity; ++i) {
      live.push_back(HashPair{rng(), rng()});
      m->Set(live.back(), Value16{i, i});
    }
    for (size_t i = 0; i < 40 * kCapacity; ++i) {
      const size_t victim = rng() % live.size();
      m->FindAndEraseByHash(live[victim]);
      live[victim] = HashPair{rng(), rng()};
      if (m->Set(live[victim], Value16{i, i}).err != Error::kOk) std::abort();
    }
    return m;
  }();
  std::mt19937_64 rng(state.thread_index());
  std::vector<HashPair> misses(4096);
  for (HashPair& h : misses) h = HashPair{rng(), rng()};
  size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(map->Find(misses[i++ & 4095]));
  }
  state.SetItemsProcessed(state.iterations());
}

// Find hits, Find misses or Set overwrites through CMap and ResizableCMap
// (not growing, and halfway through a growth), in turns as BM_GroupLoad;
// one thread, uniform.
enum class ResizableOp { kFindHit, kFindMiss, kSet };
void BM_Resizable(benchmark::State& state, size_t n, ResizableOp op) {
  auto& cmap = GetMap<CMapAdapter<DefaultGroup>>(n);
  auto& resizable = GetMap<ResizableAdapter<false>>(n);
  auto& growing = GetMap<ResizableAdapter<true>>(n);
  const Workload& w = GetWorkload(n);
  uint64_t found = 0, lookups = 0, failed = 0;
  const std::array<double, 3> ns =
      TakeTurns(state, cmap, resizable, growing, [&](auto& map, size_t i) {
        HashPair h = w.keys[w.uniform[i & (kSequenceLength - 1)]];
        if (op == ResizableOp::kSet) {
          failed += !map.Set(h, Value16{i, ~i});
          return;
        }
        if (op == ResizableOp::kFindMiss) h.h2 = ~h.h2;
        const std::optional<Value16> v = map.Find(h);
        benchmark::DoNotOptimize(v);
        found += v.has_value();
        ++lookups;
      });
  const uint64_t expected = op == ResizableOp::kFindHit ? lookups : 0;
  if (found != expected || failed != 0) state.SkipWithError("wrong results");
  state.counters["cmap_ns"] = ns[0];
  state.counters["resizable_ns"] = ns[1];
  state.counters["growing_ns"] = ns[2];
}

// One MigrateSome(64) of a 100k-key ResizableCMap growing to 200k, the
// lock hold a growth step costs. Tables come from RawAllocator::Mapped, as
// Numatic's do, so the new table's pages are faulted in by the moves, as
// they would be in the engine. A fresh map is built (untimed) whenever a
// growth finishes.
void BM_MigrateSome(benchmark::State& state) {
  constexpr size_t kKeys = 100000;
  const Workload& w = GetWorkload(kKeys);
  std::unique_ptr<ResizableCMap<Value16>> map;
  uint64_t calls = 0;
  for (auto _ : state) {
    if (map == nullptr || !map->growing()) {
      state.PauseTiming();
      map = std::make_unique<ResizableCMap<Value16>>(kKeys,
                                                     RawAllocator::Mapped());
      for (size_t i = 0; i < kKeys; ++i) map->Set(w.keys[i], Value16{i, ~i});
      if (map->BeginGrow(ResizableCMap<Value16>::AllocateTable(
              2 * kKeys, RawAllocator::Mapped())) != Error::kOk) {
        std::abort();
      }
      state.ResumeTiming();
    }
    benchmark::DoNotOptimize(map->MigrateSome(64));
    ++calls;
  }
  state.SetItemsProcessed(static_cast<int64_t>(calls * 64));
}

std::string SizeName(size_t n) {
  return n >= 1000000 ? std::to_string(n / 1000000) + "M"
                      : std::to_string(n / 1000) + "k";
}

void RegisterAll() {
  const std::pair<Op, const char*> ops[] = {
      {Op::kFind, "Find"}, {Op::kSet, "Set"}, {Op::kMixed, "Mixed90_10"}};
  const std::pair<Dist, const char*> dists[] = {{Dist::kUniform, "uniform"},
                                                {Dist::kZipf, "zipf"}};
  for (size_t n : {size_t{100000}, size_t{1000000}}) {
    // Pairs, not structured bindings: the lambda below captures them, which
    // clang 14 (the fuzz and -Wthread-safety builds) refuses for bindings.
    for (const auto& op_pair : ops) {
      for (const auto& dist_pair : dists) {
        const Op op = op_pair.first;
        const char* const op_name = op_pair.second;
        const Dist dist = dist_pair.first;
        const char* const dist_name = dist_pair.second;
        const std::string suffix = "/" + SizeName(n) + "/" + dist_name;
        const auto reg = [&](const char* map_name, auto fn) {
          benchmark::RegisterBenchmark(
              (std::string(op_name) + "/" + map_name + suffix).c_str(), fn,
              op, n, dist)
              ->Threads(1)
              ->Threads(2)
              ->UseRealTime();
        };
        reg("cmap", BM_Op<CMapAdapter<DefaultGroup>>);
        reg("absl_mutex", BM_Op<AbslMutexAdapter>);
        reg("tbb", BM_Op<TbbAdapter>);
      }
    }
  }
  for (size_t n : {size_t{100000}, size_t{1000000}}) {
    for (bool hits : {true, false}) {
      benchmark::RegisterBenchmark(
          ("GroupLoad/" + SizeName(n) + (hits ? "/hit" : "/miss")).c_str(),
          BM_GroupLoad, n, hits);
    }
  }
  benchmark::RegisterBenchmark("ChurnedMiss/cmap", BM_ChurnedMiss);
  const std::pair<ResizableOp, const char*> resizable_ops[] = {
      {ResizableOp::kFindHit, "find_hit"},
      {ResizableOp::kFindMiss, "find_miss"},
      {ResizableOp::kSet, "set"}};
  benchmark::RegisterBenchmark("Resizable/100k/migrate_some_64",
                               BM_MigrateSome);
  for (const auto& [op, op_name] : resizable_ops) {
    benchmark::RegisterBenchmark(
        (std::string("Resizable/100k/") + op_name).c_str(), BM_Resizable,
        size_t{100000}, op);
  }
}

}  // namespace
}  // namespace furrballs

int main(int argc, char** argv) {
  furrballs::RegisterAll();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
