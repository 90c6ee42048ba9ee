// The GPU query processor and decoders against their CPU twins and the brute-force reference, on
// fresh random collections each run and on Cranfield. Without a GPU (or a CUDA build) every test
// is skipped with the reason.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <random>
#include <set>
#include <thread>

#include "common/index/index_builder.hpp"
#include "common/index/posting_list.hpp"
#include "indexer/reader/document_reader.hpp"
#include "leaf/gpu/gpu_runtime.hpp"
#include "leaf/query/cpu_query_processor.hpp"
#include "leaf/query/query_log.hpp"
#include "tests/support/test_data.hpp"
#include "tests/bench/gov2_preset.hpp"
#include "tests/bench/synthetic_collection.hpp"
#include "tests/support/brute_force.hpp"
#include "tests/support/test_seed.hpp"
#include "tests/support/topk_match.hpp"
#ifdef WARP_HAVE_CUDA
#include "leaf/gpu/batch/gpu_batch.hpp"
#include "tests/support/gpu_decode.hpp"
#include "leaf/gpu/gpu_flags.hpp"
#include "leaf/gpu/gpu_query_processor.hpp"
#include "leaf/gpu/gpu_replicas.hpp"
#include "leaf/gpu/intersect/intersect.hpp"
#include "leaf/sched/scheduler.hpp"
#endif

namespace warp {
namespace {

#define WARP_REQUIRE_GPU()                                                   \
  do {                                                                       \
    std::string why;                                                         \
    if (!gpu::gpu_available(&why)) GTEST_SKIP() << "no usable GPU: " << why; \
  } while (0)

struct Collection {
  std::vector<BuiltPartition> partitions;
  testing::BruteForceIndex reference;
  std::vector<std::vector<std::string>> queries;
};

[[maybe_unused]] Collection random_collection(const std::string& codec, uint64_t seed, uint32_t partitions) {
  std::mt19937_64 rng(seed);
  synthetic::CollectionParams params;
  params.documents = std::uniform_int_distribution<uint32_t>(2000, 20000)(rng);
  params.vocabulary = std::uniform_int_distribution<uint32_t>(100, 5000)(rng);
  params.mean_length = std::uniform_real_distribution<double>(5, 60)(rng);
  params.zipf_exponent = std::uniform_real_distribution<double>(0.7, 1.2)(rng);
  params.seed = seed;
  BuildOptions options;
  options.codec = codec;
  options.partitions = partitions;
  IndexBuilder builder(options);
  Collection c;
  synthetic::generate_collection(params, [&](const std::vector<std::string>& terms) {
    builder.add_analyzed({"", "", "", 0}, terms);
    c.reference.add(terms);
  });
  c.partitions = builder.build();
  c.queries = synthetic::generate_queries(200, params.vocabulary + 3, 5, seed + 1);
  return c;
}

#ifdef WARP_HAVE_CUDA

class GpuCodecTest : public ::testing::TestWithParam<const Codec*> {};

TEST_P(GpuCodecTest, DecodersMatchTheCpu) {
  WARP_REQUIRE_GPU();
  const std::string codec(GetParam()->name());
  const uint64_t seed = testing::test_seed() ^ std::hash<std::string>{}(codec);
  const Collection c = random_collection(codec, seed, 1);
  const IndexView& view = c.partitions[0].view;
  gpu::DeviceIndex device(view);
  size_t lists = 0;
  for (const auto& [term, info] : view.lexicon) {
    const PostingListView list = view.list(term, info);
    const std::vector<Posting> expected = decode_posting_list(list);
    const std::vector<Posting> actual = gpu::decode_list_on_gpu(device, term);
    // Gaps (raw values) too, against the CPU codec.
    for (bool frequencies : {false, true}) {
      std::vector<uint32_t> cpu_values(list.count + list.codec->block_size());
      (frequencies ? list.freq_codec : list.codec)->decode_all(frequencies ? list.freqs : list.docs, cpu_values.data());
      cpu_values.resize(list.count);
      ASSERT_EQ(gpu::decode_values_on_gpu(device, term, frequencies), cpu_values)
          << "term " << term << " seed " << seed;
    }
    ASSERT_EQ(expected.size(), actual.size()) << term;
    for (size_t i = 0; i < expected.size(); ++i) {
      ASSERT_EQ(expected[i].doc, actual[i].doc) << "term " << term << " posting " << i << " seed " << seed;
      ASSERT_EQ(expected[i].freq, actual[i].freq) << "term " << term << " posting " << i << " seed " << seed;
    }
    ++lists;
  }
  EXPECT_GT(lists, 50u);
}

// Lists built to reach every branch of the warp decoders: all-zero values (0-bit slots), geometric
// gaps, rare huge outliers (PForDelta exceptions, Rice unary ranges of more than 32 words, 3- and
// 4-byte VByte values), half the values large (more exceptions per block than a warp has lanes),
// wide uniform gaps, one giant value among small ones, geometric gaps beside constant frequencies
// and the reverse (Rice: docID and frequency unary ranges of different widths in one block);
// lengths around the block size and partial last blocks.
IndexView hard_lists_view(const Codec& codec, uint64_t seed) {
  std::mt19937_64 rng(seed);
  IndexView view;
  view.meta.codec = std::string(codec.name());
  DocId doc_end = 0;
  int term = 0;
  for (int shape = 0; shape < 8; ++shape) {
    for (size_t n : {size_t{1}, size_t{5}, size_t{128}, size_t{129}, size_t{300}, size_t{4113}, size_t{50000}}) {
      std::geometric_distribution<uint32_t> small(0.3);
      std::uniform_real_distribution<double> coin(0, 1);
      // DocIDs stay below 2^31: a gap's cap shrinks with the list's length.
      const uint32_t gap_cap = static_cast<uint32_t>(std::min<size_t>(size_t{1} << 24, (size_t{1} << 30) / n));
      auto value = [&](bool frequency) -> uint32_t {
        const uint32_t cap = frequency ? 1u << 20 : gap_cap;
        switch (shape) {
          case 0:
            return 0;
          case 1:
            return small(rng);
          case 2:
            return coin(rng) < 0.05 ? static_cast<uint32_t>(rng() % cap) : small(rng);
          case 3:
            return coin(rng) < 0.5 ? static_cast<uint32_t>(rng() % std::min(cap, 1u << 12)) + 256 : small(rng);
          case 4:
            return static_cast<uint32_t>(rng() % std::min(cap, 1u << 22));
          case 6:
            return frequency ? 0 : small(rng);  // Rice: wide docID ranges, narrow frequency ones
          case 7:
            return frequency ? small(rng) : 0;  // and the other way round
          default:
            return small(rng);
        }
      };
      std::vector<Posting> postings(n);
      DocId doc = kEndDoc;
      for (size_t i = 0; i < n; ++i) {
        // Shape 5: one giant gap and frequency in a list of small ones (Rice: unary codes of
        // thousands of bits inside one block).
        const bool giant = shape == 5 && i == n / 2;
        postings[i] = {doc = doc + value(false) + 1 + (giant ? 1u << 24 : 0), value(true) + 1 + (giant ? 1u << 20 : 0)};
      }
      doc_end = std::max(doc_end, doc + 1);
      const std::vector<Score> scores(n, 1.0f);
      const std::vector<uint32_t> words = encode_posting_list(postings, scores, codec);
      view.lexicon["t" + std::to_string(term++)] = {static_cast<uint32_t>(n), n, view.postings.size(),
                                                    static_cast<uint32_t>(words.size())};
      view.postings.insert(view.postings.end(), words.begin(), words.end());
    }
  }
  view.meta.doc_end = doc_end;
  view.postings.resize(view.postings.size() + kReadPaddingWords, 0);
  return view;
}

TEST_P(GpuCodecTest, WarpDecodersMatchTheCpuOnHardLists) {
  WARP_REQUIRE_GPU();
  const uint64_t seed = testing::test_seed() ^ std::hash<std::string_view>{}(GetParam()->name()) ^ 0x4a7d;
  const IndexView view = hard_lists_view(*GetParam(), seed);
  gpu::DeviceIndex device(view);
  for (const auto& [term, info] : view.lexicon) {
    const PostingListView list = view.list(term, info);
    for (bool frequencies : {false, true}) {
      std::vector<uint32_t> cpu_values(list.count + list.codec->block_size());
      (frequencies ? list.freq_codec : list.codec)->decode_all(frequencies ? list.freqs : list.docs, cpu_values.data());
      cpu_values.resize(list.count);
      ASSERT_EQ(gpu::decode_values_on_gpu(device, term, frequencies), cpu_values)
          << "term " << term << (frequencies ? " frequencies" : " docIDs") << " seed " << seed;
    }
    const std::vector<Posting> expected = decode_posting_list(list);
    const std::vector<Posting> actual = gpu::decode_list_on_gpu(device, term);
    ASSERT_EQ(expected.size(), actual.size()) << term;
    for (size_t i = 0; i < expected.size(); ++i) {
      ASSERT_EQ(expected[i].doc, actual[i].doc) << "term " << term << " posting " << i << " seed " << seed;
      ASSERT_EQ(expected[i].freq, actual[i].freq) << "term " << term << " posting " << i << " seed " << seed;
    }
  }
}

TEST_P(GpuCodecTest, QueriesMatchCpuAndBruteForce) {
  WARP_REQUIRE_GPU();
  const std::string codec(GetParam()->name());
  const uint64_t seed = testing::test_seed() ^ std::hash<std::string>{}(codec) ^ 0x5eed;
  const Collection c = random_collection(codec, seed, 1);
  const IndexView& view = c.partitions[0].view;
  gpu::GpuQueryProcessor gpu_processor(view);
  CpuQueryProcessor cpu_processor(view);
  for (size_t q = 0; q < c.queries.size(); ++q) {
    for (QueryMode mode : {QueryMode::kAnd, QueryMode::kOr, QueryMode::kAndOr}) {
      for (size_t k : {size_t{1}, size_t{10}, size_t{1000}}) {
        const Query query{c.queries[q], mode, k};
        const QueryResult gpu_result = gpu_processor.search(query);
        const QueryResult cpu_result = cpu_processor.search(query);
        ASSERT_TRUE(testing::same_topk(cpu_result.hits, gpu_result.hits, c.reference, c.queries[q]))
            << "GPU vs CPU: query " << q << " mode " << to_string(mode) << " k " << k << " seed " << seed;
        ASSERT_TRUE(
            testing::same_topk(c.reference.search(c.queries[q], mode, k), gpu_result.hits, c.reference, c.queries[q]))
            << "GPU vs reference: query " << q << " mode " << to_string(mode) << " k " << k << " seed " << seed;
        if (mode != QueryMode::kOr) {
          EXPECT_EQ(gpu_result.and_matches, cpu_result.and_matches) << "query " << q;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllCodecs, GpuCodecTest, ::testing::ValuesIn(all_codecs()), [](const auto& info) {
  std::string name(info.param->name());
  for (char& c : name) c = c == '-' ? '_' : c;
  return name;
});

// Sorted distinct docIDs: `count` of them, from [0, range) or clustered into a few dense runs.
std::vector<uint32_t> random_sorted(std::mt19937_64& rng, size_t count, uint64_t range, bool clustered) {
  std::vector<uint32_t> docs;
  if (clustered) {
    uint64_t at = rng() % 1000;
    while (docs.size() < count) {
      const size_t run = 1 + rng() % 500;
      for (size_t i = 0; i < run && docs.size() < count; ++i)
        docs.push_back(static_cast<uint32_t>(at += 1 + rng() % 3));
      at += rng() % 100000;
    }
    return docs;
  }
  while (docs.size() < count) {
    for (size_t i = docs.size(); i < count; ++i) docs.push_back(static_cast<uint32_t>(rng() % range));
    std::sort(docs.begin(), docs.end());
    docs.erase(std::unique(docs.begin(), docs.end()), docs.end());
  }
  return docs;
}

TEST(GpuIntersection, EveryMethodMatchesSetIntersection) {
  WARP_REQUIRE_GPU();
  std::mt19937_64 rng(testing::test_seed() + 3);
  gpu::GpuIntersector intersector(400000);
  const std::vector<std::pair<size_t, size_t>> sizes = {
      {0, 10}, {1, 1}, {1, 1000}, {100, 100}, {1000, 100000}, {50000, 50000}, {200000, 3000000}, {400000, 400000}};
  for (const auto& [short_size, long_size] : sizes) {
    for (bool clustered : {false, true}) {
      const uint64_t range = std::max<uint64_t>(long_size * 3, 16);
      const std::vector<uint32_t> a = random_sorted(rng, short_size, range, clustered);
      const std::vector<uint32_t> b = random_sorted(rng, long_size, range, clustered);
      std::vector<uint32_t> expected;
      std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(expected));
      gpu::DeviceSortedList da(a), db(b);
      for (auto method : {gpu::IntersectMethod::kMergePath, gpu::IntersectMethod::kBinarySearch,
                          gpu::IntersectMethod::kLinearRegression, gpu::IntersectMethod::kHashSegmentation,
                          gpu::IntersectMethod::kHsLrcCompressed}) {
        ASSERT_EQ(intersector.intersect(da, db, method), expected)
            << gpu::to_string(method) << " sizes " << short_size << "/" << long_size << " clustered " << clustered;
      }
    }
  }
}

TEST(GpuQueryProcessor, MaxTreeTopkMatchesTheCpu) {
  WARP_REQUIRE_GPU();
  const uint64_t seed = testing::test_seed() + 7;
  const Collection c = random_collection("bp256", seed, 1);
  const IndexView& view = c.partitions[0].view;
  gpu::GpuQueryProcessor processor(view, {1, gpu::TopkMethod::kMaxTree});
  CpuQueryProcessor cpu(view);
  for (size_t q = 0; q < c.queries.size(); ++q) {
    for (QueryMode mode : {QueryMode::kAnd, QueryMode::kOr, QueryMode::kAndOr}) {
      for (size_t k : {size_t{1}, size_t{10}, size_t{1000}}) {
        const Query query{c.queries[q], mode, k};
        ASSERT_TRUE(testing::same_topk(cpu.search(query).hits, processor.search(query).hits, c.reference, c.queries[q]))
            << "query " << q << " mode " << to_string(mode) << " k " << k << " seed " << seed;
      }
    }
  }
}

TEST(GpuQueryProcessor, ConcurrentLanesGiveTheSameAnswers) {
  WARP_REQUIRE_GPU();
  const uint64_t seed = testing::test_seed() + 99;
  const Collection c = random_collection("bp128", seed, 1);
  const IndexView& view = c.partitions[0].view;
  gpu::GpuQueryProcessor processor(view, {3});
  CpuQueryProcessor cpu(view);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      for (size_t q = t; q < c.queries.size(); q += 6) {
        for (QueryMode mode : {QueryMode::kAnd, QueryMode::kOr, QueryMode::kAndOr}) {
          const Query query{c.queries[q], mode, 10};
          if (!testing::same_topk(cpu.search(query).hits, processor.search(query).hits, c.reference, c.queries[q]))
            ++failures;
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0) << "seed " << seed;
}

TEST(GpuQueryProcessor, AndDecodesOnlyTheSelectedBlocks) {
  WARP_REQUIRE_GPU();
  IndexBuilder builder({});
  for (int d = 0; d < 200000; ++d) {
    std::vector<std::string> terms{"common"};
    if (d % 5000 == 0) terms.push_back("rare");
    builder.add_analyzed({"", "", "", 0}, terms);
  }
  const auto built = builder.build();
  gpu::GpuQueryProcessor processor(built[0].view);
  const QueryResult result = processor.search({{"common", "rare"}, QueryMode::kAnd, 10});
  EXPECT_EQ(result.and_matches, 40u);
  EXPECT_EQ(result.hits.size(), 10u);
  EXPECT_LE(result.stats.blocks_decoded, 1u + 40u);  // the short list plus one block per candidate
}

// Answers of `processor` against the CPU for every query, mode and k, from `threads` client threads.
int mismatches_against_cpu(const QueryProcessor& processor, const Collection& c, const IndexView& view, int threads) {
  CpuQueryProcessor cpu(view);
  std::atomic<int> failures{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < threads; ++t) {
    clients.emplace_back([&, t] {
      for (size_t q = t; q < c.queries.size(); q += threads) {
        for (QueryMode mode : {QueryMode::kAnd, QueryMode::kOr, QueryMode::kAndOr}) {
          for (size_t k : {size_t{10}, size_t{1000}}) {
            const Query query{c.queries[q], mode, k};
            const QueryResult expected = cpu.search(query), actual = processor.search(query);
            if (!testing::same_topk(expected.hits, actual.hits, c.reference, c.queries[q]) ||
                (mode != QueryMode::kOr && expected.and_matches != actual.and_matches)) {
              if (failures++ == 0) ADD_FAILURE() << "query " << q << " mode " << to_string(mode) << " k " << k;
            }
          }
        }
      }
    });
  }
  for (auto& client : clients) client.join();
  return failures.load();
}

TEST(GpuBatching, BatchedQueriesMatchTheCpu) {
  WARP_REQUIRE_GPU();
  for (const char* codec : {"bp128", "hs-lrc", "pfor-ding", "bp256"}) {
    const uint64_t seed = testing::test_seed() + 31 + std::hash<std::string>{}(codec);
    const Collection c = random_collection(codec, seed, 1);
    const IndexView& view = c.partitions[0].view;
    gpu::GpuProcessorOptions options;
    options.batch = {.threshold = 20000, .max_queries = 8, .max_wait_us = 2000};
    gpu::GpuQueryProcessor processor(view, options);
    EXPECT_EQ(mismatches_against_cpu(processor, c, view, 12), 0) << codec << " seed " << seed;
  }
}

TEST(GpuBatching, ExecutorRunsAMixedSpanInOrder) {
  WARP_REQUIRE_GPU();
  const uint64_t seed = testing::test_seed() + 32;
  const Collection c = random_collection("seg-lrc", seed, 1);
  const IndexView& view = c.partitions[0].view;
  gpu::DeviceIndex device(view);
  gpu::BatchExecutor executor(device, {.threshold = 5000, .max_queries = 5});
  CpuQueryProcessor cpu(view);
  std::vector<Query> queries;
  for (size_t q = 0; q < c.queries.size(); ++q) {
    queries.push_back({c.queries[q], static_cast<QueryMode>(q % 3), q % 2 ? size_t{10} : size_t{100}});
  }
  const std::vector<QueryResult> results = executor.run(queries);
  ASSERT_EQ(results.size(), queries.size());
  for (size_t q = 0; q < queries.size(); ++q) {
    ASSERT_TRUE(testing::same_topk(cpu.search(queries[q]).hits, results[q].hits, c.reference, c.queries[q]))
        << "query " << q << " mode " << to_string(queries[q].mode) << " seed " << seed;
  }
}

// Three executors driven from one thread without waiting (start, then poll each in turn), as the
// scheduler's GPU driver does: their phases interleave on three streams (AND batches, then OR and
// AND+OR fallbacks; pieces and small key rows for the rarer paths), every answer is the CPU's, and
// an executor takes its next batch once it gave its results.
TEST(GpuBatching, ExecutorsPolledFromOneThreadGiveTheCpusAnswers) {
  WARP_REQUIRE_GPU();
  const uint64_t seed = testing::test_seed() + 34;
  const Collection c = random_collection("bp128", seed, 1);
  const IndexView& view = c.partitions[0].view;
  gpu::DeviceIndex device(view);
  CpuQueryProcessor cpu(view);
  std::vector<std::unique_ptr<gpu::BatchExecutor>> executors;
  for (size_t i = 0; i < 3; ++i) {
    executors.push_back(std::make_unique<gpu::BatchExecutor>(
        device, gpu::BatchOptions{.threshold = 5000,
                                  .max_queries = 4,
                                  .and_piece_slots = i == 2 ? size_t{512} : size_t{1} << 22,
                                  .or_key_row = i == 2 ? size_t{16} : size_t{1} << 20}));
  }
  std::vector<Query> queries;
  for (size_t q = 0; q < c.queries.size(); ++q) {
    queries.push_back({c.queries[q], static_cast<QueryMode>(q % 3), q % 2 ? size_t{10} : size_t{300}});
  }
  std::vector<PreparedQuery> prepared;  // kept until the executors' answers are taken
  for (const Query& query : queries) prepared.push_back(prepare_query(query, view));
  // Spans of 7 queries dealt to the executors in turn; each polled until done, then given the next.
  constexpr size_t kSpan = 7;
  std::vector<QueryResult> results(queries.size());
  std::vector<size_t> running(executors.size(), SIZE_MAX);
  size_t next = 0, polls = 0, finished = 0;
  while (finished < queries.size()) {
    for (size_t e = 0; e < executors.size(); ++e) {
      if (running[e] == SIZE_MAX) {
        if (next >= queries.size()) continue;
        running[e] = next;
        executors[e]->start(
            std::span<const PreparedQuery>(prepared).subspan(next, std::min(kSpan, queries.size() - next)));
        next += kSpan;
      }
      ++polls;
      if (!executors[e]->poll()) continue;
      std::vector<QueryResult> answers = executors[e]->take_results();
      for (size_t i = 0; i < answers.size(); ++i) results[running[e] + i] = std::move(answers[i]);
      finished += answers.size();
      running[e] = SIZE_MAX;
    }
  }
  for (size_t q = 0; q < queries.size(); ++q) {
    const QueryResult expected = cpu.search(queries[q]);
    ASSERT_TRUE(testing::identical_hits(expected.hits, results[q].hits))
        << "query " << q << " mode " << to_string(queries[q].mode) << " seed " << seed;
    if (queries[q].mode != QueryMode::kOr) {
      ASSERT_EQ(expected.and_matches, results[q].and_matches) << "query " << q << " seed " << seed;
    }
  }
  EXPECT_GT(polls, queries.size() / kSpan) << "every batch answered at its first poll: nothing ran asynchronously";
  EXPECT_THROW(executors[0]->take_results(), Error);  // nothing started
  executors[0]->start(std::span<const PreparedQuery>(prepared).first(3));
  EXPECT_THROW(executors[0]->start(std::span<const PreparedQuery>(prepared).first(3)), Error);  // one batch at a time
  executors[0]->cancel();  // dropped unfinished: the executor is free again
  executors[0]->start(std::span<const PreparedQuery>(prepared).first(3));
  while (!executors[0]->poll()) {
  }
  EXPECT_EQ(executors[0]->take_results().size(), 3u);
}

// start_batch never waits for a batch executor: with the processor's one executor busy (its batch
// not yet polled), a second batch is answered on the lanes, on a thread of its own, while the
// first is polled from this one; both give the CPU's answers.
TEST(GpuBatching, AStartWithEveryExecutorBusyIsAnsweredOnTheLanes) {
  WARP_REQUIRE_GPU();
  const uint64_t seed = testing::test_seed() + 35;
  const Collection c = random_collection("bp128", seed, 1);
  const IndexView& view = c.partitions[0].view;
  gpu::GpuProcessorOptions options;
  options.batch_executors = 1;
  gpu::GpuQueryProcessor gpu(view, options);
  CpuQueryProcessor cpu(view);
  std::vector<Query> first, second;
  for (size_t q = 0; q < c.queries.size(); ++q)
    (q % 2 ? second : first).push_back({c.queries[q], static_cast<QueryMode>(q % 3), 10});
  std::vector<PreparedQuery> first_prepared, second_prepared;  // kept until the runs are answered
  for (const Query& query : first) first_prepared.push_back(prepare_query(query, view));
  for (const Query& query : second) second_prepared.push_back(prepare_query(query, view));
  std::unique_ptr<BatchRun> a = gpu.start_batch(first_prepared);
  std::unique_ptr<BatchRun> b = gpu.start_batch(second_prepared);  // the executor is a's: on the lanes
  for (bool a_done = false, b_done = false; !(a_done && b_done);) {
    a_done = a_done || a->poll();
    b_done = b_done || b->poll();
  }
  for (auto [run, queries] : {std::pair{a.get(), &first}, std::pair{b.get(), &second}}) {
    const std::vector<QueryResult> results = run->take();
    ASSERT_EQ(results.size(), queries->size());
    for (size_t q = 0; q < results.size(); ++q) {
      ASSERT_TRUE(testing::same_topk(cpu.search((*queries)[q]).hits, results[q].hits, c.reference, (*queries)[q].terms))
          << "seed " << seed;
    }
  }
  a.reset();  // the executor back, for the next batch
  std::unique_ptr<BatchRun> again = gpu.start_batch(first_prepared);
  while (!again->poll()) {
  }
  EXPECT_EQ(again->take().size(), first.size());
}

// Batch memory sized by the work: with pieces of two blocks and rows of 16 keys, AND queries run
// as pieces of their shortest list (answers merged) and OR queries that keep more candidates run
// again alone; every answer, its scores and AND's match count stay the CPU's.
TEST(GpuBatching, PiecesAndSmallKeyRowsGiveTheCpusAnswers) {
  WARP_REQUIRE_GPU();
  for (const char* codec : {"bp128", "hs-lrc", "pfor-block", "bp256"}) {
    const uint64_t seed = testing::test_seed() + 33 + std::hash<std::string>{}(codec);
    const Collection c = random_collection(codec, seed, 1);
    const IndexView& view = c.partitions[0].view;
    gpu::DeviceIndex device(view);
    gpu::BatchExecutor executor(device,
                                {.threshold = 5000, .max_queries = 6, .and_piece_slots = 512, .or_key_row = 16});
    CpuQueryProcessor cpu(view);
    std::vector<Query> queries;
    for (size_t q = 0; q < c.queries.size(); ++q) {
      for (QueryMode mode : {QueryMode::kAnd, QueryMode::kOr, QueryMode::kAndOr}) {
        queries.push_back({c.queries[q], mode, q % 2 ? size_t{10} : size_t{200}});
      }
    }
    const std::vector<QueryResult> results = executor.run(queries);
    ASSERT_EQ(results.size(), queries.size());
    for (size_t q = 0; q < queries.size(); ++q) {
      const QueryResult expected = cpu.search(queries[q]);
      ASSERT_TRUE(testing::identical_hits(expected.hits, results[q].hits))
          << codec << " query " << q / 3 << " mode " << to_string(queries[q].mode) << " seed " << seed;
      if (queries[q].mode != QueryMode::kOr) {
        ASSERT_EQ(expected.and_matches, results[q].and_matches) << codec << " query " << q / 3 << " seed " << seed;
      }
    }
    const gpu::BatchExecutor::Splits splits = executor.splits();
    EXPECT_GT(splits.and_split, 0u) << codec << ": no AND query was long enough to run in pieces";
    EXPECT_GT(splits.and_pieces, splits.and_split) << codec;
    EXPECT_GT(splits.or_alone, 0u) << codec << ": no OR query outgrew its key row";
  }
}

// AND top-1000 where more than a block sort's worth of keys share the k-th best's bucket ("a" in
// every other document with term frequencies 1–50 at one length: scores a fraction of a percent
// apart, 400 matches each): the batch refines the threshold inside that bucket instead of
// selecting query by query; answers are the CPU's, ties by docID included.
TEST(GpuBatching, AndTopKRefinesACrowdedBucket) {
  WARP_REQUIRE_GPU();
  IndexBuilder builder({});
  testing::BruteForceIndex reference;
  for (uint32_t d = 0; d < 60000; ++d) {
    std::vector<std::string> terms(60, "x");
    if (d % 2 == 0) {
      for (uint32_t i = 0; i < 1 + (d / 2) % 50; ++i) terms[i] = "a";
    }
    terms[59] = d % 3 == 0 ? "c" : "b";
    builder.add_analyzed({"", "", "", 0}, terms);
    reference.add(terms);
  }
  const auto built = builder.build();
  const IndexView& view = built[0].view;
  gpu::DeviceIndex device(view);
  gpu::BatchExecutor executor(device, {.threshold = 1 << 20, .max_queries = 4});
  CpuQueryProcessor cpu(view);
  std::vector<Query> queries;
  for (size_t k : {1000, 2000}) {
    queries.push_back({{"a", "b"}, QueryMode::kAnd, k});
    queries.push_back({{"a", "x"}, QueryMode::kAnd, k});
    queries.push_back({{"a", "c"}, QueryMode::kAndOr, k});
  }
  const std::vector<QueryResult> results = executor.run(queries);
  for (size_t q = 0; q < queries.size(); ++q) {
    const QueryResult expected = cpu.search(queries[q]);
    EXPECT_TRUE(testing::identical_hits(expected.hits, results[q].hits)) << "query " << q;
    EXPECT_EQ(expected.and_matches, results[q].and_matches) << "query " << q;
  }
  EXPECT_EQ(executor.splits().and_alone, 0u) << "a crowded bucket fell back to a selection query by query";
}

// A partition replicated on two devices (two replicas on device 0 where there is one GPU): searches
// and batches from 8 clients spread over both, every answer the CPU's.
TEST(GpuReplicas, BothReplicasAnswerLikeTheCpu) {
  WARP_REQUIRE_GPU();
  const std::vector<int> devices = gpu::gpu_device_count() >= 2 ? std::vector<int>{0, 1} : std::vector<int>{0, 0};
  const uint64_t seed = testing::test_seed() + 34;
  const Collection c = random_collection("bp128", seed, 1);
  const IndexView& view = c.partitions[0].view;
  gpu::GpuProcessorOptions options;
  options.lanes = 2;
  options.batch_executors = 2;
  gpu::ReplicatedGpuProcessor processor(view, devices, options);
  EXPECT_EQ(mismatches_against_cpu(processor, c, view, 8), 0)
      << "devices " << devices[0] << "," << devices[1] << " seed " << seed;
  CpuQueryProcessor cpu(view);
  std::atomic<int> failures{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < 4; ++t) {
    clients.emplace_back([&, t] {
      for (size_t from = t * 8; from < c.queries.size(); from += 32) {
        std::vector<Query> batch;
        for (size_t q = from; q < std::min(from + 8, c.queries.size()); ++q)
          batch.push_back({c.queries[q], static_cast<QueryMode>(q % 3), 10});
        const std::vector<QueryResult> results = processor.search_batch(batch);
        for (size_t i = 0; i < batch.size(); ++i) {
          if (!testing::identical_hits(cpu.search(batch[i]).hits, results[i].hits) && failures++ == 0) {
            ADD_FAILURE() << "batched query " << from + i << " seed " << seed;
          }
        }
      }
    });
  }
  for (auto& client : clients) client.join();
  EXPECT_EQ(failures.load(), 0);
  const std::vector<uint64_t> answered = processor.answered();
  ASSERT_EQ(answered.size(), 2u);
  EXPECT_GT(answered[0], 0u);
  EXPECT_GT(answered[1], 0u);
}

// Placement (no GPU needed): partitions spread over the devices, replicas on the next ones in turn.
TEST(GpuReplicas, PartitionsSpreadOverDevicesAndReplicasTakeTheNext) {
  EXPECT_EQ(gpu::devices_of_partition(0, {0, 1}, 1), (std::vector<int>{0}));
  EXPECT_EQ(gpu::devices_of_partition(3, {0, 1}, 1), (std::vector<int>{1}));
  EXPECT_EQ(gpu::devices_of_partition(1, {2, 5, 7}, 2), (std::vector<int>{5, 7}));
  EXPECT_EQ(gpu::devices_of_partition(2, {2, 5, 7}, 9), (std::vector<int>{7, 2, 5}));
  EXPECT_EQ(gpu::parse_gpu_devices("0,1,3"), (std::vector<int>{0, 1, 3}));
  for (const char* bad : {"", "0,", "a", "1;2", "-1", ",0"}) EXPECT_THROW(gpu::parse_gpu_devices(bad), Error) << bad;
}

// The leaf's scheduler over the real CPU and GPU processors, 8 clients at once, one GPU driver
// thread for three streams: every answer equals
// the CPU processor's whichever processor (or GPU batch) gave it; once with the scheduler's own
// choices, once with every query on the GPU so that its batches are exercised under load.
TEST(GpuScheduler, AnswersMatchTheCpuUnderConcurrentLoad) {
  WARP_REQUIRE_GPU();
  const uint64_t seed = testing::test_seed() + 33;
  const Collection c = random_collection("bp128", seed, 1);
  const IndexView& view = c.partitions[0].view;
  CpuQueryProcessor cpu(view);
  gpu::GpuProcessorOptions gpu_options;
  gpu_options.batch_executors = 3;
  gpu::GpuQueryProcessor gpu(view, gpu_options);
  for (sched::Policy policy : {sched::Policy::kScheduler, sched::Policy::kGpuOnly}) {
    sched::SchedulerOptions options;
    options.core.policy = policy;
    options.core.cpu_workers = 8;
    options.core.gpu_streams = 3;
    options.gpu_threads = 1;  // one driver keeps the three streams' batches in flight
    options.core.batch_max = 8;
    options.calibration_seconds = 0.2;
    sched::Scheduler scheduler(options);
    const sched::Target target{&view, &cpu, &gpu, nullptr};
    scheduler.calibrate(target);
    std::atomic<size_t> on_gpu{0}, batched{0}, mismatches{0};
    std::vector<std::thread> clients;
    for (size_t t = 0; t < 8; ++t) {
      clients.emplace_back([&, t] {
        for (size_t q = t; q < c.queries.size(); q += 8) {
          for (size_t k : {size_t{10}, size_t{1000}}) {
            const Query query(c.queries[q], static_cast<QueryMode>((q + k) % 3), k);
            const sched::Outcome outcome = scheduler.search(target, query);
            if (!outcome.error.empty() ||
                !testing::same_topk(cpu.search(query).hits, outcome.result.hits, c.reference, c.queries[q]))
              ++mismatches;
            on_gpu += outcome.processor == sched::Processor::kGpu;
            batched += outcome.batch > 1;
          }
        }
      });
    }
    for (auto& client : clients) client.join();
    std::printf("policy %d: %zu of %zu answers from the GPU, %zu in batches\n", static_cast<int>(policy), on_gpu.load(),
                c.queries.size() * 2, batched.load());
    EXPECT_EQ(mismatches, 0u) << "seed " << seed;
    if (policy == sched::Policy::kGpuOnly) {
      EXPECT_EQ(on_gpu, c.queries.size() * 2);
      EXPECT_GT(batched, 0u);
    }
  }
}

TEST(GpuListCache, TightBudgetEvictsAndGivesTheSameAnswers) {
  WARP_REQUIRE_GPU();
  const uint64_t seed = testing::test_seed() + 41;
  const Collection c = random_collection("bp128", seed, 1);
  const IndexView& view = c.partitions[0].view;
  const size_t budget = view.postings.size() * sizeof(uint32_t) / 8;
  for (bool batched : {false, true}) {
    gpu::GpuProcessorOptions options;
    options.lanes = 3;
    options.memory_budget = budget;
    if (batched) options.batch = {.threshold = 20000, .max_queries = 4};
    gpu::GpuQueryProcessor processor(view, options);
    EXPECT_EQ(mismatches_against_cpu(processor, c, view, 6), 0) << "batched " << batched << " seed " << seed;
    const gpu::ListCacheStats stats = processor.device_index().stats();
    EXPECT_TRUE(stats.caching);
    EXPECT_GT(stats.misses, 0u);
    EXPECT_GT(stats.hits, 0u);
    EXPECT_GT(stats.evictions, 0u) << "a budget of 1/8 of the lists must evict";
    EXPECT_EQ(processor.device_memory().list_cache_misses, stats.misses);
  }
}

TEST(GpuOr, DenseAccumulatorsMatchTheCpu) {
  WARP_REQUIRE_GPU();
  const uint64_t seed = testing::test_seed() + 61;
  const Collection c = random_collection("bp256", seed, 1);
  const IndexView& view = c.partitions[0].view;
  for (bool batched : {false, true}) {
    gpu::GpuProcessorOptions options;
    options.or_method = gpu::OrMethod::kDenseAccumulators;
    if (batched) options.batch = {.threshold = 20000, .max_queries = 6};
    gpu::GpuQueryProcessor processor(view, options);
    EXPECT_EQ(mismatches_against_cpu(processor, c, view, 4), 0) << "batched " << batched << " seed " << seed;
  }
}

TEST(GpuOr, TilesOfManyPartitionsAndOddSizes) {
  WARP_REQUIRE_GPU();
  // Partitions whose documents start past 0 and end mid-tile; k past a tile's size.
  const uint64_t seed = testing::test_seed() + 71;
  const Collection c = random_collection("pfor-block", seed, 3);
  for (const BuiltPartition& partition : c.partitions) {
    const IndexView& view = partition.view;
    gpu::GpuQueryProcessor processor(view);
    CpuQueryProcessor cpu(view);
    for (size_t q = 0; q < c.queries.size(); ++q) {
      for (size_t k : {size_t{1}, size_t{5000}, size_t{10000}}) {
        const Query query{c.queries[q], QueryMode::kOr, k};
        ASSERT_TRUE(testing::same_topk(cpu.search(query).hits, processor.search(query).hits, c.reference, c.queries[q]))
            << "partition " << view.meta.partition_id << " query " << q << " k " << k << " seed " << seed;
      }
    }
  }
}

// Single lane and batches of 5, on one partition: every answer of `queries` against the CPU.
void expect_or_tiles_match_cpu(const IndexView& view, const testing::BruteForceIndex& reference,
                               const std::vector<Query>& queries, gpu::OrMethod method = gpu::OrMethod::kTiles) {
  CpuQueryProcessor cpu(view);
  gpu::GpuProcessorOptions single_options;
  single_options.or_method = method;
  gpu::GpuQueryProcessor single(view, single_options);
  gpu::GpuProcessorOptions options;
  options.or_method = method;
  options.batch = {.threshold = size_t{1} << 30, .max_queries = 5, .max_wait_us = 2000};
  gpu::GpuQueryProcessor batched(view, options);
  std::vector<std::thread> clients;
  for (size_t i = 0; i < queries.size(); ++i) {
    clients.emplace_back([&, i] {
      const QueryResult expected = cpu.search(queries[i]);
      EXPECT_TRUE(testing::same_topk(expected.hits, single.search(queries[i]).hits, reference, queries[i].terms))
          << "query " << i;
      EXPECT_TRUE(testing::same_topk(expected.hits, batched.search(queries[i]).hits, reference, queries[i].terms))
          << "query " << i;
    });
  }
  for (auto& client : clients) client.join();
}

TEST(GpuOrPruning, TilesBelowThetaAreSkippedAndAnswersStayExact) {
  WARP_REQUIRE_GPU();
  // "common" in every document, "rare" in every 9,973rd with high frequencies: OR top-10 is among
  // the rare documents, and the tiles without one have a bound (common's block-max) below θ.
  std::mt19937_64 rng(testing::test_seed() + 81);
  IndexBuilder builder({});
  testing::BruteForceIndex reference;
  const uint32_t documents = 400000;  // 98 tiles
  for (uint32_t d = 0; d < documents; ++d) {
    std::vector<std::string> terms(1 + rng() % 4, "common");
    for (uint32_t f = rng() % 20; f > 0; --f) terms.push_back("filler" + std::to_string(rng() % 50));
    if (d % 9973 == 0) terms.insert(terms.end(), 1 + rng() % 6, "rare");
    builder.add_analyzed({"", "", "", 0}, terms);
    reference.add(terms);
  }
  const auto built = builder.build();
  const IndexView& view = built[0].view;
  // Resident (slice maxima of the long lists) and under a memory budget (block maxima).
  for (size_t budget : {size_t{0}, size_t{4} << 20}) {
    gpu::GpuProcessorOptions options;
    options.memory_budget = budget;
    gpu::GpuQueryProcessor processor(view, options);
    const QueryResult pruned = processor.search({{"common", "rare"}, QueryMode::kOr, 10});
    EXPECT_LT(pruned.stats.blocks_decoded * 4, pruned.stats.blocks_total)
        << "most tiles should be skipped; budget " << budget << ", postings decoded " << pruned.stats.postings_decoded;
  }
  std::vector<Query> queries;
  for (size_t k : {1, 10, 41, 1000}) {
    queries.push_back({{"common", "rare"}, QueryMode::kOr, k});
    queries.push_back({{"rare", "filler3", "filler7"}, QueryMode::kOr, k});
    queries.push_back({{"common", "filler1", "rare", "absent"}, QueryMode::kOr, k});
  }
  expect_or_tiles_match_cpu(view, reference, queries);
}

TEST(GpuOrPruning, NonEssentialListsAreDecodedOnlyWhereTheyCanMatter) {
  WARP_REQUIRE_GPU();
  // Documents of one length; "x" in every 8th (frequency 12 in every 1,024th), "y" in the even
  // ones and "z" in the odd ones (frequency 12 at 256 and 257 mod 512). OR top-10 is the documents
  // with x at 12 (θ = x12 + y1). A slice holding documents 256 and 257 mod 512 but no x at 12 is
  // live (x1 + y12 + z12 > θ), but once x and then y are scored no document there can reach θ with
  // z: the MaxScore stages skip z's blocks in those slices, the unstaged tiles decode them.
  IndexBuilder builder({});
  testing::BruteForceIndex reference;
  const uint32_t documents = 1u << 18;  // 64 tiles
  for (uint32_t d = 0; d < documents; ++d) {
    std::vector<std::string> terms;
    if (d % 8 == 0) terms.insert(terms.end(), d % 1024 == 0 ? 12 : 1, "x");
    terms.insert(terms.end(), d % 512 == 256 || d % 512 == 257 ? 12 : 1, d % 2 == 0 ? "y" : "z");
    while (terms.size() < 24) terms.push_back("pad");
    builder.add_analyzed({"", "", "", 0}, terms);
    reference.add(terms);
  }
  const auto built = builder.build();
  const IndexView& view = built[0].view;
  const Query query{{"x", "y", "z"}, QueryMode::kOr, 10};
  gpu::GpuProcessorOptions unstaged_options;
  unstaged_options.or_method = gpu::OrMethod::kTilesUnstaged;
  const QueryResult staged = gpu::GpuQueryProcessor(view).search(query);
  const QueryResult unstaged = gpu::GpuQueryProcessor(view, unstaged_options).search(query);
  EXPECT_TRUE(testing::identical_hits(staged.hits, unstaged.hits));
  EXPECT_LT(staged.stats.blocks_decoded * 10, unstaged.stats.blocks_decoded * 9)
      << "staged " << staged.stats.blocks_decoded << " blocks, unstaged " << unstaged.stats.blocks_decoded;
  // Exact either way, singly and batched, at every k.
  std::vector<Query> queries;
  for (size_t k : {1, 10, 100, 1000}) {
    queries.push_back({{"x", "y", "z"}, QueryMode::kOr, k});
    queries.push_back({{"z", "y"}, QueryMode::kOr, k});
    queries.push_back({{"x", "z", "pad"}, QueryMode::kOr, k});
  }
  for (gpu::OrMethod method : {gpu::OrMethod::kTiles, gpu::OrMethod::kTilesUnstaged}) {
    expect_or_tiles_match_cpu(view, reference, queries, method);
  }
}

TEST(GpuOrPruning, TiesAtThetaKeepTheSmallestDocIds) {
  WARP_REQUIRE_GPU();
  // Equal lengths and frequencies: every document of "a" has the same score, and those with "b"
  // too; θ falls on a tie, and the answer is the smallest docIDs of the best score.
  IndexBuilder builder({});
  testing::BruteForceIndex reference;
  for (uint32_t d = 0; d < 150000; ++d) {
    std::vector<std::string> terms{"a", d % 3 == 0 ? "b" : "x", d % 1000 == 999 ? "c" : "y"};
    builder.add_analyzed({"", "", "", 0}, terms);
    reference.add(terms);
  }
  const auto built = builder.build();
  const IndexView& view = built[0].view;
  gpu::GpuQueryProcessor processor(view);
  const QueryResult only_a = processor.search({{"a"}, QueryMode::kOr, 10});
  ASSERT_EQ(only_a.hits.size(), 10u);
  for (uint32_t i = 0; i < 10; ++i) EXPECT_EQ(only_a.hits[i].doc, view.meta.doc_begin + i);
  std::vector<Query> queries;
  for (size_t k : {1, 10, 333, 4097}) {
    queries.push_back({{"a"}, QueryMode::kOr, k});
    queries.push_back({{"a", "b"}, QueryMode::kOr, k});
    queries.push_back({{"b", "c"}, QueryMode::kOr, k});
  }
  expect_or_tiles_match_cpu(view, reference, queries);
}

TEST(GpuOrPruning, QueriesOfManyTermsMatchTheCpu) {
  WARP_REQUIRE_GPU();
  // 33–60 distinct terms: a tile plans its lists in chunks of 32, and more short lists than the
  // run keeps exact slice maxima for fall back to block maxima. BP and a thread-block codec.
  for (const char* codec : {"bp128", "pfor-block"}) {
    const uint64_t seed = testing::test_seed() + 91 + std::hash<std::string>{}(codec);
    Collection c = random_collection(codec, seed, 1);
    c.queries = synthetic::generate_queries(12, 400, 60, seed + 2);
    std::mt19937_64 rng(seed);
    std::vector<Query> queries;
    for (auto& terms : c.queries) {
      std::set<std::string> distinct(terms.begin(), terms.end());
      while (distinct.size() < 33) distinct.insert(synthetic::term_name(static_cast<uint32_t>(rng() % 400)));
      terms.assign(distinct.begin(), distinct.end());
      for (size_t k : {10, 1000}) queries.push_back({terms, QueryMode::kOr, k});
    }
    expect_or_tiles_match_cpu(c.partitions[0].view, c.reference, queries);
  }
}

TEST(GpuLrc, CompressedSearchAndBlockDecodingAgree) {
  WARP_REQUIRE_GPU();
  for (const char* codec : {"lrc", "lrc-seg", "seg-lrc", "hs-lrc"}) {
    const uint64_t seed = testing::test_seed() + 51 + std::hash<std::string>{}(codec);
    const Collection c = random_collection(codec, seed, 1);
    const IndexView& view = c.partitions[0].view;
    gpu::GpuProcessorOptions options;
    options.search_compressed = false;  // select and decode blocks like the other codecs
    gpu::GpuQueryProcessor processor(view, options);
    EXPECT_EQ(mismatches_against_cpu(processor, c, view, 2), 0) << codec << " seed " << seed;
  }
}

TEST(GpuGov2Preset, ScaledPresetMatchesTheCpu) {
  WARP_REQUIRE_GPU();
  // The GOV2-like preset of the benchmark, scaled down: 300k documents, 200 queries.
  for (const char* codec : {"bp128", "hs-lrc"}) {
    synthetic::Gov2Params params;
    params.documents = 300000;
    params.queries = 200;
    params.postings_per_query = 60000;
    params.codec = codec;
    params.seed = testing::test_seed();
    const synthetic::Gov2Collection c = synthetic::make_gov2_like(params);
    CpuQueryProcessor cpu(c.view);
    gpu::GpuQueryProcessor single(c.view);
    gpu::GpuProcessorOptions batched_options;
    batched_options.batch = {.threshold = 100000, .max_queries = 8};
    gpu::GpuQueryProcessor batched(c.view, batched_options);
    std::atomic<int> failures{0};
    std::vector<std::thread> clients;
    for (int t = 0; t < 8; ++t) {
      clients.emplace_back([&, t] {
        for (size_t q = t; q < c.queries.size(); q += 8) {
          for (QueryMode mode : {QueryMode::kAnd, QueryMode::kOr, QueryMode::kAndOr}) {
            for (size_t k : {size_t{10}, size_t{1000}}) {
              const Query query{c.queries[q], mode, k};
              const QueryResult expected = cpu.search(query);
              for (const QueryProcessor* gpu_processor :
                   {static_cast<const QueryProcessor*>(&single), static_cast<const QueryProcessor*>(&batched)}) {
                const QueryResult actual = gpu_processor->search(query);
                const ::testing::AssertionResult same = testing::identical_hits(expected.hits, actual.hits);
                if (!same && failures++ == 0) {
                  ADD_FAILURE() << same.message() << ": " << codec << " query " << q << " mode " << to_string(mode)
                                << " k " << k << " seed " << params.seed;
                }
              }
            }
          }
        }
      });
    }
    for (auto& client : clients) client.join();
    EXPECT_EQ(failures.load(), 0) << codec;
  }
}

// The query's floor (its terms' best postings for k up to 10, their rank floors past it) as θ's
// start: on the scaled GOV2-like preset, OR and AND+OR at k from 10 to 1,000 answer as the CPU does
// and as the tiles without the floor do, singly and batched, and at k = 1,000, where θ from the
// first pass's candidates alone is lowest, the log decodes fewer blocks with the floor.
TEST(GpuOrPruning, TheQuerysFloorSkipsWorkAndChangesNoAnswer) {
  WARP_REQUIRE_GPU();
  synthetic::Gov2Params params;
  params.documents = 300000;
  params.queries = 120;
  params.postings_per_query = 60000;
  params.seed = testing::test_seed() + 7;
  const synthetic::Gov2Collection c = synthetic::make_gov2_like(params);
  ASSERT_FALSE(c.view.term_rank_floors.empty());
  CpuQueryProcessor cpu(c.view);
  gpu::GpuProcessorOptions without_options;
  without_options.or_floor = false;
  gpu::GpuQueryProcessor with(c.view), without(c.view, without_options);
  gpu::GpuProcessorOptions batched_options;
  batched_options.batch = {.threshold = 100000, .max_queries = 8};
  gpu::GpuQueryProcessor batched(c.view, batched_options);
  uint64_t blocks_with = 0, blocks_without = 0;
  for (size_t q = 0; q < c.queries.size(); ++q) {
    for (QueryMode mode : {QueryMode::kOr, QueryMode::kAndOr}) {
      for (size_t k : {size_t{10}, size_t{20}, size_t{100}, size_t{1000}}) {
        const Query query{c.queries[q], mode, k};
        const QueryResult expected = cpu.search(query);
        const QueryResult a = with.search(query), b = without.search(query);
        ASSERT_TRUE(testing::identical_hits(expected.hits, a.hits))
            << "query " << q << " k " << k << " seed " << params.seed;
        ASSERT_TRUE(testing::identical_hits(expected.hits, b.hits))
            << "query " << q << " k " << k << " seed " << params.seed;
        ASSERT_TRUE(testing::identical_hits(expected.hits, batched.search(query).hits))
            << "query " << q << " k " << k << " seed " << params.seed;
        if (mode == QueryMode::kOr && k == 1000)
          blocks_with += a.stats.blocks_decoded, blocks_without += b.stats.blocks_decoded;
      }
    }
  }
  EXPECT_LT(blocks_with, blocks_without) << "OR top-1000 decoded " << blocks_with << " blocks with the floor, "
                                         << blocks_without << " without";
  std::printf("OR top-1000 over %zu queries: %llu blocks decoded with the floor, %llu without\n", c.queries.size(),
              static_cast<unsigned long long>(blocks_with), static_cast<unsigned long long>(blocks_without));
}

// Queries of 65, 200 and 1,000 terms (repeats included: query-term frequency) on every path: lanes,
// PARA batches (several long queries in one batch, from concurrent clients), dense accumulators,
// answers identical to the CPU's. Batches took at most 64 terms once; longer ones killed the process.
TEST(GpuLongQueries, EveryPathMatchesTheCpu) {
  WARP_REQUIRE_GPU();
  for (const char* codec : {"bp128", "pfor-block"}) {
    const uint64_t seed = testing::test_seed() + 97 + std::hash<std::string>{}(codec);
    Collection c = random_collection(codec, seed, 1);
    std::mt19937_64 rng(seed);
    const uint32_t vocabulary = static_cast<uint32_t>(c.partitions[0].view.lexicon.size());
    c.queries.clear();
    for (uint32_t length : {65u, 200u, 1000u, 65u, 200u, 1000u, 70u, 300u}) {
      std::vector<std::string> query;
      for (uint32_t i = 0; i < length; ++i)
        query.push_back(synthetic::term_name(static_cast<uint32_t>(rng() % (vocabulary + 40))));
      c.queries.push_back(query);
    }
    const IndexView& view = c.partitions[0].view;
    gpu::GpuProcessorOptions single, batched, batched_dense, single_dense;
    batched.batch = {.threshold = 200000, .max_queries = 4, .max_wait_us = 5000};
    batched_dense.batch = batched.batch;
    batched_dense.or_method = gpu::OrMethod::kDenseAccumulators;
    single_dense.or_method = gpu::OrMethod::kDenseAccumulators;
    for (const auto* options : {&single, &batched, &batched_dense, &single_dense}) {
      gpu::GpuQueryProcessor processor(view, *options);
      EXPECT_EQ(mismatches_against_cpu(processor, c, view, 4), 0)
          << codec << (options->batch.threshold > 0 ? " batched" : " single")
          << (options->or_method == gpu::OrMethod::kDenseAccumulators ? " dense" : " tiles") << " seed " << seed;
    }
  }
}

struct JudgedCollection {
  const char* name;
  size_t documents;
};

class GpuJudgedTest : public ::testing::TestWithParam<JudgedCollection> {};

// Cranfield's queries and CISI's long requests, analyzed as the broker does, on every codec: the
// single-query path against the reference and the batched path against the CPU, exactly.
TEST_P(GpuJudgedTest, EveryModeAndCodecMatchesTheCpu) {
  WARP_REQUIRE_GPU();
  const std::string dir = testing::test_data_dir() + "/" + GetParam().name;
  ReadReport report;
  const std::vector<SourceDocument> documents = read_documents({dir + "/docs.jsonl"}, report);
  ASSERT_EQ(documents.size(), GetParam().documents);
  std::vector<std::string> errors;
  Analyzer analyzer;
  testing::BruteForceIndex reference;
  for (const SourceDocument& doc : documents) {
    std::vector<std::string> terms = analyzer.analyze(doc.title);
    analyzer.analyze(doc.body, terms);
    reference.add(terms);
  }
  std::vector<std::vector<std::string>> queries;
  for (const QueryLine& line : read_query_file(dir + "/queries.tsv", errors))
    queries.push_back(analyzer.analyze_query(line.text));
  for (const Codec* codec : all_codecs()) {
    BuildOptions options;
    options.codec = std::string(codec->name());
    IndexBuilder builder(options);
    for (const SourceDocument& doc : documents) builder.add_document(doc);
    Collection c;
    c.partitions = builder.build();
    c.queries = queries;
    c.reference = reference;
    gpu::GpuQueryProcessor processor(c.partitions[0].view);
    for (size_t q = 0; q < queries.size(); ++q) {
      for (QueryMode mode : {QueryMode::kAnd, QueryMode::kOr, QueryMode::kAndOr}) {
        ASSERT_TRUE(testing::same_topk(reference.search(queries[q], mode, 100),
                                       processor.search({queries[q], mode, 100}).hits, reference, queries[q]))
            << "query " << q + 1 << " codec " << codec->name() << " mode " << to_string(mode);
      }
    }
    gpu::GpuProcessorOptions batched;
    batched.batch = {.threshold = 200000, .max_queries = 8, .max_wait_us = 2000};
    gpu::GpuQueryProcessor batched_processor(c.partitions[0].view, batched);
    EXPECT_EQ(mismatches_against_cpu(batched_processor, c, c.partitions[0].view, 8), 0) << codec->name() << " batched";
  }
}

INSTANTIATE_TEST_SUITE_P(SharedData, GpuJudgedTest,
                         ::testing::Values(JudgedCollection{"cranfield", 1400}, JudgedCollection{"cisi", 1460}),
                         [](const auto& info) { return std::string(info.param.name); });

#else

TEST(Gpu, SkippedWithoutCuda) { WARP_REQUIRE_GPU(); }

#endif

}  // namespace
}  // namespace warp
