// engine/cmap/internal/cmap_test_peer.h: test-only access to CMap's
// internals (where a key landed, how far a probe walked, overflow counts, the
// raw slot lock, a ResizableCMap's tables), for the tests and fuzz targets
// of engine/cmap.
//
// Thread safety: each function is as safe as the CMap member it wraps; Lock,
// Unlock and the counters may be used concurrently, the others are meant for
// quiescent maps.
#ifndef FURRBALLS_ENGINE_CMAP_INTERNAL_CMAP_TEST_PEER_H_
#define FURRBALLS_ENGINE_CMAP_INTERNAL_CMAP_TEST_PEER_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "engine/cmap/cmap.h"

namespace furrballs::cmap_internal {

// Declared a friend in cmap.h.
class CMapTestPeer {
 public:
  template <typename Map>
  static size_t SlotOf(const Map& m, const HashPair& h) {
    return m.template Probe<false>(h, m.FingerprintIs(h)).match;
  }
  template <typename Map>
  static size_t GroupsVisited(const Map& m, const HashPair& h) {
    return m.template Probe<false>(h, m.FingerprintIs(h)).groups_visited;
  }
  template <typename Map>
  static uint8_t Ctrl(const Map& m, size_t slot) {
    return m.LoadCtrl(slot);
  }
  template <typename Map>
  static size_t CountCtrl(const Map& m, bool (*pred)(uint8_t)) {
    size_t n = 0;
    for (size_t i = 0; i < m.slot_count(); ++i) n += pred(m.LoadCtrl(i));
    return n;
  }
  template <typename Map>
  static uint32_t Overflow(const Map& m, size_t group) {
    return m.overflow_[group].load(std::memory_order_relaxed);
  }
  template <typename Map>
  static uint64_t OverflowTotal(const Map& m) {
    uint64_t total = 0;
    for (size_t g = 0; g < m.slot_count() / kGroupWidth; ++g) {
      total += Overflow(m, g);
    }
    return total;
  }
  template <typename Map>
  static bool SentinelIntact(const Map& m) {
    for (size_t i = 0; i < kGroupWidth; ++i) {
      if (m.LoadCtrl(m.slot_count() + i) != kCtrlSentinel) return false;
    }
    return true;
  }
  // Set(h, v) of an absent key with `between` run after the probe and before
  // the slot is claimed: what another thread may do in that window, made
  // deterministic. REQUIRES: h is absent when called.
  template <typename Map, typename Value, typename Fn>
  static CMapSetResult SetWithPause(Map& m, const HashPair& h, const Value& v,
                                    Fn&& between) {
    const auto r = m.template Probe<true>(h, m.FingerprintIs(h));
    between();
    return m.Insert(h, r, v);
  }
  template <typename Map>
  static uint64_t Seq(const Map& m, size_t slot) {
    return m.slots_[slot].seq.load(std::memory_order_relaxed);
  }
  // Sets the sequence half of a slot's seq word (e.g. just below its wrap),
  // keeping the tail. REQUIRES: nobody else uses the map.
  template <typename Map>
  static void SetSequence(Map& m, size_t slot, uint32_t sequence) {
    Word& seq = m.slots_[slot].seq;
    seq.store((seq.load(std::memory_order_relaxed) & ~kSeqMask) | sequence,
              std::memory_order_relaxed);
  }
  // ResizableCMap's tables (resizable_cmap.h): the old one (null when not
  // growing) and the current one.
  template <typename Resizable>
  static auto* OldTable(const Resizable& m) {
    return m.old_.load(std::memory_order_relaxed);
  }
  template <typename Resizable>
  static auto* CurrentTable(const Resizable& m) {
    return m.current_.load(std::memory_order_relaxed);
  }
  // The key a ResizableCMap's tables see for h.
  template <typename Resizable>
  static HashPair TableKey(const HashPair& h) {
    return Resizable::TableKey(h);
  }
  template <typename Map>
  static bool Lock(Map& m, size_t slot, uint64_t* stable) {
    return TryLock(m.slots_[slot].seq, stable);
  }
  template <typename Map>
  static void Unlock(Map& m, size_t slot, uint64_t stable) {
    cmap_internal::Unlock(m.slots_[slot].seq, stable);
  }
};

}  // namespace furrballs::cmap_internal

#endif  // FURRBALLS_ENGINE_CMAP_INTERNAL_CMAP_TEST_PEER_H_
