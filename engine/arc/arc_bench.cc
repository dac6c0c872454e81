// engine/arc/arc_bench.cc: ARC-flat (the production policy core) against the
// reference ARC (std::list + std::unordered_map) on the report's four traces
// (§5.22: capacity 1000, universe 10000, 100k operations), the flat core with
// std::unordered_map as its index (the measurement that chose ArcIndex), and
// ConcurrentARC Find throughput. docs/arc.md has the command and the table.
//
// Thread safety: a benchmark binary; each benchmark owns its state.
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <benchmark/benchmark.h>

#include "engine/arc/arc_policy.h"
#include "engine/arc/arc_trace.h"
#include "engine/arc/concurrent_arc.h"
#include "engine/arc/reference_arc.h"
#include "engine/arc/retired_memory.h"
#include "engine/common/hash_pair.h"
#include "engine/common/raw_allocator.h"

namespace furrballs {
namespace {

constexpr uint32_t kCapacity = 1000;
constexpr uint64_t kUniverse = 10000;
constexpr size_t kOps = 100000;

// The report's four workloads.
constexpr TraceKind kBenchTraces[] = {
    TraceKind::kZipfian, TraceKind::kScanResistant, TraceKind::kTemporalShift,
    TraceKind::kLoop};

const std::vector<HashPair>& Trace(int which) {
  static const auto* traces = [] {
    auto* t = new std::vector<std::vector<HashPair>>;
    for (TraceKind k : kBenchTraces) {
      t->push_back(MakeTrace(k, kUniverse, kOps, /*seed=*/2024));
    }
    return t;
  }();
  return (*traces)[which];
}

// ArcFlatLists' index contract on std::unordered_multimap (keys may share a
// fingerprint), reserved up front as in the report: the alternative to
// ArcIndex that this benchmark measures. Erase is given only the slot, so
// the adapter remembers each slot's fingerprint.
class StdUnorderedMapIndex {
 public:
  static absl::StatusOr<StdUnorderedMapIndex> Create(uint32_t max_keys,
                                                     RawAllocator) {
    StdUnorderedMapIndex index;
    index.map_.reserve(max_keys);
    index.fingerprint_of_.resize(max_keys);
    return index;
  }
  static uint32_t HighOf(uint64_t fingerprint) {
    return ArcIndex::HighOf(fingerprint);
  }
  template <typename Matches, typename Mode>
  uint32_t Find(uint64_t fingerprint, const Matches& matches, Mode) const {
    const auto [begin, end] = map_.equal_range(fingerprint);
    uint32_t found = kArcNil;
    for (auto it = begin; it != end; ++it) {
      const ArcMatch m = matches(it->second);
      if (m == ArcMatch::kKey) return it->second;
      if (m == ArcMatch::kFingerprint && found == kArcNil) found = it->second;
    }
    return found;
  }
  void Insert(uint64_t fingerprint, uint32_t slot) {
    map_.emplace(fingerprint, slot);
    fingerprint_of_[slot] = fingerprint;
  }
  template <typename HighOfSlot, typename Mode>
  void Erase(uint32_t, uint32_t slot, const HighOfSlot&, Mode) {
    const auto [begin, end] = map_.equal_range(fingerprint_of_[slot]);
    for (auto it = begin; it != end; ++it) {
      if (it->second == slot) {
        map_.erase(it);
        return;
      }
    }
  }
  template <typename Mode>
  uint32_t TagOfSlot(uint32_t, uint32_t slot, Mode) const {
    return static_cast<uint32_t>(fingerprint_of_[slot]);
  }
  size_t memory_bytes() const { return 0; }

 private:
  std::unordered_multimap<uint64_t, uint32_t> map_;
  std::vector<uint64_t> fingerprint_of_;
};

// One iteration = the whole 100k-operation trace on a cold cache, as in the
// report; items/s is operations per second.
template <typename Arc, typename MakeArc>
void RunTrace(benchmark::State& state, MakeArc make) {
  const std::vector<HashPair>& trace = Trace(state.range(0));
  state.SetLabel(std::string(TraceName(kBenchTraces[state.range(0)])));
  uint64_t hits = 0;
  for (auto _ : state) {
    state.PauseTiming();
    Arc arc = make();
    state.ResumeTiming();
    hits = 0;
    for (const HashPair& k : trace) hits += arc.Access(k).hit;
    benchmark::DoNotOptimize(hits);
  }
  state.SetItemsProcessed(state.iterations() * trace.size());
  state.counters["hits"] = static_cast<double>(hits);
}

void BM_ArcFlat(benchmark::State& state) {
  RunTrace<ArcPolicy>(state, [] {
    return *ArcPolicy::Create(kCapacity, RawAllocator::Default());
  });
}

// The same traces while c grows: created at c/4, grown to c before the
// first access, the index rehashed one entry per access (as ConcurrentARC's
// Sets do), so the first ~1,300 accesses probe two tables.
void BM_ArcFlatGrowing(benchmark::State& state) {
  const std::vector<HashPair>& trace = Trace(state.range(0));
  state.SetLabel(std::string(TraceName(kBenchTraces[state.range(0)])));
  uint64_t hits = 0;
  for (auto _ : state) {
    state.PauseTiming();
    ArcPolicy arc = *ArcPolicy::Create(kCapacity / 4, RawAllocator::Default());
    arc.BeginGrow(*arc.AllocateGrowth(kCapacity));
    state.ResumeTiming();
    hits = 0;
    for (const HashPair& k : trace) {
      hits += arc.Access(k).hit;
      if (arc.growing() && arc.GrowStep(1)) {
        RetiredMemory retired;
        arc.TakeRetired(&retired);
      }
    }
    benchmark::DoNotOptimize(hits);
  }
  state.SetItemsProcessed(state.iterations() * trace.size());
  state.counters["hits"] = static_cast<double>(hits);
}

void BM_ArcFlatStdIndex(benchmark::State& state) {
  using Policy = BasicArcPolicy<StdUnorderedMapIndex>;
  RunTrace<Policy>(state, [] {
    return *Policy::Create(kCapacity, RawAllocator::Default());
  });
}

void BM_ArcReference(benchmark::State& state) {
  RunTrace<ReferenceArc>(state, [] { return ReferenceArc(kCapacity); });
}

// ConcurrentARC driven as a cache ("Find; on a miss Set"), one thread, on
// the same traces: the policy core plus CMap, PromoteBuf and the lock.
void BM_ConcurrentArcTrace(benchmark::State& state) {
  const std::vector<HashPair>& trace = Trace(state.range(0));
  state.SetLabel(std::string(TraceName(kBenchTraces[state.range(0)])));
  uint64_t hits = 0;
  for (auto _ : state) {
    state.PauseTiming();
    ConcurrentArcOptions<uint64_t> options;
    options.capacity = kCapacity;
    std::unique_ptr<ConcurrentARC<uint64_t>> arc =
        *ConcurrentARC<uint64_t>::Create(options);
    state.ResumeTiming();
    hits = 0;
    for (const HashPair& k : trace) {
      if (arc->Find(k).has_value()) {
        ++hits;
      } else {
        arc->Set(k, k.h1);
      }
    }
    benchmark::DoNotOptimize(hits);
    state.PauseTiming();
    arc.reset();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * trace.size());
  state.counters["hits"] = static_cast<double>(hits);
}

// Find throughput on a full cache, every lookup a hit (so every one enqueues
// a promotion, and every 64th drains): Zipfian(0.99) over the 1000 resident
// keys, shared by all threads.
ConcurrentARC<uint64_t>* shared_arc = nullptr;

void BM_ConcurrentArcFind(benchmark::State& state) {
  static const std::vector<HashPair> keys = [] {
    std::vector<HashPair> k;
    ZipfianGenerator zipf(kCapacity, kZipfTheta, /*seed=*/9);
    for (int i = 0; i < (1 << 16); ++i) k.push_back(TraceKey(zipf.Next()));
    return k;
  }();
  if (state.thread_index() == 0) {
    ConcurrentArcOptions<uint64_t> options;
    options.capacity = kCapacity;
    shared_arc = ConcurrentARC<uint64_t>::Create(options)->release();
    for (uint64_t id = 0; id < kCapacity; ++id) {
      shared_arc->Set(TraceKey(id), id);
    }
  }
  size_t i = size_t(state.thread_index()) * 7919;
  uint64_t hits = 0;
  for (auto _ : state) {
    hits += shared_arc->Find(keys[i++ & (keys.size() - 1)]).has_value();
  }
  benchmark::DoNotOptimize(hits);
  state.SetItemsProcessed(state.iterations());
  if (state.thread_index() == 0) {
    const ConcurrentArcStats s = shared_arc->stats();
    state.counters["dropped"] = static_cast<double>(s.promotions_dropped);
    delete shared_arc;
    shared_arc = nullptr;
  }
}

BENCHMARK(BM_ArcFlat)->DenseRange(0, 3)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ArcFlatGrowing)->DenseRange(0, 3)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ArcFlatStdIndex)->DenseRange(0, 3)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ArcReference)->DenseRange(0, 3)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ConcurrentArcTrace)
    ->DenseRange(0, 3)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ConcurrentArcFind)->Threads(1)->Threads(2)->UseRealTime();

}  // namespace
}  // namespace furrballs

BENCHMARK_MAIN();
