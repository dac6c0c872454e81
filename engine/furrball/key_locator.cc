#include "engine/furrball/key_locator.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "engine/furrball/broadcast_get.h"
#include "engine/furrball/node_stats.h"

namespace furrballs {
namespace furrball_internal {
namespace {

using SteadyTime = std::chrono::steady_clock;

uint32_t NsSince(SteadyTime::time_point start) {
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                      SteadyTime::now() - start)
                      .count();
  return static_cast<uint32_t>(std::clamp<int64_t>(ns, 1, INT32_MAX));
}

// An exponentially weighted mean with weight 1/8; the first sample sets it.
void AddSample(std::atomic<uint32_t>& mean, uint32_t sample) {
  const int64_t old = mean.load(std::memory_order_relaxed);
  const int64_t next = old == 0 ? sample : old + (int64_t{sample} - old) / 8;
  mean.store(static_cast<uint32_t>(std::max<int64_t>(next, 1)),
             std::memory_order_relaxed);
}

// Per-thread counters, so that sampling and exploring write no shared line:
// discoveries left until this thread tries the choice it is not making,
// and scans since the last timed one.
thread_local uint64_t until_explore = 0;
thread_local uint32_t scans = 0;

}  // namespace

KeyLocator::KeyLocator(const Numatic* numatic, const NodeRouter* router,
                       std::vector<NodeShard*> shards,
                       std::vector<NodeJob*> jobs, LocatePolicy policy,
                       std::unique_ptr<LocationCache> cache)
    : numatic_(numatic),
      router_(router),
      shards_(std::move(shards)),
      jobs_(std::move(jobs)),
      policy_(policy),
      can_race_(policy != LocatePolicy::kScan && router->count() > 1 &&
                router->count() <= kMaxRaceNodes),
      cache_(std::move(cache)) {}

KeyLocator::Costs KeyLocator::costs() const {
  return Costs{means_.scan_ns.load(std::memory_order_relaxed),
               means_.probe_ns.load(std::memory_order_relaxed),
               means_.race_ns.load(std::memory_order_relaxed)};
}

GetResult KeyLocator::ProbeAt(int index, const Lookup& q, int requester,
                              std::string* value, EntryKind* kind,
                              int hit_node) {
  return shards_[index]->Get(q.h, q.key, value, requester, *q.key_lock,
                             /*count_miss=*/false, q.read_disk, q.wanted,
                             kind, hit_node);
}

GetResult KeyLocator::Get(const Lookup& q, std::string* value,
                          EntryKind* kind, int* holder) {
  const int requester = numatic_->GetCurrentNode();
  const int self = router_->IndexOrFirst(requester);
  const int n = router_->count();
  int stale = -1;
  if (cache_ != nullptr) {
    const int hint = cache_->Hint(q.h);
    if (hint < 0 || hint >= n) {
      shards_[self]->Count(Counter::kLocationMisses);
    } else {
      GetResult r = ProbeAt(hint, q, requester, value, kind);
      if (r.found) {
        shards_[self]->Count(Counter::kLocationHits);
        *holder = hint;
        return r;
      }
      shards_[self]->Count(Counter::kLocationStale);
      cache_->Forget(q.h, hint);
      stale = hint;
    }
  }
  const GetResult r = ChooseRace()
                          ? Race(q, requester, self, value, kind, holder)
                          : Scan(q, requester, self, stale, value, kind, holder);
  if (r.found && cache_ != nullptr) cache_->Remember(q.h, *holder);
  return r;
}

bool KeyLocator::RaceGains(const Costs& c, int nodes) {
  const int64_t net_gain = int64_t{c.scan_ns} - c.race_ns -
                           int64_t{nodes - 1} * c.probe_ns;
  return net_gain > 0;
}

uint64_t KeyLocator::ExplorePeriod(const Costs& c, bool race_gains) {
  // The other choice costs `ratio` times this one at most: trying it once
  // in kExploreShare * ratio discoveries costs at most 1/kExploreShare.
  const uint64_t ratio =
      race_gains ? 1 : (uint64_t{c.race_ns} + c.scan_ns - 1) / c.scan_ns;
  return std::min<uint64_t>(kExploreShare * std::max<uint64_t>(ratio, 1),
                            uint64_t{1} << 20);
}

bool KeyLocator::ChooseRace() {
  if (!can_race_ || NodeJob::OnWorkerThread()) return false;
  if (policy_ == LocatePolicy::kRace) return true;
  const Costs c = costs();
  if (c.scan_ns == 0) return false;  // measure the scan first
  if (c.race_ns == 0) return true;   // then one race
  const bool race_gains = RaceGains(c, router_->count());
  if (until_explore == 0) {
    until_explore = ExplorePeriod(c, race_gains);
    return !race_gains;
  }
  --until_explore;
  return race_gains;
}

GetResult KeyLocator::Scan(const Lookup& q, int requester, int self,
                           int skip, std::string* value, EntryKind* kind,
                           int* where) {
  const bool timed = policy_ == LocatePolicy::kAuto && can_race_ &&
                     ++scans % kScanSampleEvery == 0;
  const SteadyTime::time_point start =
      timed ? SteadyTime::now() : SteadyTime::time_point{};
  const int n = router_->count();
  int probes = 0;
  GetResult r;
  for (int k = 0; k < n; ++k) {
    const int i = (self + k) % n;
    if (i == skip) continue;
    ++probes;
    r = ProbeAt(i, q, requester, value, kind);
    if (r.found) {
      *where = i;
      break;
    }
  }
  if (timed && probes > 0) {
    const uint32_t ns = NsSince(start);
    AddSample(means_.scan_ns, ns);
    AddSample(means_.probe_ns, ns / probes);
  }
  return r;
}

GetResult KeyLocator::Race(const Lookup& q, int requester, int self,
                           std::string* value, EntryKind* kind, int* where) {
  const SteadyTime::time_point start = SteadyTime::now();
  // Each probe runs as a local read of its node (on the node's worker, or
  // the caller's own node inline); only the winner's value crosses nodes,
  // charged once below. A hit is the caller's: local only when it is on
  // the caller's node (requester), whichever thread probed.
  const RaceOutcome out = RunBroadcastGet(
      router_->count(), self,
      [this](int i, void (*job)(void*), void* context) {
        return jobs_[i]->Submit(job, context);
      },
      [&](int i, std::string* v, EntryKind* k) {
        return ProbeAt(i, q, numatic_->GetCurrentNode(), v, k, requester);
      },
      value);
  shards_[self]->Count(Counter::kRaces);
  if (out.fallbacks > 0) shards_[self]->Count(Counter::kRaceFallbacks);
  if (out.winner >= 0) {
    shards_[out.winner]->Count(Counter::kRaceWins);
    numatic_->SimulateRemoteAccess(requester, router_->IdOf(out.winner));
    if (kind != nullptr) *kind = out.kind;
    *where = out.winner;
  }
  if (policy_ == LocatePolicy::kAuto) AddSample(means_.race_ns, NsSince(start));
  return out.result;
}

int KeyLocator::Locate(const HashPair& h) {
  const int n = router_->count();
  int hint = -1;
  if (cache_ != nullptr) {
    hint = cache_->Hint(h);
    if (hint >= n) hint = -1;
    if (hint >= 0 && shards_[hint]->Holds(h)) return hint;
  }
  const int first = router_->IndexOrFirst(numatic_->GetCurrentNode());
  for (int k = 0; k < n; ++k) {
    const int i = (first + k) % n;
    if (i == hint || !shards_[i]->Holds(h)) continue;
    if (cache_ != nullptr) cache_->Remember(h, i);
    return i;
  }
  if (hint >= 0) cache_->Forget(h, hint);
  return -1;
}

void KeyLocator::Placed(const HashPair& h, int index) {
  if (cache_ != nullptr) cache_->Remember(h, index);
}

void KeyLocator::Removed(const HashPair& h, int index) {
  if (cache_ != nullptr) cache_->Forget(h, index);
}

}  // namespace furrball_internal
}  // namespace furrballs
