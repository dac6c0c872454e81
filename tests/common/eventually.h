// tests/common/eventually.h: a bounded wait for a condition that another
// thread makes true on its own schedule (a reload timer, a server's
// background work), for tests that cannot force the moment.
//
// Thread safety: calls `done` from the calling thread only.
#ifndef FURRBALLS_TESTS_COMMON_EVENTUALLY_H_
#define FURRBALLS_TESTS_COMMON_EVENTUALLY_H_

#include <chrono>
#include <thread>

namespace furrballs::test_support {

// Polls `done` every `poll` until it holds (true) or `timeout` has passed
// (false, after one last try). The bound is generous for a loaded machine;
// a test asserts on the result, so a condition that never holds fails it.
template <typename Predicate>
bool Eventually(Predicate done,
                std::chrono::milliseconds timeout = std::chrono::seconds(30),
                std::chrono::milliseconds poll = std::chrono::milliseconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(poll);
  }
  return done();
}

}  // namespace furrballs::test_support

#endif  // FURRBALLS_TESTS_COMMON_EVENTUALLY_H_
