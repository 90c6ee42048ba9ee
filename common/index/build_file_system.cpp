#include "common/index/build_file_system.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>

#include <rocksdb/env.h>
#include <rocksdb/file_system.h>

#include "common/util/status.hpp"

namespace warp {
namespace {

// The postings SSTs the builders write (a range's "ingest-postings-NNNN.sst", the in-memory
// builder's "ingest-postings.sst"): ingested, then compacted into blob and SST files and deleted.
// Starting their writeback would write bytes nobody keeps.
bool consumed_by_compaction(const std::string& path) {
  return std::filesystem::path(path).filename().string().rfind("ingest-postings", 0) == 0;
}

// Starts writing a closed file's dirty pages to the disk and returns at once.
void start_writeback(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;  // renamed or removed meanwhile: nothing to start
  ::sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE);
  ::close(fd);
}

class DeferredSyncFile final : public rocksdb::FSWritableFileOwnerWrapper {
 public:
  DeferredSyncFile(std::unique_ptr<rocksdb::FSWritableFile>&& file, std::string path)
      : FSWritableFileOwnerWrapper(std::move(file)), path_(std::move(path)) {}

  rocksdb::IOStatus Sync(const rocksdb::IOOptions&, rocksdb::IODebugContext*) override {
    return rocksdb::IOStatus::OK();
  }
  rocksdb::IOStatus Fsync(const rocksdb::IOOptions&, rocksdb::IODebugContext*) override {
    return rocksdb::IOStatus::OK();
  }
  rocksdb::IOStatus RangeSync(uint64_t, uint64_t, const rocksdb::IOOptions&, rocksdb::IODebugContext*) override {
    return rocksdb::IOStatus::OK();
  }
  rocksdb::IOStatus Close(const rocksdb::IOOptions& options, rocksdb::IODebugContext* dbg) override {
    rocksdb::IOStatus status = FSWritableFileOwnerWrapper::Close(options, dbg);
    if (status.ok() && !closed_ && !consumed_by_compaction(path_)) start_writeback(path_);
    closed_ = true;
    return status;
  }

 private:
  std::string path_;
  bool closed_ = false;
};

class DeferredSyncDirectory final : public rocksdb::FSDirectoryWrapper {
 public:
  using FSDirectoryWrapper::FSDirectoryWrapper;
  rocksdb::IOStatus Fsync(const rocksdb::IOOptions&, rocksdb::IODebugContext*) override {
    return rocksdb::IOStatus::OK();
  }
  rocksdb::IOStatus FsyncWithDirOptions(const rocksdb::IOOptions&, rocksdb::IODebugContext*,
                                        const rocksdb::DirFsyncOptions&) override {
    return rocksdb::IOStatus::OK();
  }
};

class DeferredSyncFileSystem final : public rocksdb::FileSystemWrapper {
 public:
  using FileSystemWrapper::FileSystemWrapper;
  const char* Name() const override { return "WarpsearchDeferredSync"; }

  rocksdb::IOStatus NewWritableFile(const std::string& path, const rocksdb::FileOptions& options,
                                    std::unique_ptr<rocksdb::FSWritableFile>* result,
                                    rocksdb::IODebugContext* dbg) override {
    return wrap(target()->NewWritableFile(path, options, result, dbg), path, result);
  }
  // What an ingestion opens a moved file with, to sync it.
  rocksdb::IOStatus ReopenWritableFile(const std::string& path, const rocksdb::FileOptions& options,
                                       std::unique_ptr<rocksdb::FSWritableFile>* result,
                                       rocksdb::IODebugContext* dbg) override {
    return wrap(target()->ReopenWritableFile(path, options, result, dbg), path, result);
  }
  rocksdb::IOStatus ReuseWritableFile(const std::string& path, const std::string& old_path,
                                      const rocksdb::FileOptions& options,
                                      std::unique_ptr<rocksdb::FSWritableFile>* result,
                                      rocksdb::IODebugContext* dbg) override {
    return wrap(target()->ReuseWritableFile(path, old_path, options, result, dbg), path, result);
  }
  rocksdb::IOStatus NewDirectory(const std::string& path, const rocksdb::IOOptions& options,
                                 std::unique_ptr<rocksdb::FSDirectory>* result, rocksdb::IODebugContext* dbg) override {
    std::unique_ptr<rocksdb::FSDirectory> directory;
    rocksdb::IOStatus status = target()->NewDirectory(path, options, &directory, dbg);
    if (status.ok()) *result = std::make_unique<DeferredSyncDirectory>(std::move(directory));
    return status;
  }

 private:
  static rocksdb::IOStatus wrap(rocksdb::IOStatus status, const std::string& path,
                                std::unique_ptr<rocksdb::FSWritableFile>* result) {
    if (status.ok()) *result = std::make_unique<DeferredSyncFile>(std::move(*result), path);
    return status;
  }
};

void sync_or_throw(const std::string& path, int flags, bool data_only) {
  const int fd = ::open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0) throw Error("cannot open " + path + " to sync it: " + std::strerror(errno));
  const int result = data_only ? ::fdatasync(fd) : ::fsync(fd);
  const int error = errno;
  ::close(fd);
  // EINVAL: a file system that cannot sync this (some refuse directories); nothing to wait for.
  if (result != 0 && error != EINVAL) throw Error("cannot sync " + path + ": " + std::strerror(error));
}

}  // namespace

rocksdb::Env* build_env() {
  static const std::unique_ptr<rocksdb::Env> env =
      rocksdb::NewCompositeEnv(std::make_shared<DeferredSyncFileSystem>(rocksdb::FileSystem::Default()));
  return env.get();
}

void sync_file(const std::string& path) { sync_or_throw(path, O_RDONLY, true); }
void sync_directory(const std::string& dir) { sync_or_throw(dir, O_RDONLY | O_DIRECTORY, false); }

}  // namespace warp
