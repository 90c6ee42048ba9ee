#include "broker/result_cache.hpp"

namespace warp {

ResultCache::ResultCache(size_t byte_budget, std::chrono::milliseconds ttl, size_t shards)
    : shard_budget_(byte_budget / std::max<size_t>(1, shards)), ttl_(ttl), shards_(std::max<size_t>(1, shards)) {}

uint64_t ResultCache::hash_key(const std::string& key) {
  uint64_t hash = 1469598103934665603ull;
  for (unsigned char c : key) hash = (hash ^ c) * 1099511628211ull;
  return hash;
}

void ResultCache::evict(Shard& shard, std::list<Entry>::iterator it) {
  shard.bytes -= it->key.size() + it->value.size();
  shard.index.erase(it->hash);
  shard.lru.erase(it);
}

std::optional<std::string> ResultCache::get(const std::string& key) {
  const uint64_t hash = hash_key(key);
  Shard& shard = shard_of(hash);
  std::lock_guard<std::mutex> lock(shard.mutex);
  auto found = shard.index.find(hash);
  if (found == shard.index.end() || found->second->key != key) {  // absent, or another key of the same hash
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
  const uint64_t hash = hash_key(key);
  Shard& shard = shard_of(hash);
  std::lock_guard<std::mutex> lock(shard.mutex);
  // The same key, or a colliding one: the newer answer takes the slot.
  if (auto found = shard.index.find(hash); found != shard.index.end()) evict(shard, found->second);
  while (shard.bytes + size > shard_budget_ && !shard.lru.empty()) {
    evict(shard, std::prev(shard.lru.end()));
    ++shard.evictions;
  }
  shard.lru.push_front({hash, key, std::move(value), std::chrono::steady_clock::now() + ttl_});
  shard.index[hash] = shard.lru.begin();
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
