// Constrained queries (+required, -excluded, "phrases" and -"phrases" on word positions, filters
// over columns: query_constraints.hpp) on the GPU processor against
// the CPU processor and the brute-force reference, on fresh random collections each run: single
// searches (lanes), the batcher's path, batches with and without executors, every mode. Without a
// GPU (or a CUDA build) the tests are skipped with the reason.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "common/index/index_builder.hpp"
#include "common/query/filter.hpp"
#include "leaf/gpu/gpu_runtime.hpp"
#include "leaf/query/cpu_query_processor.hpp"
#include "tests/bench/synthetic_collection.hpp"
#include "tests/support/brute_force.hpp"
#include "tests/support/test_seed.hpp"
#include "tests/support/topk_match.hpp"
#ifdef WARP_HAVE_CUDA
#include "leaf/gpu/gpu_query_processor.hpp"
#endif

namespace warp {
namespace {

#ifdef WARP_HAVE_CUDA

struct Constrained {
  std::vector<BuiltPartition> partitions;
  testing::BruteForceIndex reference;
  std::vector<Query> queries;
  std::vector<std::pair<std::string, int>> fields;  // by doc: its lang and year (-1: none)
  std::vector<std::vector<std::string>> words;      // by doc: its terms in order
};

bool holds(const std::vector<std::string>& words, const std::vector<std::string>& phrase) {
  return std::search(words.begin(), words.end(), phrase.begin(), phrase.end()) != words.end();
}

// The test's own reading of a filter of the forms it writes: year>=N, lang:X, and OR of the two.
bool allows(const FilterNode& filter, const std::pair<std::string, int>& doc) {
  if (filter.kind == FilterNode::Kind::kOr) return allows(filter.children[0], doc) || allows(filter.children[1], doc);
  if (filter.kind == FilterNode::Kind::kEquals) return doc.first == filter.value;
  return doc.second >= 0 && doc.second >= filter.number;
}

Constrained constrained_collection(uint64_t seed) {
  std::mt19937_64 rng(seed);
  synthetic::CollectionParams params;
  params.documents = std::uniform_int_distribution<uint32_t>(5000, 30000)(rng);
  params.vocabulary = std::uniform_int_distribution<uint32_t>(100, 2000)(rng);
  params.mean_length = std::uniform_real_distribution<double>(8, 50)(rng);
  params.seed = seed;
  BuildOptions options;
  options.columns = parse_column_schema("lang", "year");
  options.positions = true;  // from each document's body, its terms as text
  IndexBuilder builder{options};
  Constrained c;
  synthetic::generate_collection(params, [&](const std::vector<std::string>& terms) {
    const std::string lang = std::vector<std::string>{"en", "fr", "de"}[rng() % 3];
    const int year = rng() % 10 == 0 ? -1 : static_cast<int>(1950 + rng() % 70);
    std::string body;
    for (const std::string& term : terms) body += (body.empty() ? "" : " ") + term;
    builder.add_analyzed({"", "", "", 0,
                          "{\"lang\":\"" + lang + "\"" + (year < 0 ? "" : ",\"year\":" + std::to_string(year)) +
                              ",\"body\":\"" + body + "\"}"},
                         terms);
    c.reference.add(terms);
    c.fields.emplace_back(lang, year);
    c.words.push_back(terms);
  });
  c.partitions = builder.build();
  c.reference.filter_allows = [fields = c.fields](const FilterNode& filter, DocId doc) {
    return allows(filter, fields[doc]);
  };
  c.reference.phrase_holds = [words = c.words](const std::vector<std::string>& phrase, DocId doc) {
    return holds(words[doc], phrase);
  };
  // Two or three words in a row of a document (the first or an excluded one held by a few).
  const auto phrase = [&] {
    const std::vector<std::string>* doc = nullptr;
    while (doc == nullptr || doc->size() < 3) doc = &c.words[rng() % c.words.size()];
    const size_t length = 2 + rng() % 2, at = rng() % (doc->size() - length + 1);
    return std::vector<std::string>(doc->begin() + static_cast<std::ptrdiff_t>(at),
                                    doc->begin() + static_cast<std::ptrdiff_t>(at + length));
  };
  const auto term = [&] { return "t" + std::to_string(std::uniform_int_distribution<uint32_t>(0, 80)(rng)); };
  for (int q = 0; q < 120; ++q) {
    Query query({}, QueryMode::kOr, q % 2 ? 10 : 1000);
    for (int i = std::uniform_int_distribution<int>(1, 5)(rng); i > 0; --i) query.terms.push_back(term());
    if (q % 3 != 1) query.required.push_back(query.terms[static_cast<size_t>(q) % query.terms.size()]);
    for (int g = q % 4; g > 0; --g)
      query.excluded.push_back(g == 2 ? std::vector{term(), term()} : std::vector{term()});
    // Filters allowing few documents (sent as those allowed) and most (as those kept out), also
    // on queries without words' constraints.
    if (q % 5 == 0 || q % 7 == 0) {
      const std::string text = q % 2 ? "year>=" + std::to_string(1950 + rng() % 70)
                                     : "lang:de OR year>=" + std::to_string(2010 + rng() % 10);
      query.filter = std::make_shared<const FilterNode>(parse_filter(text));
      if (q % 7 == 0) query.required.clear(), query.excluded.clear();
    }
    if (q % 6 == 3) {
      query.phrases.push_back(phrase());
      query.terms.insert(query.terms.end(), query.phrases.back().begin(), query.phrases.back().end());
    }
    if (q % 11 == 5) query.excluded_phrases.push_back(phrase());
    c.queries.push_back(std::move(query));
  }
  return c;
}

// Every query in every mode: the processor's answers (one by one, and as one batch) against the
// CPU's and the reference's, AND's match counts included.
void expect_cpu_answers(const QueryProcessor& gpu, const Constrained& c, const std::string& what) {
  const IndexView& view = c.partitions[0].view;
  CpuQueryProcessor cpu(view);
  for (QueryMode mode : {QueryMode::kOr, QueryMode::kAnd, QueryMode::kAndOr}) {
    std::vector<PreparedQuery> batch;
    for (Query query : c.queries) {
      query.mode = mode;
      batch.push_back(prepare_query(std::move(query), view));
    }
    const std::vector<QueryResult> batched = gpu.search_batch(std::span<const PreparedQuery>(batch));
    for (size_t q = 0; q < batch.size(); ++q) {
      const Query& query = batch[q].query;
      const QueryResult expected = cpu.search(query), alone = gpu.search(query);
      ASSERT_TRUE(testing::same_topk(c.reference.search(query), expected.hits, c.reference, query.terms))
          << "cpu, query " << q << " mode " << to_string(mode);
      for (const QueryResult* actual : {&alone, &batched[q]}) {
        ASSERT_TRUE(testing::identical_hits(expected.hits, actual->hits))
            << what << (actual == &alone ? " alone" : " batched") << ", query " << q << " mode " << to_string(mode);
        if (mode != QueryMode::kOr) ASSERT_EQ(expected.and_matches, actual->and_matches) << what << " query " << q;
      }
    }
  }
}

TEST(GpuConstraints, EveryPathGivesTheCpusAnswers) {
  std::string why;
  if (!gpu::gpu_available(&why)) GTEST_SKIP() << "no usable GPU: " << why;
  const uint64_t seed = testing::test_seed() + 211;
  const Constrained c = constrained_collection(seed);
  const IndexView& view = c.partitions[0].view;
  {
    gpu::GpuQueryProcessor lanes(view, gpu::GpuProcessorOptions{});
    expect_cpu_answers(lanes, c, "lanes");
  }
  gpu::GpuProcessorOptions batching;
  batching.batch = {.threshold = 20000, .max_queries = 8, .max_wait_us = 2000};
  batching.batch_executors = 2;
  gpu::GpuQueryProcessor batched(view, batching);
  expect_cpu_answers(batched, c, "batcher and executors");
}

#else

TEST(GpuConstraints, EveryPathGivesTheCpusAnswers) { GTEST_SKIP() << "no usable GPU: built without CUDA"; }

#endif

}  // namespace
}  // namespace warp
