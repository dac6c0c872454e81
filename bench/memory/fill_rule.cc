// bench/memory/fill_rule.cc: the stop rule of the memory fill test.
#include "bench/memory/fill_rule.h"

namespace furrballs::bench::memory {

std::string_view FillEndName(FillEnd end) {
  switch (end) {
    case FillEnd::kContinue:
      return "continue";
    case FillEnd::kSettled:
      return "settled";
    case FillEnd::kBatchLimit:
      return "batch_limit";
    case FillEnd::kTimeLimit:
      return "time_limit";
  }
  return "?";
}

uint64_t BatchKeys(uint64_t budget_bytes, size_t key_bytes, size_t value_bytes) {
  const uint64_t item = key_bytes + value_bytes;
  return (budget_bytes + item - 1) / item;
}

FillEnd FillRule::AfterBatch(uint64_t resident_keys) {
  ++batches_;
  const uint64_t before = last_resident_;
  last_resident_ = resident_keys;
  // The first batch has nothing to compare with. After it, a count that did
  // not rise (0 -> 0 included: a cache that keeps nothing) has settled too.
  if (batches_ >= 2 &&
      (resident_keys <= before ||
       static_cast<double>(resident_keys - before) <
           options_.min_growth * static_cast<double>(before))) {
    return FillEnd::kSettled;
  }
  if (batches_ >= options_.max_batches) return FillEnd::kBatchLimit;
  return FillEnd::kContinue;
}

FillEnd FillRule::AfterStep(double elapsed_seconds) const {
  return elapsed_seconds >= options_.max_seconds ? FillEnd::kTimeLimit
                                                 : FillEnd::kContinue;
}

}  // namespace furrballs::bench::memory
