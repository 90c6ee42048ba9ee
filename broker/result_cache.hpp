// The broker's result cache (Ding et al. 2009 §5): a sharded LRU with a time-to-live and a byte
// budget. An entry is found by a 64-bit hash of its key (the normalized query: distinct analyzed
// terms with their counts, mode, k, and the cluster's generation signature, so a new generation
// never serves stale results) and stores the key itself, compared on every hit: a hash collision
// is a miss, never another query's answer. The index stays 8 bytes an entry however long queries are.
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

  static uint64_t hash_key(const std::string& key);  // FNV-1a, 64 bits

 private:
  struct Entry {
    uint64_t hash;
    std::string key, value;
    std::chrono::steady_clock::time_point expires;
  };
  struct Shard {
    mutable std::mutex mutex;
    std::list<Entry> lru;  // most recent first
    std::unordered_map<uint64_t, std::list<Entry>::iterator> index;
    size_t bytes = 0;
    uint64_t hits = 0, misses = 0, evictions = 0;
  };
  Shard& shard_of(uint64_t hash) { return shards_[(hash >> 32) % shards_.size()]; }
  void evict(Shard& shard, std::list<Entry>::iterator it);

  size_t shard_budget_;
  std::chrono::milliseconds ttl_;
  std::vector<Shard> shards_;
};

}  // namespace warp
