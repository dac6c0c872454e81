// bench/engine/cycle_timer.cc: TSC rate calibration.
#include "bench/engine/cycle_timer.h"

#include <fstream>
#include <string>

namespace furrballs::bench {

double CycleTimer::TicksPerNs(std::chrono::milliseconds window) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  const uint64_t ticks_start = Now();
  Clock::time_point now;
  do {
    now = Clock::now();
  } while (now - start < window);
  const uint64_t ticks_end = Now();
  const double ns =
      static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(now - start).count());
  return static_cast<double>(ticks_end - ticks_start) / ns;
}

bool CycleTimer::InvariantTscAvailable() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    return line.find(" constant_tsc") != std::string::npos &&
           line.find(" nonstop_tsc") != std::string::npos;
  }
  return false;
}

}  // namespace furrballs::bench
