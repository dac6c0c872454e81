// engine/spill/fault_injection_fs.h: a RocksDB FileSystem that fails on
// command, for tests of the spill tier under disk errors (ENOSPC, EIO) and
// slow syncs.
//
// Thread safety: thread-safe; the switches are atomics that a test flips
// while RocksDB's threads use the files.
#ifndef FURRBALLS_ENGINE_SPILL_FAULT_INJECTION_FS_H_
#define FURRBALLS_ENGINE_SPILL_FAULT_INJECTION_FS_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>

#include <rocksdb/env.h>
#include <rocksdb/file_system.h>

namespace furrballs {
namespace spill {

class FaultInjectionFs : public rocksdb::FileSystemWrapper {
 public:
  enum class Fault : int {
    kNone = 0,
    kNoSpace,  // writes fail as with ENOSPC (IOStatus::NoSpace)
    kIoError,  // writes fail as with EIO
  };

  // Wraps the default file system.
  FaultInjectionFs();

  const char* Name() const override { return "FaultInjectionFs"; }

  // Every later write, sync and file creation fails with `fault`.
  void SetWriteFault(Fault fault) {
    write_fault_.store(static_cast<int>(fault), std::memory_order_relaxed);
  }
  // Every later random read fails with EIO.
  void SetReadFault(bool on) { read_fault_.store(on, std::memory_order_relaxed); }
  // Every later Sync, Fsync and RangeSync of a written file takes `delay`
  // longer (a disk that stalls on writeback); zero turns it off.
  void SetSyncDelay(std::chrono::microseconds delay) {
    sync_delay_us_.store(delay.count(), std::memory_order_relaxed);
  }
  // Syncs that were slowed down so far.
  uint64_t delayed_syncs() const {
    return delayed_syncs_.load(std::memory_order_relaxed);
  }

  uint64_t injected() const {
    return injected_.load(std::memory_order_relaxed);
  }

  // The status a write should return now (OK when no fault is set).
  rocksdb::IOStatus WriteStatus();
  rocksdb::IOStatus ReadStatus();
  // Sleeps for the sync delay, if one is set. A sync fault, not a test's
  // wait: the stall is what the test inflicts on RocksDB.
  void DelaySync();

  rocksdb::IOStatus NewWritableFile(
      const std::string& name, const rocksdb::FileOptions& options,
      std::unique_ptr<rocksdb::FSWritableFile>* file,
      rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus NewRandomAccessFile(
      const std::string& name, const rocksdb::FileOptions& options,
      std::unique_ptr<rocksdb::FSRandomAccessFile>* file,
      rocksdb::IODebugContext* dbg) override;

 private:
  std::atomic<int> write_fault_{0};
  std::atomic<bool> read_fault_{false};
  std::atomic<int64_t> sync_delay_us_{0};
  std::atomic<uint64_t> delayed_syncs_{0};
  std::atomic<uint64_t> injected_{0};
};

// An Env over `fs` (rocksdb::NewCompositeEnv), for SpillStoreOptions::env.
std::unique_ptr<rocksdb::Env> NewFaultInjectionEnv(
    const std::shared_ptr<FaultInjectionFs>& fs);

}  // namespace spill
}  // namespace furrballs

#endif  // FURRBALLS_ENGINE_SPILL_FAULT_INJECTION_FS_H_
