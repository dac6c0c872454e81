// bench/engine/cycle_timer.h: per-operation timing with the CPU's invariant
// time-stamp counter.
//
// Thread safety: stateless; safe everywhere.
//
// Why not steady_clock: on the machines this runs on, a steady_clock read
// through the vDSO costs ~29 ns, an LFENCE+RDTSC ~12 ns, and every timed
// operation pays for one read inside its interval. Gets of ~70 ns are the
// numbers being compared, so the cheaper counter keeps the timer from
// dominating them. LFENCE keeps RDTSC from executing before the instructions
// ahead of it have completed. Ticks become nanoseconds with a rate measured
// against steady_clock; that needs an invariant TSC (constant_tsc and
// nonstop_tsc), which InvariantTscAvailable() checks.
#ifndef FURRBALLS_BENCH_ENGINE_CYCLE_TIMER_H_
#define FURRBALLS_BENCH_ENGINE_CYCLE_TIMER_H_

#include <x86intrin.h>

#include <chrono>
#include <cstdint>

namespace furrballs::bench {

class CycleTimer {
 public:
  static uint64_t Now() {
    _mm_lfence();
    return __rdtsc();
  }

  // TSC ticks per nanosecond, measured against steady_clock over `window`.
  static double TicksPerNs(std::chrono::milliseconds window);

  // True if /proc/cpuinfo reports constant_tsc and nonstop_tsc.
  static bool InvariantTscAvailable();
};

}  // namespace furrballs::bench

#endif  // FURRBALLS_BENCH_ENGINE_CYCLE_TIMER_H_
