// I/O threads, one io_context each (concurrency hint 1), shared by whoever needs event loops: the
// broker runs its HTTP connections and its fan-out to the leaves on the same threads, so a query
// is read, sent, answered and written without changing threads.
#pragma once
#include <memory>
#include <thread>
#include <vector>

namespace boost::asio {
class io_context;
}

namespace warp::http {

class IoPool {
 public:
  explicit IoPool(size_t threads);  // 0: one per core
  ~IoPool();                        // stop()
  IoPool(const IoPool&) = delete;
  IoPool& operator=(const IoPool&) = delete;

  size_t size() const { return contexts_.size(); }
  boost::asio::io_context& context(size_t i) { return *contexts_[i]; }
  // The index of the pool thread calling, or -1 from any other thread.
  int current() const;
  // Stops the loops and joins the threads (objects on the loops may then be destroyed anywhere).
  void stop();

 private:
  struct Work;
  std::vector<std::unique_ptr<boost::asio::io_context>> contexts_;
  std::unique_ptr<Work> work_;
  std::vector<std::thread> threads_;
};

}  // namespace warp::http
