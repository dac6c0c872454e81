// engine/furrball/chunked_value_testing.h: what the chunked-value tests
// share: self-checking values, live-key and hit counts, a 4 MiB cache.
//
// Thread safety: pure functions, except that MustOpen reports failures to
// the running gtest test.
#ifndef FURRBALLS_ENGINE_FURRBALL_CHUNKED_VALUE_TESTING_H_
#define FURRBALLS_ENGINE_FURRBALL_CHUNKED_VALUE_TESTING_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "engine/furrball/furrball.h"

namespace furrballs {
namespace furrball_internal {

inline constexpr size_t kMiB = size_t{1} << 20;

inline std::unique_ptr<FurrBall> MustOpen(const FurrBallOptions& o) {
  absl::StatusOr<std::unique_ptr<FurrBall>> ball = FurrBall::Open(o);
  EXPECT_TRUE(ball.ok()) << ball.status();
  return ball.ok() ? std::move(*ball) : nullptr;
}

// A value of `size` bytes whose every 8-byte word is `stamp` + its index,
// so a value assembled from the wrong chunks, or in the wrong order, shows.
inline std::string Stamped(size_t size, uint64_t stamp) {
  std::string v(size, '\0');
  for (size_t i = 0; i * 8 < size; ++i) {
    const uint64_t w = stamp * 0x100000000ull + i;
    std::memcpy(v.data() + i * 8, &w, std::min<size_t>(8, size - i * 8));
  }
  return v;
}

// The stamp of a value made by Stamped, or nullopt if its words disagree.
inline std::optional<uint64_t> StampOf(const std::string& v) {
  if (v.size() < 8) return std::nullopt;
  uint64_t first;
  std::memcpy(&first, v.data(), 8);
  const uint64_t stamp = first / 0x100000000ull;
  if (v != Stamped(v.size(), stamp)) return std::nullopt;
  return stamp;
}

inline int64_t LiveKeys(const FurrBall& ball) {
  int64_t n = 0;
  for (const NodeStatsSnapshot& s : ball.Stats()) n += s.live_keys;
  return n;
}

inline uint64_t Hits(const FurrBall& ball) {
  uint64_t n = 0;
  for (const NodeStatsSnapshot& s : ball.Stats()) {
    n += s.hits_local + s.hits_remote;
  }
  return n;
}

// The smallest budget the issue names, with every default else: 1 MiB
// values, automatic page size.
inline FurrBallOptions FourMiB() {
  FurrBallOptions o;
  o.memory_budget_bytes = 4 * kMiB;
  o.node_count = 1;
  o.simulate_topology = true;
  return o;
}

// Memory pressure evicts (or spills) chunks and heads in any order: every
// Get is the whole value it asked for or a miss, never a part of one. 40
// writes of about 300 KB over 16 keys (4.8 MB, more than a 4 MiB budget
// holds), each followed by reads of the `reads` keys written last (the
// spill tier reads each chunk of an evicted value back from disk, so its
// test reads fewer). Returns the number of reads that missed.
inline int ExpectEvictionNeverYieldsAPartialValue(const FurrBallOptions& o,
                                                  int reads) {
  constexpr int kKeys = 16;
  std::unique_ptr<FurrBall> ball = MustOpen(o);
  EXPECT_NE(ball, nullptr);
  if (ball == nullptr) return 0;
  int hits = 0, misses = 0;
  std::string got;
  for (int round = 0; round < 40; ++round) {
    const std::string key = "big" + std::to_string(round % kKeys);
    EXPECT_EQ(ball->Set(key, Stamped(300'000 + round, round)).error,
              Error::kOk);
    for (int j = 0; j < reads && j <= round; ++j) {
      const int k = (round - j) % kKeys;
      const std::string other = "big" + std::to_string(k);
      if (!ball->Get(other, &got).found) {
        ++misses;
        continue;
      }
      ++hits;
      const std::optional<uint64_t> stamp = StampOf(got);
      EXPECT_TRUE(stamp.has_value()) << other << " came back mixed";
      if (!stamp.has_value()) return misses;
      EXPECT_EQ(*stamp % kKeys, static_cast<uint64_t>(k)) << other;
      EXPECT_EQ(got.size(), 300'000 + *stamp) << other;
    }
  }
  EXPECT_GT(hits, 0);
  return misses;
}

}  // namespace furrball_internal
}  // namespace furrballs

#endif  // FURRBALLS_ENGINE_FURRBALL_CHUNKED_VALUE_TESTING_H_
