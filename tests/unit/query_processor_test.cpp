// The CPU query processor against the brute-force reference: thousands of random queries on
// random collections, every codec, every mode, both exact OR algorithms, one and several
// partitions; plus the Cranfield collection with its real queries.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <atomic>
#include <map>
#include <random>
#include <thread>

#include "common/index/index_builder.hpp"
#include "common/util/status.hpp"
#include "indexer/reader/document_reader.hpp"
#include "leaf/query/cpu_query_processor.hpp"
#include "leaf/query/query_log.hpp"
#include "leaf/query/topk_queue.hpp"
#include "tests/support/test_data.hpp"
#include "tests/bench/synthetic_collection.hpp"
#include "tests/support/brute_force.hpp"
#include "tests/support/in_memory_index.hpp"
#include "tests/support/test_seed.hpp"
#include "tests/support/topk_match.hpp"

namespace warp {
namespace {

using testing::BruteForceIndex;
using testing::InMemoryIndex;

struct RandomCase {
  std::string codec;
  uint32_t partitions;
};

class RandomCollectionTest : public ::testing::TestWithParam<RandomCase> {};

TEST_P(RandomCollectionTest, EveryModeMatchesBruteForce) {
  const RandomCase& param = GetParam();
  const uint64_t seed = testing::test_seed() ^ std::hash<std::string>{}(param.codec) ^ param.partitions;
  std::mt19937_64 rng(seed);
  synthetic::CollectionParams params;
  params.documents = std::uniform_int_distribution<uint32_t>(500, 4000)(rng);
  params.vocabulary = std::uniform_int_distribution<uint32_t>(50, 3000)(rng);
  params.mean_length = std::uniform_real_distribution<double>(5, 60)(rng);
  params.zipf_exponent = std::uniform_real_distribution<double>(0.7, 1.3)(rng);
  params.seed = seed;

  BuildOptions options;
  options.codec = param.codec;
  options.partitions = param.partitions;
  IndexBuilder builder(options);
  BruteForceIndex reference;
  uint32_t doc = 0;
  synthetic::generate_collection(params, [&](const std::vector<std::string>& terms) {
    builder.add_analyzed({"d" + std::to_string(doc++), "", "", 0}, terms);
    reference.add(terms);
  });
  const std::vector<BuiltPartition> built = builder.build();
  auto queries = synthetic::generate_queries(300, params.vocabulary + 5, 5, seed + 7);  // a few unknown terms
  queries.push_back({"t0", "t0", "t1"});  // a repeated term weighs by its query-term frequency
  queries.push_back({"no-such-term"});

  for (OrAlgorithm algorithm : {OrAlgorithm::kMaxScore, OrAlgorithm::kBlockMaxWand, OrAlgorithm::kTiles}) {
    InMemoryIndex index(built, algorithm);
    for (size_t q = 0; q < queries.size(); ++q) {
      for (QueryMode mode : {QueryMode::kAnd, QueryMode::kOr, QueryMode::kAndOr}) {
        for (size_t k : {size_t{1}, size_t{10}, size_t{100}, size_t{1000}}) {
          const std::vector<Hit> expected = reference.search(queries[q], mode, k);
          const std::vector<Hit> actual = index.search({queries[q], mode, k});
          ASSERT_TRUE(testing::same_topk(expected, actual, reference, queries[q]))
              << "query " << q << " mode " << to_string(mode) << " k " << k << " algorithm "
              << or_algorithm_name(algorithm) << " seed " << seed;
        }
      }
    }
  }
}

std::vector<RandomCase> random_cases() {
  std::vector<RandomCase> cases;
  for (const Codec* codec : all_codecs()) {
    cases.push_back({std::string(codec->name()), 1});
    cases.push_back({std::string(codec->name()), 3});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(AllCodecs, RandomCollectionTest, ::testing::ValuesIn(random_cases()), [](const auto& info) {
  std::string name(info.param.codec + "_p" + std::to_string(info.param.partitions));
  for (char& c : name) c = c == '-' ? '_' : c;
  return name;
});

// Long lists of frequent terms with small k: the dynamic-pruning paths (non-essential lists in
// MaxScore, block skips in BlockMax-WAND) run many times per query.
TEST(CpuQueryProcessor, LongListsWithPruningMatchBruteForce) {
  const uint64_t seed = testing::test_seed() + 11;
  synthetic::CollectionParams params;
  params.documents = 30000;
  params.vocabulary = 400;
  params.mean_length = 25;
  params.zipf_exponent = 0.9;
  params.seed = seed;
  BuildOptions options;
  options.codec = "bp128";
  IndexBuilder builder(options);
  BruteForceIndex reference;
  synthetic::generate_collection(params, [&](const std::vector<std::string>& terms) {
    builder.add_analyzed({"", "", "", 0}, terms);
    reference.add(terms);
  });
  const auto built = builder.build();
  const auto queries = synthetic::generate_queries(150, params.vocabulary, 6, seed);
  for (OrAlgorithm algorithm : {OrAlgorithm::kMaxScore, OrAlgorithm::kBlockMaxWand, OrAlgorithm::kTiles}) {
    CpuQueryProcessor processor(built[0].view, {algorithm});
    for (size_t q = 0; q < queries.size(); ++q) {
      for (size_t k : {size_t{1}, size_t{10}, size_t{50}}) {
        const QueryResult result = processor.search({queries[q], QueryMode::kOr, k});
        ASSERT_TRUE(
            testing::same_topk(reference.search(queries[q], QueryMode::kOr, k), result.hits, reference, queries[q]))
            << "query " << q << " k " << k << " algorithm " << or_algorithm_name(algorithm) << " seed " << seed;
      }
    }
  }
}

// Tiled OR's edges: lists whose scores are flat (a term in every document), a term confined to one
// stretch (tiles skipped around it), terms at the two ends of the docID range, tiles of every size
// the list lengths choose, and k beyond the matches; every OR algorithm against the reference.
TEST(CpuQueryProcessor, OrAcrossTilesMatchesBruteForce) {
  const uint64_t seed = testing::test_seed() + 31;
  std::mt19937_64 rng(seed);
  BuildOptions options;
  options.partitions = 2;
  IndexBuilder builder(options);
  BruteForceIndex reference;
  for (uint32_t d = 0; d < 60000; ++d) {
    std::vector<std::string> terms(1 + rng() % 12, "filler");
    terms.push_back("common");
    if (d % 7 == 0) terms.push_back("seventh");
    if (d >= 30000 && d < 30300 && rng() % 3 == 0) terms.push_back("stretch");
    if (d < 5 || d >= 59995) terms.push_back("ends");
    if (rng() % 997 == 0) terms.insert(terms.end(), 1 + rng() % 3, "scattered");
    builder.add_analyzed({"d" + std::to_string(d), "", "", 0}, terms);
    reference.add(terms);
  }
  const auto built = builder.build();
  const std::vector<std::vector<std::string>> queries = {{"common"},
                                                         {"common", "seventh"},
                                                         {"common", "stretch"},
                                                         {"stretch", "ends"},
                                                         {"ends"},
                                                         {"seventh", "scattered", "stretch"},
                                                         {"common", "seventh", "stretch", "ends", "scattered"},
                                                         {"scattered", "missing"}};
  for (OrAlgorithm algorithm : {OrAlgorithm::kMaxScore, OrAlgorithm::kBlockMaxWand, OrAlgorithm::kTiles}) {
    InMemoryIndex index(built, algorithm);
    for (size_t q = 0; q < queries.size(); ++q) {
      for (size_t k : {size_t{1}, size_t{10}, size_t{100}, size_t{1000}, size_t{10000}}) {
        ASSERT_TRUE(testing::same_topk(reference.search(queries[q], QueryMode::kOr, k),
                                       index.search({queries[q], QueryMode::kOr, k}), reference, queries[q]))
            << "query " << q << " k " << k << " algorithm " << or_algorithm_name(algorithm) << " seed " << seed;
      }
    }
  }
}

TEST(CpuQueryProcessor, AndCountsMatchesAndSkipsBlocks) {
  BuildOptions options;
  IndexBuilder builder(options);
  // "common" in every document, "rare" in every 1000th: AND must skip most blocks of "common".
  for (int d = 0; d < 100000; ++d) {
    std::vector<std::string> terms{"common"};
    if (d % 1000 == 0) terms.push_back("rare");
    builder.add_analyzed({"d" + std::to_string(d), "", "", 0}, terms);
  }
  const auto built = builder.build();
  CpuQueryProcessor processor(built[0].view);
  const QueryResult result = processor.search({{"common", "rare"}, QueryMode::kAnd, 10});
  EXPECT_EQ(result.and_matches, 100u);
  EXPECT_EQ(result.hits.size(), 10u);
  EXPECT_LT(result.stats.blocks_decoded, result.stats.blocks_total / 4);
}

// k = 0 (a leaf request may carry it; the broker refuses it): nothing enters, and the queue never
// reads the front of its empty heap.
TEST(TopkQueue, AQueueOfNoHitsAdmitsNothing) {
  TopkQueue none(0);
  EXPECT_FALSE(none.full());
  EXPECT_FALSE(none.would_enter(1e30f));
  EXPECT_FALSE(none.insert(1e30f, 7));
  EXPECT_TRUE(none.take_sorted().empty());
  TopkQueue one(1);
  EXPECT_TRUE(one.would_enter(0));
  EXPECT_TRUE(one.insert(2, 7));
  EXPECT_TRUE(one.full());
  EXPECT_EQ(one.threshold(), 2);
  EXPECT_FALSE(one.would_enter(2));  // a tie does not enter
  EXPECT_TRUE(one.would_enter(3));
}

// A floored queue: below k hits, scores from the floor up enter (its ties too: the k-th best may
// equal it), lower ones neither enter nor pass would_enter, and the floor is the threshold until
// k hits are in.
TEST(TopkQueue, AFloorAdmitsItsTiesAndKeepsOutWhatIsBelow) {
  TopkQueue q(3, 10);
  EXPECT_TRUE(q.full());
  EXPECT_FALSE(q.would_enter(9));
  EXPECT_TRUE(q.would_enter(10));
  EXPECT_FALSE(q.insert(9, 1));
  EXPECT_TRUE(q.insert(10, 2));
  EXPECT_TRUE(q.insert(15, 3));
  EXPECT_LT(q.threshold(), 10);
  EXPECT_GT(q.threshold(), 9);
  EXPECT_TRUE(q.insert(12, 4));  // k hits: the worst of them is the threshold now
  EXPECT_EQ(q.threshold(), 10);
  EXPECT_FALSE(q.would_enter(10));
  const std::vector<Hit> hits = q.take_sorted();
  ASSERT_EQ(hits.size(), 3u);
  EXPECT_EQ(hits[0].doc, 3u);
  EXPECT_EQ(hits[2].doc, 2u);
  // Past 2^23, where units are a float's last bit apart, the floor's ties still enter (floor - 1/2
  // rounds to an even floor there).
  for (const Score floor : {Score(8388610), Score(8388609), Score(16777214)}) {
    TopkQueue big(2, floor);
    EXPECT_TRUE(big.would_enter(floor)) << floor;
    EXPECT_FALSE(big.would_enter(floor - 1)) << floor;
    EXPECT_TRUE(big.insert(floor, 1)) << floor;
    EXPECT_FALSE(big.insert(floor - 1, 2)) << floor;
    EXPECT_TRUE(floor > big.threshold() && floor - 1 <= big.threshold()) << floor;
  }
}

// The floor of an OR query from its terms' best postings (TermInfo::tops) and, past kTermTops,
// their rank floors (TermInfo::ranks): never above the k-th best score the query has, above zero
// for most queries of frequent terms, and the answers of all three OR algorithms with it are those
// without it, hit for hit, for k from 1 to kMaxTopK.
TEST(CpuQueryProcessor, TheTermsBestPostingsFloorOrWithoutChangingIt) {
  const uint64_t seed = testing::test_seed() + 23;
  std::mt19937_64 rng(seed);
  synthetic::CollectionParams params;
  params.documents = std::uniform_int_distribution<uint32_t>(3000, 20000)(rng);
  params.vocabulary = std::uniform_int_distribution<uint32_t>(200, 3000)(rng);
  params.mean_length = 30;
  params.zipf_exponent = 1.0;
  params.seed = seed;
  BuildOptions options;
  options.partitions = 2;
  IndexBuilder builder(options);
  uint32_t doc = 0;
  synthetic::generate_collection(params, [&](const std::vector<std::string>& terms) {
    builder.add_analyzed({"d" + std::to_string(doc++), "", "", 0}, terms);
  });
  const std::vector<BuiltPartition> built = builder.build();
  const auto queries = synthetic::generate_queries(120, params.vocabulary, 4, seed + 1);
  const std::vector<size_t> ks{1, 3, 10, 11, 20, 35, 100, 150, 1000};
  std::map<size_t, size_t> floored;  // by k
  size_t searches_per_k = 0;
  for (const BuiltPartition& part : built) {
    ASSERT_FALSE(part.view.term_tops.empty());
    ASSERT_FALSE(part.view.term_rank_floors.empty());
    for (OrAlgorithm algorithm : {OrAlgorithm::kTiles, OrAlgorithm::kMaxScore, OrAlgorithm::kBlockMaxWand}) {
      const CpuQueryProcessor with(part.view, {algorithm, true}), without(part.view, {algorithm, false});
      for (const auto& terms : queries) {
        for (size_t k : ks) {
          const Query query(terms, QueryMode::kOr, k);
          const QueryResult a = with.search(query), b = without.search(query);
          ASSERT_TRUE(testing::identical_hits(b.hits, a.hits)) << "k " << k << " seed " << seed;
          const QueryScoring scoring = score_query(query, part.view);
          const Score floor = or_floor(scoring, part.view, k);
          if (b.hits.size() == k) {
            // Hits carry BM25 scores; the floor is in the query's units.
            EXPECT_LE(floor * scoring.score_of_unit, b.hits.back().score) << "k " << k << " seed " << seed;
          } else {
            EXPECT_EQ(floor, 0) << "k " << k << ": fewer hits than k, yet a floor";
          }
          floored[k] += floor > 0;
        }
        ++searches_per_k;
      }
    }
  }
  for (size_t k : ks) {
    EXPECT_GT(floored[k], k <= 100 ? searches_per_k / 3 : size_t{0})
        << "the floor should be there for most of these queries at k " << k;
  }
}

// A list's rank floors against its scores sorted: never above the r-th best, at most a 256th of
// the largest below it, one for each rank the list reaches, with block maxima and without; on fresh
// random scores each run, ties and zeros included, lists up to 300,000 long.
TEST(RankFloors, AreAtMostTheRthBestAndCloseToIt) {
  const uint64_t seed = testing::test_seed() + 29;
  std::mt19937_64 rng(seed);
  std::vector<Score> floors;
  for (int round = 0; round < 300; ++round) {
    // Lists of a few postings to thousands, and some long enough for the blocks' low end.
    const size_t size = round % 10 == 9 ? std::uniform_int_distribution<size_t>(128000, 300000)(rng)
                                        : std::uniform_int_distribution<size_t>(0, 3000)(rng);
    std::vector<Score> scores(size);
    const int kind = round % 3;  // spread, few distinct values, a few large among small
    for (Score& score : scores) {
      score = kind == 0   ? std::uniform_real_distribution<float>(0, 20)(rng)
              : kind == 1 ? static_cast<float>(std::uniform_int_distribution<int>(0, 4)(rng))
                          : (std::uniform_int_distribution<int>(0, 99)(rng) == 0
                                 ? 50.0f
                                 : std::uniform_real_distribution<float>(0, 1)(rng));
    }
    // Without block maxima, and with the maxima of 128-score blocks (a long list's low end).
    std::vector<Score> maxima;
    for (size_t b = 0; b < size; b += 128)
      maxima.push_back(*std::max_element(scores.begin() + b, scores.begin() + std::min(size, b + 128)));
    std::vector<Score> with_maxima;
    compute_rank_floors(scores, maxima, 128, with_maxima);
    compute_rank_floors(scores, {}, 128, floors);
    ASSERT_EQ(with_maxima.size(), floors.size());
    floors.insert(floors.end(), with_maxima.begin(), with_maxima.end());
    std::vector<Score> sorted = scores;
    std::sort(sorted.begin(), sorted.end(), std::greater<Score>());
    size_t expected = 0;
    while (expected < kRankFloors.size() && kRankFloors[expected] <= size) ++expected;
    ASSERT_EQ(floors.size(), 2 * expected) << "size " << size << " seed " << seed;
    const Score largest = sorted.empty() ? 0 : sorted.front();
    for (size_t i = 0; i < floors.size(); ++i) {
      const size_t r = i % expected;
      const Score best = sorted[kRankFloors[r] - 1];
      EXPECT_LE(floors[i], best) << "rank " << kRankFloors[r] << " seed " << seed;
      EXPECT_GE(floors[i], best - largest / 256 * 1.001f) << "rank " << kRankFloors[r] << " seed " << seed;
    }
  }
}

// A run on a thread of its own (the GPU's batches when no batch executor is free): not ready while
// its work runs, the work's answers once it is, and the work's failure from take().
TEST(BatchRun, ARunOnAThreadOfItsOwnIsPolledWithoutWaiting) {
  std::atomic<bool> release{false};
  std::unique_ptr<BatchRun> run = run_on_thread([&] {
    while (!release) std::this_thread::yield();
    QueryResult result;
    result.hits.push_back({7, 1.5f});
    return std::vector<QueryResult>{result};
  });
  for (int i = 0; i < 100; ++i) EXPECT_FALSE(run->poll());  // the work waits for us: never ready here
  release = true;
  while (!run->poll()) std::this_thread::yield();
  const std::vector<QueryResult> answers = run->take();
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_EQ(answers[0].hits[0].doc, 7u);
  std::unique_ptr<BatchRun> failing = run_on_thread([]() -> std::vector<QueryResult> { throw Error("lanes failed"); });
  while (!failing->poll()) std::this_thread::yield();
  EXPECT_THROW(failing->take(), Error);
}

TEST(CpuQueryProcessor, RejectsKAboveLimit) {
  IndexBuilder builder({});
  builder.add_analyzed({"a", "", "", 0}, std::vector<std::string>{"x"});
  const auto built = builder.build();
  CpuQueryProcessor processor(built[0].view);
  EXPECT_THROW(processor.search({{"x"}, QueryMode::kOr, kMaxTopK + 1}), Error);
}

// Repeated query terms (random query-term frequencies 1-4) for three k3: the processor against
// the reference; a query given as counts answers as the same query with its terms repeated; k3 0
// ignores repeats, and linear qtf changes the scores of queries with repeats.
TEST(CpuQueryProcessor, QueryTermFrequencyMatchesBruteForce) {
  const uint64_t seed = testing::test_seed() + 23;
  std::mt19937_64 rng(seed);
  synthetic::CollectionParams params;
  params.documents = 3000;
  params.vocabulary = 800;
  params.mean_length = 30;
  params.seed = seed;
  std::vector<std::vector<std::string>> documents;
  synthetic::generate_collection(params, [&](const std::vector<std::string>& terms) { documents.push_back(terms); });
  std::vector<std::vector<std::string>> distinct_queries =
      synthetic::generate_queries(150, params.vocabulary, 5, seed + 1);
  for (float k3 : {0.0f, 1.5f, std::numeric_limits<float>::infinity()}) {
    BuildOptions options;
    options.bm25.k3 = k3;
    options.partitions = 2;
    IndexBuilder builder(options);
    BruteForceIndex reference(options.bm25);
    for (const auto& terms : documents) {
      builder.add_analyzed({"", "", "", 0}, terms);
      reference.add(terms);
    }
    InMemoryIndex index(builder.build(), OrAlgorithm::kBlockMaxWand);
    size_t changed_by_repeats = 0;
    for (size_t q = 0; q < distinct_queries.size(); ++q) {
      std::vector<std::string> repeated;
      std::vector<uint32_t> counts;
      for (const std::string& term : distinct_queries[q]) {
        counts.push_back(std::uniform_int_distribution<uint32_t>(1, 4)(rng));
        repeated.insert(repeated.end(), counts.back(), term);
      }
      std::shuffle(repeated.begin(), repeated.end(), rng);
      for (QueryMode mode : {QueryMode::kAnd, QueryMode::kOr, QueryMode::kAndOr}) {
        const std::vector<Hit> actual = index.search({repeated, mode, 10});
        ASSERT_TRUE(testing::same_topk(reference.search(repeated, mode, 10), actual, reference, repeated))
            << "query " << q << " k3 " << k3 << " seed " << seed;
        ASSERT_TRUE(testing::identical_hits(actual, index.search({distinct_queries[q], mode, 10, counts})))
            << "counts against repeats, query " << q;
        const std::vector<Hit> once = index.search({distinct_queries[q], mode, 10});
        if (k3 == 0) {
          ASSERT_TRUE(testing::identical_hits(actual, once)) << "k3 0 must ignore repeats, query " << q;
        }
        if (!testing::identical_hits(actual, once)) ++changed_by_repeats;
      }
    }
    if (k3 > 0) {
      EXPECT_GT(changed_by_repeats, distinct_queries.size() / 2) << "k3 " << k3;
    }
  }
  EXPECT_THROW(CpuQueryProcessor(BuiltPartition{}.view).search({{"a", "b"}, QueryMode::kOr, 10, {1}}), Error);
}

// Queries of 65, 200 and 1,000 distinct terms (long natural-language requests) in every mode.
TEST(CpuQueryProcessor, LongQueriesMatchBruteForce) {
  const uint64_t seed = testing::test_seed() + 29;
  synthetic::CollectionParams params;
  params.documents = 4000;
  params.vocabulary = 3000;
  params.mean_length = 40;
  params.seed = seed;
  BuildOptions options;
  options.partitions = 2;
  IndexBuilder builder(options);
  BruteForceIndex reference;
  synthetic::generate_collection(params, [&](const std::vector<std::string>& terms) {
    builder.add_analyzed({"", "", "", 0}, terms);
    reference.add(terms);
  });
  const auto built = builder.build();
  std::mt19937_64 rng(seed);
  for (OrAlgorithm algorithm : {OrAlgorithm::kMaxScore, OrAlgorithm::kBlockMaxWand, OrAlgorithm::kTiles}) {
    InMemoryIndex index(built, algorithm);
    for (uint32_t length : {65u, 200u, 1000u}) {
      std::vector<std::string> query;
      for (uint32_t i = 0; i < length; ++i) {
        query.push_back("t" + std::to_string(std::uniform_int_distribution<uint32_t>(0, params.vocabulary + 50)(rng)));
      }
      for (QueryMode mode : {QueryMode::kAnd, QueryMode::kOr, QueryMode::kAndOr}) {
        for (size_t k : {size_t{10}, size_t{1000}}) {
          ASSERT_TRUE(
              testing::same_topk(reference.search(query, mode, k), index.search({query, mode, k}), reference, query))
              << length << " terms, mode " << to_string(mode) << " k " << k << " seed " << seed;
        }
      }
    }
  }
}

struct JudgedCollection {
  const char* name;
  size_t documents, queries;
};

class JudgedQueriesTest : public ::testing::TestWithParam<JudgedCollection> {};

// Cranfield's short queries and CISI's long requests (repeated words), as the broker analyzes them.
TEST_P(JudgedQueriesTest, EveryModeAndCodecMatchesBruteForce) {
  const std::string dir = testing::test_data_dir() + "/" + GetParam().name;
  ReadReport report;
  const std::vector<SourceDocument> documents = read_documents({dir + "/docs.jsonl"}, report);
  ASSERT_EQ(documents.size(), GetParam().documents) << "the collection is expected in " << dir;
  std::vector<std::string> errors;
  const std::vector<QueryLine> lines = read_query_file(dir + "/queries.tsv", errors);
  ASSERT_EQ(lines.size(), GetParam().queries);

  Analyzer analyzer;
  BruteForceIndex reference;
  std::vector<std::vector<std::string>> doc_terms;
  for (const SourceDocument& doc : documents) {
    std::vector<std::string> terms = analyzer.analyze(doc.title);
    analyzer.analyze(doc.body, terms);
    reference.add(terms);
  }
  std::vector<std::vector<std::string>> queries;
  for (const QueryLine& line : lines) queries.push_back(analyzer.analyze_query(line.text));

  // The reference answers once; every codec and algorithm is compared with them.
  const QueryMode modes[] = {QueryMode::kAnd, QueryMode::kOr, QueryMode::kAndOr};
  const size_t ks[] = {10, 1000};
  std::vector<std::vector<Hit>> expected;
  for (size_t q = 0; q < queries.size(); ++q) {
    for (QueryMode mode : modes) {
      for (size_t k : ks) expected.push_back(reference.search(queries[q], mode, k));
    }
  }
  for (const Codec* codec : all_codecs()) {
    BuildOptions options;
    options.codec = std::string(codec->name());
    options.partitions = 2;
    IndexBuilder builder(options);
    for (const SourceDocument& doc : documents) builder.add_document(doc);
    for (OrAlgorithm algorithm : {OrAlgorithm::kMaxScore, OrAlgorithm::kBlockMaxWand, OrAlgorithm::kTiles}) {
      InMemoryIndex index(builder.build(), algorithm);
      size_t e = 0;
      for (size_t q = 0; q < queries.size(); ++q) {
        for (QueryMode mode : modes) {
          for (size_t k : ks) {
            ASSERT_TRUE(testing::same_topk(expected[e++], index.search({queries[q], mode, k}), reference, queries[q]))
                << "query " << lines[q].id << " codec " << codec->name() << " mode " << to_string(mode) << " k " << k;
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(SharedData, JudgedQueriesTest,
                         ::testing::Values(JudgedCollection{"cranfield", 1400, 225},
                                           JudgedCollection{"cisi", 1460, 112}),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace warp
