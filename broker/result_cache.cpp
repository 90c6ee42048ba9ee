#include "broker/result_cache.hpp"

namespace warp {

ResultCache::ResultCache(size_t byte_budget, std::chrono::milliseconds ttl, size_t shards)
    : shard_budget_(byte_budget / std::max<size_t>(1, shards)), ttl_(ttl), shards_(std::max<size_t>(1, shards)) {}

void ResultCache::evict(Shard& shard, std::list<Entry>::iterator it) {
  shard.bytes -= it->key.size() + it->value.size();
  shard.index.erase(it->key);
  shard.lru.erase(it);
}

std::optional<std::string> ResultCache::get(const std::string& key) {
  Shard& shard = shard_of(key);
  std::lock_guard<std::mutex> lock(shard.mutex);
  auto found = shard.index.find(key);
  if (found == shard.index.end()) {
    ++shard.misses;
    return std::nullopt;
  }
  if (found->second->expires < std::chrono::steady_clock::now()) {
    evict(shard, found->second);
    ++shard.evictions;
    ++shard.misses;
    return std::nullopt;
  }
  shard.lru.splice(shard.lru.begin(), shard.lru, found->second);
  ++shard.hits;
  return found->second->value;
}

void ResultCache::put(const std::string& key, std::string value) {
  const size_t size = key.size() + value.size();
  if (size > shard_budget_) return;  // larger than a shard: never cached
  Shard& shard = shard_of(key);
  std::lock_guard<std::mutex> lock(shard.mutex);
  if (auto found = shard.index.find(key); found != shard.index.end()) evict(shard, found->second);
  while (shard.bytes + size > shard_budget_ && !shard.lru.empty()) {
    evict(shard, std::prev(shard.lru.end()));
    ++shard.evictions;
  }
  shard.lru.push_front({key, std::move(value), std::chrono::steady_clock::now() + ttl_});
  shard.index[key] = shard.lru.begin();
  shard.bytes += size;
}

CacheStats ResultCache::stats() const {
  CacheStats total;
  for (const Shard& shard : shards_) {
    std::lock_guard<std::mutex> lock(shard.mutex);
    total.hits += shard.hits;
    total.misses += shard.misses;
    total.evictions += shard.evictions;
    total.bytes += shard.bytes;
    total.entries += shard.lru.size();
  }
  return total;
}

}  // namespace warp
