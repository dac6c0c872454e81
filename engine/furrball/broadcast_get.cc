#include "engine/furrball/broadcast_get.h"

#include <array>
#include <atomic>
#include <utility>

#include <absl/base/thread_annotations.h>

#include "engine/furrball/sync.h"

namespace furrballs {
namespace furrball_internal {
namespace {

struct Race;

// One node's probe: written only by the thread that runs it, read by the
// caller after the wait.
struct Slot {
  Race* race = nullptr;
  int index = 0;
  std::string value;
  EntryKind kind = EntryKind::kValue;
  GetResult result;
};

struct Race {
  explicit Race(RaceProbe p) : probe(p) {}

  RaceProbe probe;
  // -1 until a hit claims it (acq_rel CAS; read by the caller after the
  // mutex, which already orders it).
  std::atomic<int> winner{-1};
  Mutex mu;
  CondVar done;
  int pending ABSL_GUARDED_BY(mu) = 0;
  std::array<Slot, kMaxRaceNodes> slots;
};

void RunSlot(void* context) {
  Slot& slot = *static_cast<Slot*>(context);
  Race& race = *slot.race;
  slot.result = race.probe(slot.index, &slot.value, &slot.kind);
  if (slot.result.found) {
    int none = -1;
    race.winner.compare_exchange_strong(none, slot.index,
                                        std::memory_order_acq_rel);
  }
  MutexLock l(&race.mu);
  if (--race.pending == 0) race.done.Signal();
  // Nothing of `race` is touched after the unlock (the caller may return).
}

}  // namespace

RaceOutcome RunBroadcastGet(int n, int self, RaceSubmit submit,
                            RaceProbe probe, std::string* value) {
  Race race(probe);
  {
    MutexLock l(&race.mu);
    race.pending = n;
  }
  std::array<bool, kMaxRaceNodes> refused{};
  for (int i = 0; i < n; ++i) {
    race.slots[i].race = &race;
    race.slots[i].index = i;
  }
  for (int i = 0; i < n; ++i) {
    if (i == self) continue;
    refused[i] = submit(i, &RunSlot, &race.slots[i]) != Error::kOk;
  }
  RunSlot(&race.slots[self]);
  RaceOutcome out;
  for (int i = 0; i < n; ++i) {
    if (refused[i]) {
      ++out.fallbacks;
      RunSlot(&race.slots[i]);
    }
  }
  {
    MutexLock l(&race.mu);
    while (race.pending != 0) race.done.Wait(&race.mu);
  }
  out.winner = race.winner.load(std::memory_order_relaxed);
  if (out.winner < 0) {
    value->clear();
    return out;
  }
  Slot& won = race.slots[out.winner];
  out.result = won.result;
  out.kind = won.kind;
  *value = std::move(won.value);
  return out;
}

}  // namespace furrball_internal
}  // namespace furrballs
