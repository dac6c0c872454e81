// engine/common/error.h: the engine's categorized result codes (report §3.6).
//
// Thread safety: plain values and pure functions; safe everywhere.
//
// Inside the engine, fallible operations return an Error rather than throwing.
// A miss is not an error: lookups return an empty optional for a miss and an
// Error only when something went wrong. The service maps these codes to gRPC
// status codes in exactly one place (service/status_mapping.h).
#ifndef FURRBALLS_ENGINE_COMMON_ERROR_H_
#define FURRBALLS_ENGINE_COMMON_ERROR_H_

#include <cstdint>
#include <string_view>

namespace furrballs {

// The high nibble of each value is its category, so that callers can filter
// by category (`ErrorCategory(e) == ErrorCategory::kCache`) without a table.
enum class Error : uint16_t {
  kOk = 0x000,

  // Initialization and topology.
  kNoSuchNode = 0x101,         // a node id outside the allowed topology
  kInvalidTopology = 0x102,    // a simulated topology that cannot be built
  kInvalidArgument = 0x103,    // an option or argument out of its range

  // Memory.
  kAllocationFailed = 0x201,   // the kernel refused memory on a node
  kNoMemory = 0x202,           // no memory can be reclaimed for a write

  // Cache structure.
  kKeyNotFound = 0x301,        // the key is not present (internal use)
  kAbandonedSet = 0x302,       // fail-fast: another writer holds the slot
  kCacheFull = 0x303,          // fixed-capacity table has no free slot
  kVersionMismatch = 0x304,    // compare-and-set saw another version
  kAlreadyExists = 0x305,      // set-if-absent found a live key
  kKeyTooLarge = 0x306,
  kValueTooLarge = 0x307,
  kEmptyKey = 0x308,

  // Storage (spill tier).
  kStorageIo = 0x401,
  kStorageCorrupt = 0x402,

  // Threading and lifecycle.
  kShuttingDown = 0x501,
  kQueueFull = 0x502,
};

enum class ErrorCategory : uint8_t {
  kNone = 0,
  kInit = 1,
  kMemory = 2,
  kCache = 3,
  kStorage = 4,
  kThreading = 5,
};

constexpr ErrorCategory CategoryOf(Error e) {
  return static_cast<ErrorCategory>(static_cast<uint16_t>(e) >> 8);
}

constexpr std::string_view ErrorName(Error e) {
  switch (e) {
    case Error::kOk: return "OK";
    case Error::kNoSuchNode: return "NO_SUCH_NODE";
    case Error::kInvalidTopology: return "INVALID_TOPOLOGY";
    case Error::kInvalidArgument: return "INVALID_ARGUMENT";
    case Error::kAllocationFailed: return "ALLOCATION_FAILED";
    case Error::kNoMemory: return "NO_MEMORY";
    case Error::kKeyNotFound: return "KEY_NOT_FOUND";
    case Error::kAbandonedSet: return "ABANDONED_SET";
    case Error::kCacheFull: return "CACHE_FULL";
    case Error::kVersionMismatch: return "VERSION_MISMATCH";
    case Error::kAlreadyExists: return "ALREADY_EXISTS";
    case Error::kKeyTooLarge: return "KEY_TOO_LARGE";
    case Error::kValueTooLarge: return "VALUE_TOO_LARGE";
    case Error::kEmptyKey: return "EMPTY_KEY";
    case Error::kStorageIo: return "STORAGE_IO";
    case Error::kStorageCorrupt: return "STORAGE_CORRUPT";
    case Error::kShuttingDown: return "SHUTTING_DOWN";
    case Error::kQueueFull: return "QUEUE_FULL";
  }
  return "UNKNOWN";
}

}  // namespace furrballs

#endif  // FURRBALLS_ENGINE_COMMON_ERROR_H_
