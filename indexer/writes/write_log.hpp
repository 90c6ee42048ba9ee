// The indexer's write log: documents put and deleted through the API, durable before they are
// acknowledged. One append-only file of records, each [u32 length][u32 CRC-32][payload], payload
// = [u64 sequence][u8 kind][u32 id length][id][u32 document length][document, a JSON object as the
// JSONL reader takes it]. Sequences count from 1 without gaps. Appends wait for a committer thread
// that writes everything waiting and syncs it once (group commit: one fdatasync for all the
// writes that arrived meanwhile), then answers each. Opening recovers: a record cut short or whose
// CRC fails (a write torn by a crash) ends the log, and the file is cut back to the last whole
// record; nothing acknowledged was in it, since an acknowledgement follows the sync.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace warp::writes {

struct WriteOp {
  enum class Kind : uint8_t { kPut = 1, kDelete = 2 };
  Kind kind = Kind::kPut;
  std::string id;
  std::string document;  // kPut: the document's JSON object (one line); kDelete: empty
};

class WriteLog {
 public:
  // The answer to an append: the sequence of its last op (its first is that less ops.size() - 1),
  // or an error (nothing of the append is in the log).
  using Done = std::function<void(uint64_t last_sequence, const std::string& error)>;

  explicit WriteLog(std::string path);  // opens (creating) and recovers; throws Error
  ~WriteLog();                          // answers what is waiting, then stops
  WriteLog(const WriteLog&) = delete;
  WriteLog& operator=(const WriteLog&) = delete;

  // Queues `ops`; `done` is called on the committer thread once they are durable (or failed).
  void append(std::vector<WriteOp> ops, Done done);
  // Called on the committer thread with every append made durable, before its `done`, in sequence
  // order (the write-log tail: indexer/writes/tail_endpoint.hpp). Set before the first append.
  using Durable = std::function<void(uint64_t first_sequence, const std::vector<WriteOp>& ops)>;
  void on_durable(Durable listener) { durable_ = std::move(listener); }
  // Returns once every append queued before it is answered.
  void flush();
  uint64_t last_sequence() const;                          // durable
  uint64_t bytes() const;                                  // of the file, durable
  uint64_t truncated_bytes() const { return truncated_; }  // cut off when opened (a torn write)
  // Every durable record after `after`, in sequence order.
  void replay(uint64_t after, const std::function<void(uint64_t sequence, const WriteOp& op)>& each) const;

 private:
  struct Pending {
    std::vector<WriteOp> ops;
    Done done;
  };
  void commit_loop();

  std::string path_;
  int fd_ = -1;
  uint64_t truncated_ = 0;
  mutable std::mutex mutex_;  // the fields below
  std::condition_variable wake_;
  std::vector<Pending> pending_;
  uint64_t last_sequence_ = 0, bytes_ = 0;
  bool stop_ = false;
  Durable durable_;
  std::thread committer_;
};

// The documents a log leaves in place up to `up_to`: for each id its last op. Written as JSONL
// (the puts, in sequence order) for a build to read after its other inputs (the last copy of an
// id wins), with the ids whose last op is a delete.
struct LogState {
  uint64_t puts = 0;
  std::vector<std::string> deleted_ids;
};
LogState write_live_documents(const WriteLog& log, uint64_t up_to, const std::string& jsonl_path);

}  // namespace warp::writes
