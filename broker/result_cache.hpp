// The broker's result cache (Ding et al. 2009 §5): a sharded LRU with a time-to-live and a byte
// budget, keyed by the normalized query (analyzed terms, mode, k) and the cluster's generation
// signature, so a new generation never serves stale results.
#pragma once
#include <chrono>
#include <cstdint>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace warp {

struct CacheStats {
  uint64_t hits = 0, misses = 0, evictions = 0, bytes = 0, entries = 0;
};

class ResultCache {
 public:
  ResultCache(size_t byte_budget, std::chrono::milliseconds ttl, size_t shards = 16);
  std::optional<std::string> get(const std::string& key);
  void put(const std::string& key, std::string value);
  CacheStats stats() const;

 private:
  struct Entry {
    std::string key, value;
    std::chrono::steady_clock::time_point expires;
  };
  struct Shard {
    mutable std::mutex mutex;
    std::list<Entry> lru;  // most recent first
    std::unordered_map<std::string, std::list<Entry>::iterator> index;
    size_t bytes = 0;
    uint64_t hits = 0, misses = 0, evictions = 0;
  };
  Shard& shard_of(const std::string& key) { return shards_[std::hash<std::string>{}(key) % shards_.size()]; }
  void evict(Shard& shard, std::list<Entry>::iterator it);

  size_t shard_budget_;
  std::chrono::milliseconds ttl_;
  std::vector<Shard> shards_;
};

}  // namespace warp
