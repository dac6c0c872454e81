// engine/furrball/operations.h: the options and results of FurrBall's key
// operations (Get, Set, Delete), shared by the public API (furrball.h) and
// the per-node shards, which must not depend on the FurrBall class itself.
//
// Thread safety: plain values.
#ifndef FURRBALLS_ENGINE_FURRBALL_OPERATIONS_H_
#define FURRBALLS_ENGINE_FURRBALL_OPERATIONS_H_

#include <cstdint>

#include "engine/common/error.h"

namespace furrballs {

enum class SetMode : uint8_t {
  kAlways = 0,     // write unconditionally
  kIfAbsent = 1,   // kAlreadyExists if a live (unexpired) entry exists
  kIfVersion = 2,  // kVersionMismatch unless the live version equals
                   // expected_version; kKeyNotFound if absent
};

struct WriteOptions {
  uint64_t ttl_ms = 0;  // 0 = never expires
  SetMode mode = SetMode::kAlways;
  uint64_t expected_version = 0;  // read only with kIfVersion
  // Write compaction (seeds/001): the number of earlier unconditional writes
  // to this key that the caller merged into this one and acknowledges with
  // versions of their own. The engine consumes that many versions just before
  // this write's, so the merged writes' versions are
  // version - superseded_writes ... version - 1, all of them already stale.
  uint32_t superseded_writes = 0;
};

struct GetResult {
  Error error = Error::kOk;
  bool found = false;
  uint64_t version = 0;
  uint64_t ttl_remaining_ms = 0;  // 0 = no expiry
  // The value came back from the spill tier for this Get (a ghost hit that
  // read its page from disk; docs/spill.md).
  bool reloaded = false;
  // GetFromMemory only: not found in memory, but the spill tier holds the
  // key; Get would read it from disk.
  bool on_disk = false;
};

struct SetResult {
  Error error = Error::kOk;
  uint64_t version = 0;  // the written value's version when error == kOk
};

struct DeleteResult {
  Error error = Error::kOk;
  bool deleted = false;  // true if a live entry was removed
};

}  // namespace furrballs

#endif  // FURRBALLS_ENGINE_FURRBALL_OPERATIONS_H_
