// The broker's own parts, without a network: the result cache (hits, misses, expiry, LRU within
// the byte budget, concurrent use), the merge of the partitions' top-k lists against a brute-force
// sort, and bearer tokens. Failover and the fan-out run against real leaves in cluster_test and
// fault_test.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "broker/auth_tokens.hpp"
#include "broker/document_api.hpp"
#include "broker/fan_out.hpp"
#include "broker/result_cache.hpp"
#include "common/util/status.hpp"
#include "tests/support/test_seed.hpp"

namespace warp {
namespace {

using std::chrono::milliseconds;

TEST(ResultCache, ReturnsWhatWasPutAndMissesOtherKeys) {
  ResultCache cache(1 << 20, milliseconds(60000));
  cache.put("or|10|african:1|horse:1", "answer one");
  cache.put("and|10|african:1|horse:1", "answer two");
  EXPECT_EQ(cache.get("or|10|african:1|horse:1"), "answer one");
  EXPECT_EQ(cache.get("and|10|african:1|horse:1"), "answer two");
  EXPECT_EQ(cache.get("or|10|african:1"), std::nullopt);
  const CacheStats stats = cache.stats();
  EXPECT_EQ(stats.hits, 2u);
  EXPECT_EQ(stats.misses, 1u);
  EXPECT_EQ(stats.entries, 2u);
}

TEST(ResultCache, ANewerAnswerForTheSameKeyReplacesTheOlder) {
  ResultCache cache(1 << 20, milliseconds(60000));
  cache.put("q", "old");
  cache.put("q", "new");
  EXPECT_EQ(cache.get("q"), "new");
  EXPECT_EQ(cache.stats().entries, 1u);
  EXPECT_EQ(cache.stats().bytes, std::string("q").size() + std::string("new").size());
}

TEST(ResultCache, AnExpiredEntryIsAMissAndIsDropped) {
  ResultCache cache(1 << 20, milliseconds(-1));  // every entry expired as it is put
  cache.put("q", "answer");
  EXPECT_EQ(cache.get("q"), std::nullopt);
  const CacheStats stats = cache.stats();
  EXPECT_EQ(stats.misses, 1u);
  EXPECT_EQ(stats.evictions, 1u);
  EXPECT_EQ(stats.entries, 0u);
  EXPECT_EQ(stats.bytes, 0u);
}

TEST(ResultCache, EvictsTheLeastRecentlyUsedWithinItsBudget) {
  ResultCache cache(100, milliseconds(60000), 1);  // one shard of 100 bytes
  const std::string forty(39, 'x');                // a one-byte key and 39 bytes: 40 an entry
  cache.put("a", forty);
  cache.put("b", forty);
  ASSERT_EQ(cache.get("a"), forty);  // a is now the most recent
  cache.put("c", forty);             // over budget: b, the least recent, goes
  EXPECT_EQ(cache.get("b"), std::nullopt);
  EXPECT_EQ(cache.get("a"), forty);
  EXPECT_EQ(cache.get("c"), forty);
  EXPECT_EQ(cache.stats().evictions, 1u);
  EXPECT_LE(cache.stats().bytes, 100u);
}

TEST(ResultCache, AnAnswerLargerThanAShardIsNeverCached) {
  ResultCache cache(64, milliseconds(60000), 1);
  cache.put("q", std::string(100, 'x'));
  EXPECT_EQ(cache.get("q"), std::nullopt);
  EXPECT_EQ(cache.stats().entries, 0u);
}

TEST(ResultCache, ConcurrentUseKeepsEveryAnswerItsOwnAndTheBudget) {
  const uint64_t seed = testing::test_seed();
  const size_t budget = 64 << 10;
  ResultCache cache(budget, milliseconds(60000), 4);
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(seed + t);
      for (int i = 0; i < 20000; ++i) {
        const std::string key = "q" + std::to_string(rng() % 3000);
        if (rng() % 2 == 0) {
          cache.put(key, "answer to " + key);
        } else if (auto got = cache.get(key); got && *got != "answer to " + key) {
          ++wrong;
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_LE(cache.stats().bytes, budget);
  EXPECT_GT(cache.stats().hits, 0u);
}

// P partitions' top-k lists (each sorted as a leaf sends it, scores with many ties), merged, against
// every hit sorted by (score descending, docID ascending) and cut at k.
TEST(MergeHits, EqualsABruteForceSortOfEveryPartitionsHits) {
  const uint64_t seed = testing::test_seed();
  std::mt19937_64 rng(seed);
  for (int round = 0; round < 200; ++round) {
    const size_t partitions = 1 + rng() % 6;
    const size_t k = 1 + rng() % 40;
    FanOutResult result;
    std::vector<std::pair<float, DocId>> all;
    DocId next_doc = 0;
    for (size_t p = 0; p < partitions; ++p) {
      PartitionOutcome outcome;
      outcome.partition = static_cast<uint32_t>(p);
      outcome.status = "ok";
      const size_t hits = rng() % (k + 5);
      std::vector<std::pair<float, DocId>> mine;
      for (size_t h = 0; h < hits; ++h) {
        next_doc += 1 + static_cast<DocId>(rng() % 5);
        mine.push_back({static_cast<float>(rng() % 8) * 0.5f, next_doc});  // few distinct scores: ties
      }
      std::sort(mine.begin(), mine.end(),
                [](auto a, auto b) { return a.first > b.first || (a.first == b.first && a.second < b.second); });
      if (mine.size() > k) mine.resize(k);  // a leaf answers its own top k
      for (const auto& [score, doc] : mine) outcome.hits.push_back({doc, score, "", "", ""});
      all.insert(all.end(), mine.begin(), mine.end());
      result.partitions.push_back(std::move(outcome));
    }
    std::sort(all.begin(), all.end(),
              [](auto a, auto b) { return a.first > b.first || (a.first == b.first && a.second < b.second); });
    if (all.size() > k) all.resize(k);
    const std::vector<const BrokerHit*> merged = merge_hits(result, k);
    ASSERT_EQ(merged.size(), all.size()) << "seed " << seed << " round " << round;
    for (size_t i = 0; i < all.size(); ++i) {
      ASSERT_EQ(merged[i]->score, all[i].first) << "seed " << seed << " round " << round << " rank " << i;
      ASSERT_EQ(merged[i]->doc, all[i].second) << "seed " << seed << " round " << round << " rank " << i;
    }
  }
}

TEST(MergeHits, ADocumentAnsweredByTwoPartitionsCountsOnceAsItsWrittenCopy) {
  // "a" replaced by a write: its new copy in partition 1's segment (written, a docID past the
  // generation's), its old one in partition 0, which has not applied the write yet.
  FanOutResult result;
  result.partitions.resize(2);
  result.partitions[0].hits = {{3, 9.0f, "a", "", "", 0}, {5, 4.0f, "b", "", "", 0}};
  result.partitions[1].hits = {{7, 6.0f, "c", "", "", 1}, {1203, 2.0f, "a", "", "", 1, /*written=*/true}};
  const std::vector<const BrokerHit*> merged = merge_hits(result, 10);
  ASSERT_EQ(merged.size(), 3u);
  EXPECT_EQ(merged[0]->id, "c");
  EXPECT_EQ(merged[1]->id, "b");
  EXPECT_EQ(merged[2]->id, "a");
  EXPECT_EQ(merged[2]->doc, 1203u) << "the written copy is the one kept";
  // With k 2 the old copy does not take a place either.
  const std::vector<const BrokerHit*> top2 = merge_hits(result, 2);
  ASSERT_EQ(top2.size(), 2u);
  EXPECT_EQ(top2[0]->id, "c");
  EXPECT_EQ(top2[1]->id, "b");
  // Ids are not compared where no hit is written (a generation holds each id once).
  result.partitions[1].hits[1].written = false;
  EXPECT_EQ(merge_hits(result, 10).size(), 4u);
}

TEST(MergeHits, NoPartitionAnsweredGivesNoHits) {
  FanOutResult result;
  result.partitions.resize(3);  // every one timed out: no hits
  EXPECT_TRUE(merge_hits(result, 10).empty());
}

class AuthTokensTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = std::filesystem::temp_directory_path() / ("warp-tokens-" + std::to_string(::getpid()) + "-" +
                                                      ::testing::UnitTest::GetInstance()->current_test_info()->name());
  }
  void TearDown() override { std::filesystem::remove(path_); }
  void write(const std::string& text) { std::ofstream(path_) << text; }
  std::filesystem::path path_;
};

TEST_F(AuthTokensTest, AllowsListedBearerTokensOnly) {
  write("# the clients' tokens\nalpha-123\n\n  \nbeta-456\n");
  AuthTokens tokens(path_.string());
  EXPECT_EQ(tokens.size(), 2u);
  EXPECT_TRUE(tokens.allows("Bearer alpha-123"));
  EXPECT_TRUE(tokens.allows("Bearer beta-456"));
  EXPECT_FALSE(tokens.allows("Bearer alpha-12"));
  EXPECT_FALSE(tokens.allows("Bearer alpha-1234"));
  EXPECT_FALSE(tokens.allows("Basic alpha-123"));
  EXPECT_FALSE(tokens.allows("alpha-123"));
  EXPECT_FALSE(tokens.allows("Bearer # the clients' tokens"));
  EXPECT_FALSE(tokens.allows(""));
}

// Scopes: a bare token searches only; write and admin as listed; a line with an unknown scope or a
// third word is left out (fail closed), its neighbours kept.
TEST_F(AuthTokensTest, ScopesSayWhoMayWrite) {
  write("reader-1\nwriter-2 read,write\nonly-writes-3 write\nroot-4 admin\nodd-5 read,delete\nodd-6 read extra\n");
  AuthTokens tokens(path_.string());
  EXPECT_EQ(tokens.size(), 4u);
  EXPECT_TRUE(tokens.allows("Bearer reader-1"));
  EXPECT_FALSE(tokens.allows("Bearer reader-1", AuthTokens::kWrite));
  EXPECT_TRUE(tokens.allows("Bearer writer-2"));
  EXPECT_TRUE(tokens.allows("Bearer writer-2", AuthTokens::kWrite));
  EXPECT_FALSE(tokens.allows("Bearer only-writes-3"));
  EXPECT_TRUE(tokens.allows("Bearer only-writes-3", AuthTokens::kWrite));
  EXPECT_TRUE(tokens.allows("Bearer root-4", AuthTokens::kWrite));
  EXPECT_TRUE(tokens.allows("Bearer root-4", AuthTokens::kAdmin));
  EXPECT_FALSE(tokens.allows("Bearer writer-2", AuthTokens::kAdmin));
  EXPECT_FALSE(tokens.allows("Bearer odd-5"));
  EXPECT_FALSE(tokens.allows("Bearer odd-6"));
}

// Polls `tokens` (each call may reload the file, at most once a second) until `allowed` says the
// state was reached, for at most ten seconds.
bool eventually(AuthTokens& tokens, const std::string& authorization, bool allowed) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    if (tokens.allows(authorization) == allowed) return true;
    std::this_thread::sleep_for(milliseconds(50));
  }
  return false;
}

TEST_F(AuthTokensTest, ADeletedFileAcceptsNoTokenUntilItIsBack) {
  write("alpha-123\n");
  AuthTokens tokens(path_.string());
  ASSERT_TRUE(tokens.allows("Bearer alpha-123"));
  std::filesystem::remove(path_);
  EXPECT_TRUE(eventually(tokens, "Bearer alpha-123", false)) << "a deleted token file must fail closed";
  EXPECT_EQ(tokens.size(), 0u);
  write("beta-456\n");
  EXPECT_TRUE(eventually(tokens, "Bearer beta-456", true));
  EXPECT_FALSE(tokens.allows("Bearer alpha-123"));
}

TEST_F(AuthTokensTest, AChangeOfContentIsSeenWhateverTheModificationTime) {
  write("alpha-123\n");
  const auto written = std::filesystem::last_write_time(path_);
  AuthTokens tokens(path_.string());
  ASSERT_TRUE(tokens.allows("Bearer alpha-123"));
  write("gamma-789\n");
  std::filesystem::last_write_time(path_, written);  // as a copy that keeps times would leave it
  EXPECT_TRUE(eventually(tokens, "Bearer gamma-789", true));
  EXPECT_FALSE(tokens.allows("Bearer alpha-123"));
}

TEST_F(AuthTokensTest, AnUnreadableFileAtStartIsAClearError) {
  EXPECT_THROW(AuthTokens(path_.string() + ".missing"), Error);
}

// The write API keeps every field of a document (the indexed ones strings), takes the path's id,
// and refuses what it cannot index or what is nested too deep.
TEST(CheckDocument, KeepsEveryFieldAndRefusesWhatItCannotIndex) {
  const CheckedDocument kept =
      check_document(R"({"title":"T","lang":"en","year":1990,"tags":{"a":[1,2]},"id":"x"})", "", 4096);
  EXPECT_EQ(kept.error, "");
  EXPECT_EQ(kept.id, "x");
  EXPECT_EQ(kept.line, R"({"id":"x","lang":"en","tags":{"a":[1,2]},"title":"T","year":1990})");
  EXPECT_EQ(check_document(R"({"body":"b","n":null})", "p1", 4096).line, R"({"body":"b","id":"p1","n":null})");
  EXPECT_EQ(check_document(R"({"id":"x","body":5})", "", 4096).error, "\"body\" is not a string");
  EXPECT_EQ(check_document(R"({"id":"x"})", "y", 4096).status, 400);
  EXPECT_EQ(check_document(R"({"id":""})", "", 4096).status, 400);
  EXPECT_EQ(check_document(std::string(5000, ' '), "", 4096).status, 413);
  // 32 levels (the object and 31 arrays) taken; 33 refused.
  const auto nested = [](int arrays) {
    return R"({"id":"x","deep":)" + std::string(static_cast<size_t>(arrays), '[') +
           std::string(static_cast<size_t>(arrays), ']') + "}";
  };
  EXPECT_EQ(check_document(nested(31), "", 4096).error, "");
  EXPECT_EQ(check_document(nested(32), "", 4096).status, 400);
  EXPECT_NE(check_document(nested(32), "", 4096).error.find("nested"), std::string::npos);
}

}  // namespace
}  // namespace warp
