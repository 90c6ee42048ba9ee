#include "indexer/writes/write_log.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <future>
#include <unordered_map>

#include "common/util/byte_io.hpp"
#include "common/util/checksum.hpp"
#include "common/util/status.hpp"

namespace warp::writes {
namespace {

constexpr size_t kHeader = 8;               // length, CRC-32
constexpr uint32_t kMaxRecord = 64u << 20;  // a document is far smaller (the broker's limit)

void put32(std::string& out, uint32_t v) { out.append(reinterpret_cast<const char*>(&v), 4); }
void put64(std::string& out, uint64_t v) { out.append(reinterpret_cast<const char*>(&v), 8); }

std::string encode(uint64_t sequence, const WriteOp& op) {
  std::string payload;
  put64(payload, sequence);
  payload.push_back(static_cast<char>(op.kind));
  put32(payload, static_cast<uint32_t>(op.id.size()));
  payload += op.id;
  put32(payload, static_cast<uint32_t>(op.document.size()));
  payload += op.document;
  std::string record;
  put32(record, static_cast<uint32_t>(payload.size()));
  put32(record, crc32_of(payload));
  return record + payload;
}

// One record's payload read back; false if it does not hold together.
bool decode(std::string_view payload, uint64_t& sequence, WriteOp& op) {
  if (payload.size() < 8 + 1 + 4) return false;
  std::memcpy(&sequence, payload.data(), 8);
  const uint8_t kind = static_cast<uint8_t>(payload[8]);
  if (kind != 1 && kind != 2) return false;
  op.kind = static_cast<WriteOp::Kind>(kind);
  uint32_t id_length = 0, document_length = 0;
  std::memcpy(&id_length, payload.data() + 9, 4);
  if (payload.size() < 13ull + id_length + 4) return false;
  op.id.assign(payload.data() + 13, id_length);
  std::memcpy(&document_length, payload.data() + 13 + id_length, 4);
  if (payload.size() != 17ull + id_length + document_length) return false;
  op.document.assign(payload.data() + 17 + id_length, document_length);
  return true;
}

// Reads whole records from `fd` up to `limit` bytes; calls each(sequence, op, end offset). Returns
// the end of the last whole record.
uint64_t scan(int fd, uint64_t limit, const std::function<void(uint64_t, const WriteOp&, uint64_t)>& each) {
  uint64_t at = 0;
  std::string header(kHeader, '\0'), payload;
  while (at + kHeader <= limit) {
    if (::pread(fd, header.data(), kHeader, static_cast<off_t>(at)) != static_cast<ssize_t>(kHeader)) break;
    uint32_t length = 0, crc = 0;
    std::memcpy(&length, header.data(), 4);
    std::memcpy(&crc, header.data() + 4, 4);
    if (length > kMaxRecord || at + kHeader + length > limit) break;
    payload.resize(length);
    if (::pread(fd, payload.data(), length, static_cast<off_t>(at + kHeader)) != static_cast<ssize_t>(length)) break;
    uint64_t sequence = 0;
    WriteOp op;
    if (crc32_of(payload) != crc || !decode(payload, sequence, op)) break;
    at += kHeader + length;
    each(sequence, op, at);
  }
  return at;
}

}  // namespace

WriteLog::WriteLog(std::string path) : path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0640);
  if (fd_ < 0) throw Error("cannot open the write log " + path_ + ": " + std::strerror(errno));
  {  // the file's directory entry durable too: a log created just before a power loss is not lost
    const std::string dir = std::filesystem::path(path_).parent_path().string();
    const int dir_fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    const bool synced = dir_fd >= 0 && ::fsync(dir_fd) == 0;
    if (dir_fd >= 0) ::close(dir_fd);
    if (!synced) throw Error("cannot sync the directory of the write log " + path_ + ": " + std::strerror(errno));
  }
  const off_t size = ::lseek(fd_, 0, SEEK_END);
  uint64_t expected = 1;
  bool gap = false;
  const uint64_t whole = scan(fd_, static_cast<uint64_t>(size), [&](uint64_t sequence, const WriteOp&, uint64_t) {
    gap = gap || sequence != expected;
    expected = sequence + 1;
  });
  if (gap) throw Error("the write log " + path_ + " has a gap in its sequence numbers: not written by this program");
  last_sequence_ = expected - 1;
  bytes_ = whole;
  if (whole < static_cast<uint64_t>(size)) {  // a torn last write: never acknowledged
    truncated_ = static_cast<uint64_t>(size) - whole;
    if (::ftruncate(fd_, static_cast<off_t>(whole)) != 0 || ::fsync(fd_) != 0)
      throw Error("cannot cut the torn end off the write log " + path_ + ": " + std::strerror(errno));
  }
  committer_ = std::thread([this] { commit_loop(); });
}

WriteLog::~WriteLog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  committer_.join();
  ::close(fd_);
}

void WriteLog::append(std::vector<WriteOp> ops, Done done) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    pending_.push_back({std::move(ops), std::move(done)});
  }
  wake_.notify_one();
}

void WriteLog::flush() {
  std::promise<void> answered;
  append({}, [&answered](uint64_t, const std::string&) { answered.set_value(); });
  answered.get_future().wait();
}

uint64_t WriteLog::last_sequence() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return last_sequence_;
}

uint64_t WriteLog::bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return bytes_;
}

// Everything waiting, written in one go and synced once; every append answered after the sync. A
// failed write or sync (a full disk) answers every append of the group with the error and cuts the
// file back to where the group began: nothing of it stays.
void WriteLog::commit_loop() {
  for (;;) {
    std::vector<Pending> group;
    uint64_t sequence = 0, start = 0;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || !pending_.empty(); });
      if (pending_.empty()) return;  // stopping, nothing left
      group.swap(pending_);
      sequence = last_sequence_;
      start = bytes_;
    }
    std::string bytes;
    std::vector<uint64_t> last_of;
    for (const Pending& pending : group) {
      for (const WriteOp& op : pending.ops) bytes += encode(++sequence, op);
      last_of.push_back(sequence);
    }
    std::string error;
    size_t done = 0;
    while (done < bytes.size() && error.empty()) {
      const ssize_t n = ::pwrite(fd_, bytes.data() + done, bytes.size() - done, static_cast<off_t>(start + done));
      if (n > 0)
        done += static_cast<size_t>(n);
      else if (!(n < 0 && errno == EINTR))
        error = std::strerror(n < 0 ? errno : ENOSPC);
    }
    if (error.empty() && ::fdatasync(fd_) != 0) error = std::strerror(errno);
    if (!error.empty()) {
      if (::ftruncate(fd_, static_cast<off_t>(start)) != 0) {
      }  // best effort: recovery cuts a torn end anyway
      error = "the write log could not be written (" + error + "); nothing of this request was kept";
      for (Pending& pending : group) pending.done(0, error);
      continue;
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      last_sequence_ = sequence;
      bytes_ = start + bytes.size();
    }
    for (size_t i = 0; i < group.size(); ++i) {
      if (durable_ && !group[i].ops.empty()) durable_(last_of[i] + 1 - group[i].ops.size(), group[i].ops);
      group[i].done(last_of[i], "");
    }
  }
}

void WriteLog::replay(uint64_t after, const std::function<void(uint64_t, const WriteOp&)>& each) const {
  const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error("cannot read the write log " + path_ + ": " + std::strerror(errno));
  scan(fd, bytes(), [&](uint64_t sequence, const WriteOp& op, uint64_t) {
    if (sequence > after) each(sequence, op);
  });
  ::close(fd);
}

LogState write_live_documents(const WriteLog& log, uint64_t up_to, const std::string& jsonl_path) {
  std::unordered_map<std::string, std::pair<uint64_t, WriteOp>> last;  // id → its last op
  log.replay(0, [&](uint64_t sequence, const WriteOp& op) {
    if (sequence <= up_to) last[op.id] = {sequence, op};
  });
  std::vector<std::pair<uint64_t, const WriteOp*>> puts;
  LogState state;
  for (const auto& [id, entry] : last) {
    if (entry.second.kind == WriteOp::Kind::kPut)
      puts.emplace_back(entry.first, &entry.second);
    else
      state.deleted_ids.push_back(id);
  }
  std::sort(puts.begin(), puts.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::ofstream out(jsonl_path, std::ios::binary | std::ios::trunc);
  for (const auto& [sequence, op] : puts) out << op->document << '\n';
  out.close();
  if (!out) throw Error("cannot write " + jsonl_path);
  state.puts = puts.size();
  return state;
}

}  // namespace warp::writes
