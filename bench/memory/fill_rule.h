// bench/memory/fill_rule.h: when the memory fill test stops inserting.
//
// Thread safety: thread-compatible; the driver's main thread owns its
// FillRule.
//
// The fill inserts distinct keys in batches whose user bytes (keys + values)
// equal the memory budget, so that each batch alone could fill the cache
// again. After each batch the server's resident key count is read; the fill
// has settled when that count grew by less than min_growth (0.5%) over the
// batch, or not at all (it may shrink: Furrballs evicts whole pages). A full
// batch is the unit because a cache that is still filling gains far more
// than 0.5% of its keys from a budget's worth of new ones, while one that is
// full only churns. The batch and time limits bound a server that never
// settles; the report then says which limit ended the fill.
#ifndef FURRBALLS_BENCH_MEMORY_FILL_RULE_H_
#define FURRBALLS_BENCH_MEMORY_FILL_RULE_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace furrballs::bench::memory {

struct FillRuleOptions {
  // Settled when a batch adds less than this fraction of the keys resident
  // before it.
  double min_growth = 0.005;
  // Batches inserted at most (>= 2: one to fill, one to see it stopped).
  int max_batches = 10;
  // Seconds of inserting at most; checked between progress steps.
  double max_seconds = 100;
};

enum class FillEnd : uint8_t {
  kContinue,    // not ended: insert another batch
  kSettled,     // the resident count stopped growing
  kBatchLimit,  // max_batches inserted, still growing
  kTimeLimit,   // max_seconds spent, still growing
};

std::string_view FillEndName(FillEnd end);

// Keys in one batch: the fewest whose key and value bytes reach the budget.
// REQUIRES: key_bytes + value_bytes > 0.
uint64_t BatchKeys(uint64_t budget_bytes, size_t key_bytes, size_t value_bytes);

class FillRule {
 public:
  explicit FillRule(const FillRuleOptions& options) : options_(options) {}

  // Call after each whole batch with the resident key count the server
  // reports then. Returns how the fill ends, or kContinue.
  FillEnd AfterBatch(uint64_t resident_keys);

  // Call between progress steps with the seconds spent inserting so far:
  // kTimeLimit once max_seconds have passed, else kContinue.
  FillEnd AfterStep(double elapsed_seconds) const;

  int batches() const { return batches_; }

 private:
  FillRuleOptions options_;
  int batches_ = 0;
  uint64_t last_resident_ = 0;
};

}  // namespace furrballs::bench::memory

#endif  // FURRBALLS_BENCH_MEMORY_FILL_RULE_H_
