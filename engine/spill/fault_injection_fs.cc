#include "engine/spill/fault_injection_fs.h"

#include <thread>
#include <utility>

namespace furrballs {
namespace spill {
namespace {

class FaultyWritableFile : public rocksdb::FSWritableFileOwnerWrapper {
 public:
  FaultyWritableFile(std::unique_ptr<rocksdb::FSWritableFile>&& file,
                     FaultInjectionFs* fs)
      : FSWritableFileOwnerWrapper(std::move(file)), fs_(fs) {}

  rocksdb::IOStatus Append(const rocksdb::Slice& data,
                           const rocksdb::IOOptions& options,
                           rocksdb::IODebugContext* dbg) override {
    rocksdb::IOStatus s = fs_->WriteStatus();
    return s.ok() ? FSWritableFileOwnerWrapper::Append(data, options, dbg) : s;
  }
  rocksdb::IOStatus Append(const rocksdb::Slice& data,
                           const rocksdb::IOOptions& options,
                           const rocksdb::DataVerificationInfo& info,
                           rocksdb::IODebugContext* dbg) override {
    rocksdb::IOStatus s = fs_->WriteStatus();
    return s.ok() ? FSWritableFileOwnerWrapper::Append(data, options, info, dbg)
                  : s;
  }
  rocksdb::IOStatus Sync(const rocksdb::IOOptions& options,
                         rocksdb::IODebugContext* dbg) override {
    fs_->DelaySync();
    rocksdb::IOStatus s = fs_->WriteStatus();
    return s.ok() ? FSWritableFileOwnerWrapper::Sync(options, dbg) : s;
  }
  rocksdb::IOStatus Fsync(const rocksdb::IOOptions& options,
                          rocksdb::IODebugContext* dbg) override {
    fs_->DelaySync();
    rocksdb::IOStatus s = fs_->WriteStatus();
    return s.ok() ? FSWritableFileOwnerWrapper::Fsync(options, dbg) : s;
  }
  rocksdb::IOStatus RangeSync(uint64_t offset, uint64_t nbytes,
                              const rocksdb::IOOptions& options,
                              rocksdb::IODebugContext* dbg) override {
    fs_->DelaySync();
    rocksdb::IOStatus s = fs_->WriteStatus();
    return s.ok() ? FSWritableFileOwnerWrapper::RangeSync(offset, nbytes,
                                                          options, dbg)
                  : s;
  }

 private:
  FaultInjectionFs* const fs_;
};

class FaultyRandomAccessFile : public rocksdb::FSRandomAccessFileOwnerWrapper {
 public:
  FaultyRandomAccessFile(std::unique_ptr<rocksdb::FSRandomAccessFile>&& file,
                         FaultInjectionFs* fs)
      : FSRandomAccessFileOwnerWrapper(std::move(file)), fs_(fs) {}

  rocksdb::IOStatus Read(uint64_t offset, size_t n,
                         const rocksdb::IOOptions& options,
                         rocksdb::Slice* result, char* scratch,
                         rocksdb::IODebugContext* dbg) const override {
    rocksdb::IOStatus s = fs_->ReadStatus();
    return s.ok() ? FSRandomAccessFileOwnerWrapper::Read(offset, n, options,
                                                         result, scratch, dbg)
                  : s;
  }
  rocksdb::IOStatus MultiRead(rocksdb::FSReadRequest* reqs, size_t num_reqs,
                              const rocksdb::IOOptions& options,
                              rocksdb::IODebugContext* dbg) override {
    rocksdb::IOStatus s = fs_->ReadStatus();
    return s.ok() ? FSRandomAccessFileOwnerWrapper::MultiRead(reqs, num_reqs,
                                                              options, dbg)
                  : s;
  }

 private:
  FaultInjectionFs* const fs_;
};

}  // namespace

FaultInjectionFs::FaultInjectionFs()
    : FileSystemWrapper(rocksdb::FileSystem::Default()) {}

rocksdb::IOStatus FaultInjectionFs::WriteStatus() {
  switch (static_cast<Fault>(write_fault_.load(std::memory_order_relaxed))) {
    case Fault::kNone:
      return rocksdb::IOStatus::OK();
    case Fault::kNoSpace:
      injected_.fetch_add(1, std::memory_order_relaxed);
      return rocksdb::IOStatus::NoSpace("injected ENOSPC");
    case Fault::kIoError:
      injected_.fetch_add(1, std::memory_order_relaxed);
      return rocksdb::IOStatus::IOError("injected EIO");
  }
  return rocksdb::IOStatus::OK();
}

void FaultInjectionFs::DelaySync() {
  const int64_t us = sync_delay_us_.load(std::memory_order_relaxed);
  if (us <= 0) return;
  delayed_syncs_.fetch_add(1, std::memory_order_relaxed);
  std::this_thread::sleep_for(std::chrono::microseconds(us));
}

rocksdb::IOStatus FaultInjectionFs::ReadStatus() {
  if (!read_fault_.load(std::memory_order_relaxed)) {
    return rocksdb::IOStatus::OK();
  }
  injected_.fetch_add(1, std::memory_order_relaxed);
  return rocksdb::IOStatus::IOError("injected EIO on read");
}

rocksdb::IOStatus FaultInjectionFs::NewWritableFile(
    const std::string& name, const rocksdb::FileOptions& options,
    std::unique_ptr<rocksdb::FSWritableFile>* file,
    rocksdb::IODebugContext* dbg) {
  rocksdb::IOStatus s = WriteStatus();
  if (!s.ok()) return s;
  std::unique_ptr<rocksdb::FSWritableFile> inner;
  s = target()->NewWritableFile(name, options, &inner, dbg);
  if (s.ok()) file->reset(new FaultyWritableFile(std::move(inner), this));
  return s;
}

rocksdb::IOStatus FaultInjectionFs::NewRandomAccessFile(
    const std::string& name, const rocksdb::FileOptions& options,
    std::unique_ptr<rocksdb::FSRandomAccessFile>* file,
    rocksdb::IODebugContext* dbg) {
  rocksdb::IOStatus s = ReadStatus();
  if (!s.ok()) return s;
  std::unique_ptr<rocksdb::FSRandomAccessFile> inner;
  s = target()->NewRandomAccessFile(name, options, &inner, dbg);
  if (s.ok()) file->reset(new FaultyRandomAccessFile(std::move(inner), this));
  return s;
}

std::unique_ptr<rocksdb::Env> NewFaultInjectionEnv(
    const std::shared_ptr<FaultInjectionFs>& fs) {
  return rocksdb::NewCompositeEnv(fs);
}

}  // namespace spill
}  // namespace furrballs
