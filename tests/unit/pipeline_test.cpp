// The parallel, out-of-core indexing pipeline writes exactly the partitions of the in-memory
// builder (every row of every column family), from every input format, with duplicates, with run
// files spilled, whatever its thread counts; its input splits hold every record once; and its
// dictionary pieces work.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <thread>

#include "indexer/reader/document_reader.hpp"
#include "indexer/gpu/gpu_analyzer.hpp"
#include "common/util/huge_pages.hpp"
#include "common/analysis/analyzer.hpp"
#include "common/analysis/shared_stem_cache.hpp"
#include "common/util/status.hpp"
#include "common/index/index_files.hpp"
#include "common/index/partition_store.hpp"
#include "indexer/pipeline/final_order.hpp"
#include "indexer/pipeline/indexers.hpp"
#include "indexer/pipeline/parallel_builder.hpp"
#include "indexer/pipeline/run_file.hpp"
#include "indexer/pipeline/term_btree.hpp"
#include "indexer/postings/trie_collections.hpp"
#include "tests/support/format_writers.hpp"
#include "tests/support/test_data.hpp"
#include "tests/support/test_seed.hpp"

namespace warp {
namespace {
namespace fs = std::filesystem;

// Every row of every column family of every partition, as `warp-indexer digest` prints them.
std::vector<std::string> index_digest(const fs::path& dir) {
  std::vector<std::string> lines;
  for (uint32_t p = 0; fs::exists(dir / partition_dir_name(p)); ++p) {
    for (const std::string& line : partition_digest((dir / partition_dir_name(p)).string()))
      lines.push_back(partition_dir_name(p) + " " + line);
  }
  return lines;
}

class PipelineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("warp-pipeline-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // The in-memory builder over read_documents (duplicates resolved there), written to disk.
  std::vector<std::string> reference(const std::vector<std::string>& inputs, const BuildOptions& options,
                                     ReadReport& report) {
    IndexBuilder builder(options);
    for (const auto& doc : read_documents(inputs, report)) builder.add_document(doc);
    const std::string out = path("reference-" + std::to_string(next_++));
    write_index(builder.build(), out);
    return index_digest(out);
  }

  std::vector<std::string> pipeline(const std::vector<std::string>& inputs, pipeline::PipelineOptions options,
                                    pipeline::PipelineReport& report, ReadReport& read) {
    options.spill_dir = path("runs");
    const std::string out = path("pipeline-" + std::to_string(next_++));
    report = pipeline::build_index(inputs, options, out, read);
    EXPECT_FALSE(fs::exists(options.spill_dir)) << "run files are removed after the build";
    return index_digest(out);
  }
  fs::path dir_;
  int next_ = 0;
};

TEST_F(PipelineTest, CranfieldInEveryFormatWithSpilledRunsMatchesTheBuilder) {
  ReadReport report;
  const auto docs = read_documents({testing::test_data_dir() + "/cranfield/docs.jsonl"}, report);
  testing::write_trec(path("cran.trec"), docs);
  testing::write_warc(path("cran.warc.gz"), docs, true);
  pipeline::PipelineOptions options;
  options.build.partitions = 3;
  options.build.codec = "pfor-block";
  options.parsers = 3;
  options.indexers = 2;
  options.split_bytes = 64 << 10;  // the JSONL and TREC files are read in pieces by the three parsers
  options.chunk_bytes = 16 << 10;
  options.memory_budget = 1;  // the smallest: runs spill to disk and are merged back
  for (const std::string& input :
       {testing::test_data_dir() + "/cranfield/docs.jsonl", path("cran.trec"), path("cran.warc.gz")}) {
    ReadReport expected_report;
    const auto expected = reference({input}, options.build, expected_report);  // WARC records carry URLs
    pipeline::PipelineReport pipeline_report;
    ReadReport read;
    EXPECT_EQ(pipeline({input}, options, pipeline_report, read), expected) << input;
    EXPECT_GT(pipeline_report.runs_written, 2u) << input;
    EXPECT_EQ(pipeline_report.runs_written, pipeline_report.runs_merged) << input;
    EXPECT_EQ(read.documents, expected_report.documents) << input;
    if (input != path("cran.warc.gz")) {
      EXPECT_GT(pipeline_report.splits, 3u) << input;
    }
  }
}

// The default corpus (GCIDE entries, converted by deploy/corpus/gcide_to_jsonl.py --limit into the
// file WARP_DEFAULT_CORPUS_SAMPLE names; ctest's fixture makes it) in all three formats.
TEST_F(PipelineTest, DefaultCorpusInEveryFormatMatchesTheBuilder) {
  const char* sample = std::getenv("WARP_DEFAULT_CORPUS_SAMPLE");
  ASSERT_NE(sample, nullptr) << "set WARP_DEFAULT_CORPUS_SAMPLE (ctest does, from deploy/corpus/gcide_to_jsonl.py)";
  ReadReport report;
  const auto docs = read_documents({sample}, report);
  ASSERT_GE(docs.size(), 1000u);
  testing::write_trec(path("gcide.trec"), docs);
  testing::write_warc(path("gcide.warc"), docs, false);
  pipeline::PipelineOptions options;
  options.build.partitions = 2;
  options.parsers = 2;
  options.indexers = 2;
  options.split_bytes = 200 << 10;
  options.memory_budget = 4 << 20;
  for (const std::string& input : {std::string(sample), path("gcide.trec"), path("gcide.warc")}) {
    ReadReport expected_report;
    const auto expected = reference({input}, options.build, expected_report);
    pipeline::PipelineReport pipeline_report;
    ReadReport read;
    EXPECT_EQ(pipeline({input}, options, pipeline_report, read), expected) << input;
  }
}

// The same partitions whatever the thread counts, split and chunk sizes and budget: docIDs follow
// the input order, not the order in which threads finish.
TEST_F(PipelineTest, ThreadCountsSplitsAndBudgetsGiveIdenticalPartitions) {
  const char* sample = std::getenv("WARP_DEFAULT_CORPUS_SAMPLE");
  ASSERT_NE(sample, nullptr) << "set WARP_DEFAULT_CORPUS_SAMPLE (ctest does)";
  std::mt19937_64 rng(testing::test_seed());
  pipeline::PipelineOptions options;
  options.build.partitions = 3;
  pipeline::PipelineReport report;
  ReadReport read;
  options.parsers = 1, options.indexers = 1, options.threads = 1;
  options.split_bytes = uint64_t{1} << 40;
  const auto single = pipeline({sample}, options, report, read);
  ASSERT_EQ(report.splits, 1u);
  ASSERT_EQ(report.runs_written, 1u);
  ASSERT_FALSE(report.parsers_index);  // one indexer thread beside the parser
  options.indexers = 0;                // the one parser indexes too
  EXPECT_EQ(pipeline({sample}, options, report, read), single);
  EXPECT_TRUE(report.parsers_index);
  options.memory_budget = 1;  // and spills many runs
  EXPECT_EQ(pipeline({sample}, options, report, read), single);
  EXPECT_GT(report.runs_written, 1u);
  for (int round = 0; round < 3; ++round) {
    options.threads = 1 + rng() % 6;
    options.parsers = 1 + rng() % 6;
    options.indexers = round == 0 ? 0 : rng() % 5;  // 0: every parser indexes its own chunks
    options.split_bytes = (16 + rng() % 200) << 10;
    options.chunk_bytes = (8 + rng() % 64) << 10;
    options.memory_budget = rng() % 2 ? 1 : 64 << 20;
    const std::string context =
        "threads " + std::to_string(options.threads) + ", parsers " + std::to_string(options.parsers) + ", indexers " +
        std::to_string(options.indexers) + ", split " + std::to_string(options.split_bytes) + ", chunk " +
        std::to_string(options.chunk_bytes) + ", budget " + std::to_string(options.memory_budget);
    EXPECT_EQ(pipeline({sample}, options, report, read), single) << context;
    EXPECT_GT(report.splits, 1u) << context;
  }
  // The parsers' shared stem cache opening segments as the vocabulary fills them (64 tokens first,
  // then 128, ...) and freezing after its eighth: ids from many segments and from the parsers' own
  // caches, the same partitions.
  options.threads = 4, options.parsers = 4, options.indexers = 0, options.memory_budget = 64 << 20;
  options.stem_cache_tokens = 64;
  EXPECT_EQ(pipeline({sample}, options, report, read), single) << "a stem cache of many segments";
  EXPECT_EQ(report.stem_cache_segments, SharedStemCache::kMaxSegments);
  EXPECT_TRUE(report.stem_cache_frozen);
  options.stem_cache_tokens = 1024;  // fewer segments, not frozen
  EXPECT_EQ(pipeline({sample}, options, report, read), single) << "a stem cache of a few segments";
  EXPECT_GT(report.stem_cache_segments, 1u);
  EXPECT_FALSE(report.stem_cache_frozen);
  options.stem_cache_tokens = 0;
  // Parsers routing the shared stems' postings to the parsers owning them (posting_router.hpp),
  // each owner writing a stem's lists parser by parser: postings are handed over, and the
  // partitions are the same with a run per chunk (many runs an owner, their parts interleaved in
  // the back end), with a frozen stem cache's own stems beside the routed ones, and with routing off.
  options.threads = 5, options.parsers = 5, options.indexers = 0, options.memory_budget = 64 << 20;
  options.split_bytes = 48 << 10, options.chunk_bytes = 16 << 10;
  EXPECT_EQ(pipeline({sample}, options, report, read), single) << "routed";
  EXPECT_GT(report.routed_postings, 0u);
  options.memory_budget = 1;
  EXPECT_EQ(pipeline({sample}, options, report, read), single) << "routed, a run per chunk";
  EXPECT_GT(report.routed_postings, 0u);
  EXPECT_GT(report.runs_written, 5u * 4);
  options.memory_budget = 64 << 20, options.stem_cache_tokens = 64;
  EXPECT_EQ(pipeline({sample}, options, report, read), single) << "routed, the stem cache frozen";
  EXPECT_TRUE(report.stem_cache_frozen);
  EXPECT_GT(report.routed_postings, 0u);
  options.stem_cache_tokens = 0, options.route_postings = false;
  EXPECT_EQ(pipeline({sample}, options, report, read), single) << "not routed";
  EXPECT_EQ(report.routed_postings, 0u);
  options.route_postings = true;
  // Many back-end threads moving their term ranges into the same partitions at once (each range's
  // long lists compacted to blob files while other ranges' files are ingested and compacted).
  options.threads = 16, options.parsers = 4, options.indexers = 0, options.memory_budget = 64 << 20;
  EXPECT_EQ(pipeline({sample}, options, report, read), single) << "16 back-end threads";
}

// The back end's merges at once: as many as threads, unless their buffers would outgrow a quarter
// of the budget or their run descriptors the open-file limit; never none.
// Every split is read once; a thread first reads its own contiguous range front to back, then takes
// the last split of the thread with the most bytes left. A thread's range: the splits whose middle
// byte lies in its equal share of the bytes.
// A partition of the parallel build holds its lexicon in one SST file per term range of the build;
// open_partition reads those ranges side by side (two passes: the lexicon's rows, then the lists
// into their places). What it loads is what the in-memory builder's partition, written in one
// range, loads: every term's entry and list, the documents.
TEST_F(PipelineTest, PartitionsOfManyTermRangesOpenAsTheBuildersDo) {
  const std::vector<std::string> inputs = {testing::test_data_dir() + "/cranfield/docs.jsonl",
                                           testing::test_data_dir() + "/cisi/docs.jsonl"};
  pipeline::PipelineOptions options;
  options.build.partitions = 2;
  options.threads = 6;  // 12 term ranges
  options.spill_dir = path("runs");
  ReadReport read, reference_read;
  pipeline::build_index(inputs, options, path("parallel"), read);
  IndexBuilder builder(options.build);
  for (const auto& doc : read_documents(inputs, reference_read)) builder.add_document(doc);
  write_index(builder.build(), path("reference"));
  for (uint32_t p = 0; p < 2; ++p) {
    size_t lexicon_files = 0;
    for (const auto& entry : fs::directory_iterator(path("parallel") + "/" + partition_dir_name(p))) {
      lexicon_files += entry.path().extension() == ".sst";
    }
    ASSERT_GT(lexicon_files, 8u) << "several term ranges' files expected";
    const auto parallel = open_partition(path("parallel") + "/" + partition_dir_name(p));
    const auto reference = open_partition(path("reference") + "/" + partition_dir_name(p));
    const IndexView& a = parallel->view();
    const IndexView& b = reference->view();
    ASSERT_EQ(a.lexicon.size(), b.lexicon.size()) << p;
    EXPECT_EQ(a.postings.size(), b.postings.size()) << p;
    for (const auto& [term, info] : b.lexicon) {
      const TermInfo* other = a.find(term);
      ASSERT_NE(other, nullptr) << term;
      ASSERT_EQ(other->df, info.df) << term;
      ASSERT_EQ(other->cf, info.cf) << term;
      ASSERT_EQ(other->words, info.words) << term;
      ASSERT_TRUE(std::equal(a.postings.begin() + other->offset, a.postings.begin() + other->offset + other->words,
                             b.postings.begin() + info.offset))
          << term;
    }
    EXPECT_EQ(a.doc_lengths, b.doc_lengths) << p;
    EXPECT_EQ(a.external_ids, b.external_ids) << p;
  }
}

// --gpu-analysis refused with a clear error where it cannot run, leaving nothing behind: with stop
// words removed (a rule it does not apply), and without a usable GPU (its builds are checked
// against the CPU's in tests/gpu/gpu_indexer_test.cpp).
TEST_F(PipelineTest, GpuAnalysisRefusedWhereItCannotRun) {
  const std::vector<std::string> inputs = {testing::test_data_dir() + "/cranfield/docs.jsonl"};
  pipeline::PipelineOptions options;
  options.gpu_analysis = true;
  options.spill_dir = path("runs");
  const auto refused = [&](const std::string& words) {
    ReadReport read;
    try {
      pipeline::build_index(inputs, options, path("out"), read);
      ADD_FAILURE() << "built";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
    EXPECT_FALSE(fs::exists(path("out/manifest.json")));
    EXPECT_FALSE(fs::exists(path("out/part-0000")));
    EXPECT_FALSE(fs::exists(options.spill_dir));
  };
  options.build.analyzer.remove_stopwords = true;
  refused("does not remove stop words");
  options.build.analyzer.remove_stopwords = false;
  std::string why;
  if (pipeline::gpu_analysis_available(0, &why))
    GTEST_SKIP() << "a GPU is usable here: its builds are gpu_indexer_test's";
  refused("no GPU analysis");  // an input too small to use the GPU (under 64 MiB a parser) still needs one
  options.gpu_analysis_min_bytes = 0;
  refused("no GPU analysis");
}

TEST(SplitTaker, ContiguousRangesFirstThenTheBackOfTheLargestRemainder) {
  std::mt19937_64 rng(testing::test_seed());
  for (int round = 0; round < 50; ++round) {
    const size_t threads = 1 + rng() % 9, splits = rng() % 60;
    std::vector<uint64_t> bytes(splits);
    uint64_t total = 0;
    for (uint64_t& b : bytes) b = 1 + rng() % 1000, total += b;
    pipeline::SplitTaker taker(bytes, threads);
    std::vector<std::vector<size_t>> taken(threads);
    std::vector<int> times(splits, 0);
    std::vector<size_t> when(splits, 0);  // the order of the takes
    size_t clock = 0;
    const auto take = [&](size_t t) {
      const auto s = taker.next(t);
      if (!s) return false;
      taken[t].push_back(*s), ++times[*s], when[*s] = clock++;
      return true;
    };
    for (bool any = true; any;) {  // threads asking in a random order
      any = false;
      for (size_t t = rng() % threads, n = 0; n < threads; ++n, t = (t + 1) % threads) {
        if (rng() % 3 != 0) any = take(t) || any;
      }
      for (size_t t = 0; t < threads && !any; ++t) any = take(t);
    }
    for (size_t s = 0; s < splits; ++s) ASSERT_EQ(times[s], 1) << "split " << s;
    // Thread t's range: the splits whose middle byte lies in [t, t+1) × total / threads. It reads
    // them front to back; what it did not reach went to others from the back, latest split first;
    // everything else it read was another range's.
    uint64_t before = 0;
    size_t s = 0;
    for (size_t t = 0; t < threads; ++t) {
      const size_t front = s;
      const uint64_t until = t + 1 == threads ? total : total / threads * (t + 1);
      while (s < splits && (t + 1 == threads || before + bytes[s] / 2 < until)) before += bytes[s], ++s;
      const size_t back = s;
      size_t own = 0;
      while (own < taken[t].size() && own < back - front && taken[t][own] == front + own) ++own;
      for (size_t i = own; i < taken[t].size(); ++i) {
        EXPECT_TRUE(taken[t][i] < front || taken[t][i] >= back)
            << "thread " << t << " read its own split " << taken[t][i] << " out of order";
      }
      for (size_t x = front + own; x + 1 < back; ++x)
        EXPECT_GT(when[x], when[x + 1]) << "range " << t << ": not taken from its back";
    }
  }
  // Many threads at once: still every split once.
  std::vector<uint64_t> bytes(500, 7);
  pipeline::SplitTaker taker(bytes, 8);
  std::vector<std::atomic<int>> times(bytes.size());
  std::vector<std::thread> pool;
  for (size_t t = 0; t < 8; ++t) {
    pool.emplace_back([&, t] {
      while (auto s = taker.next(t)) ++times[*s];
    });
  }
  for (auto& thread : pool) thread.join();
  for (size_t s = 0; s < bytes.size(); ++s) EXPECT_EQ(times[s].load(), 1) << "split " << s;
}

// A span is a stretch of splits one thread read one after another in order.
TEST(SplitTaker, SpansBreakWhereTheReaderOrItsOrderChanges) {
  pipeline::SplitTaker taker(std::vector<uint64_t>(6, 10), 2);  // ranges [0, 3) and [3, 6)
  EXPECT_EQ(taker.next(1), 3u);
  EXPECT_EQ(taker.next(0), 0u);
  EXPECT_EQ(taker.next(0), 1u);
  EXPECT_EQ(taker.next(0), 2u);
  EXPECT_EQ(taker.next(0), 5u);  // thread 0's range is read: the back of thread 1's
  EXPECT_EQ(taker.next(1), 4u);
  EXPECT_EQ(taker.next(0), std::nullopt);
  EXPECT_EQ(taker.next(1), std::nullopt);
  // Readers 0 0 0 1 1 0: spans start at splits 0, 3 and 5.
  EXPECT_EQ(taker.span_starts({0, 10, 20, 30, 40, 50}), (std::vector<DocId>{0, 30, 50}));
}

// The lists of a simulated build (threads reading splits through a SplitTaker, documents numbered
// as read, runs spilled at random points, documents dropped) come out as the reference: the
// postings of the term's kept documents by final docID, from pieces that never overlap. Parts that overlap in docID
// order within one span (no build makes them) are sorted instead.
TEST(FinalDocOrder, PiecesOfEveryRunGiveTheListInDocIdOrder) {
  std::mt19937_64 rng(testing::test_seed());
  std::vector<Posting> list, scratch;
  std::vector<size_t> segments;
  std::vector<pipeline::ListPiece> pieces;
  for (int round = 0; round < 200; ++round) {
    const size_t threads = 1 + rng() % 6, splits = 1 + rng() % 20;
    std::vector<uint64_t> docs_in(splits);
    for (uint64_t& d : docs_in) d = rng() % 30;
    pipeline::SplitTaker taker(docs_in, threads);
    // Read: a random thread takes the next split of its own; each document gets the next
    // provisional id and joins that thread's current run, which is spilled now and then.
    std::vector<std::vector<std::pair<size_t, uint64_t>>> read_order(threads);  // (split, index in it)
    std::vector<DocId> provisional_of_input;                                    // by input position
    std::vector<uint64_t> split_first(splits + 1, 0);
    for (size_t s = 0; s < splits; ++s) split_first[s + 1] = split_first[s] + docs_in[s];
    const uint64_t documents = split_first[splits];
    provisional_of_input.assign(documents, 0);
    std::vector<std::vector<std::vector<DocId>>> runs(threads, std::vector<std::vector<DocId>>(1));  // provisional ids
    DocId next_provisional = 0;
    std::vector<bool> active(threads, true);
    for (size_t alive = threads; alive > 0;) {
      const size_t t = rng() % threads;
      if (!active[t]) continue;
      const auto s = taker.next(t);
      if (!s) {
        active[t] = false, --alive;
        continue;
      }
      for (uint64_t i = 0; i < docs_in[*s]; ++i) {
        provisional_of_input[split_first[*s] + i] = next_provisional;
        runs[t].back().push_back(next_provisional++);
        if (rng() % 17 == 0) runs[t].emplace_back();
      }
    }
    // Final ids in input order, some documents dropped.
    std::vector<DocId> final_of(documents, kEndDoc);
    std::vector<DocId> split_starts(splits);
    DocId next_final = 0;
    for (size_t s = 0; s < splits; ++s) {
      split_starts[s] = next_final;
      for (uint64_t i = 0; i < docs_in[s]; ++i) {
        if (rng() % 11 != 0) final_of[provisional_of_input[split_first[s] + i]] = next_final++;
      }
    }
    const std::vector<DocId> spans = taker.span_starts(split_starts);
    // A term in a random subset of the documents; each run's part in provisional order.
    list.clear(), segments.clear();
    std::vector<DocId> expected;
    for (const auto& thread_runs : runs) {
      for (const auto& run : thread_runs) {
        segments.push_back(list.size());
        for (DocId p : run) {
          if (rng() % 3 != 0) continue;
          list.push_back({p, static_cast<uint32_t>(p % 7 + 1)});
          if (final_of[p] != kEndDoc) expected.push_back(final_of[p]);
        }
      }
    }
    std::sort(expected.begin(), expected.end());
    EXPECT_TRUE(pipeline::to_final_doc_order(list, segments, final_of, spans, scratch, pieces))
        << "round " << round << ": pieces overlapped";
    ASSERT_EQ(list.size(), expected.size()) << "round " << round;
    for (size_t i = 0; i < list.size(); ++i) {
      ASSERT_EQ(list[i].doc, expected[i]) << "round " << round << " at " << i;
    }
  }
  // One part across three spans: it is cut where it enters each span, so the pieces stay disjoint
  // from the other part's and are ordered without a sort.
  const std::vector<DocId> ten{0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  list = {{0, 1}, {1, 1}, {7, 1}, {8, 1}, {3, 2}, {4, 2}, {5, 2}};
  segments = {0, 4};
  EXPECT_TRUE(pipeline::to_final_doc_order(list, segments, ten, {0, 3, 6}, scratch, pieces));
  ASSERT_EQ(list.size(), 7u);
  const std::vector<DocId> in_order{0, 1, 3, 4, 5, 7, 8};
  for (size_t i = 0; i < list.size(); ++i) EXPECT_EQ(list[i].doc, in_order[i]);
  EXPECT_EQ(list[2].freq, 2u);
  // Two parts interleaved within one span: overlapping pieces, sorted as a whole.
  const std::vector<DocId> identity{0, 1, 2, 3, 4, 5};
  list = {{0, 1}, {2, 1}, {4, 1}, {1, 2}, {3, 2}, {5, 2}};
  segments = {0, 3};
  EXPECT_FALSE(pipeline::to_final_doc_order(list, segments, identity, {0}, scratch, pieces));
  ASSERT_EQ(list.size(), 6u);
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(list[i].doc, i);
  EXPECT_EQ(list[1].freq, 2u);
}

// The routing's division by multiplications: every 32-bit id's quotient and remainder, as the
// hardware's, for divisors of every size.
TEST(DivideBy, QuotientAndRemainderAreTheHardwares) {
  std::mt19937_64 rng(testing::test_seed());
  for (int round = 0; round < 200; ++round) {
    const uint32_t d =
        round < 100 ? 2 + round : 2 + static_cast<uint32_t>(rng() % (round < 150 ? 1u << 16 : UINT32_MAX - 2));
    const pipeline::DivideBy by(d);
    for (int i = 0; i < 2000; ++i) {
      const uint32_t a = i < 4 ? std::array<uint32_t, 4>{0, d - 1, d, UINT32_MAX}[static_cast<size_t>(i)]
                               : static_cast<uint32_t>(rng());
      ASSERT_EQ(by.quotient(a), a / d) << a << " / " << d;
      ASSERT_EQ(by.remainder(a), a % d) << a << " % " << d;
    }
  }
}

// Parsers handing each other postings through a PostingRouter whose inboxes hold few: every
// posting reaches the parser owning its stem once, each sender's in the order it sent them, and
// every parser's finish() returns once all have finished; a stopped build waits for nobody.
TEST(PostingRouter, EveryPostingReachesItsOwnerOnceInItsSendersOrder) {
  std::mt19937_64 seeds(testing::test_seed());
  for (const size_t parsers : {2, 3, 7}) {
    pipeline::PostingRouter router(parsers, 64);  // senders wait for room often
    std::atomic<bool> stop{false};
    std::atomic<uint64_t> sent{0};
    std::vector<std::vector<std::pair<size_t, pipeline::RoutedPosting>>> received(parsers);
    std::vector<std::thread> threads;
    for (size_t t = 0; t < parsers; ++t) {
      threads.emplace_back([&, t, seed = seeds()] {
        std::mt19937_64 rng(seed);
        const pipeline::PostingRouter::Sink sink = [&](size_t from, std::span<const pipeline::RoutedPosting> postings) {
          for (const pipeline::RoutedPosting& p : postings) received[t].emplace_back(from, p);
        };
        for (uint32_t doc = 0; doc < 3000; ++doc) {
          const uint32_t stem = static_cast<uint32_t>(rng() % 1000);
          if (router.owner(stem) == t) continue;
          router.add(t, stem, doc, static_cast<TermFreq>(t));
          ++sent;
          if (router.held(t) >= 1 + rng() % 50) router.hand_over(t, sink, stop);
        }
        router.finish(t, sink, stop);
      });
    }
    for (std::thread& thread : threads) thread.join();
    uint64_t total = 0;
    for (size_t t = 0; t < parsers; ++t) {
      std::vector<int64_t> last(parsers, -1);
      for (const auto& [from, p] : received[t]) {
        EXPECT_EQ(router.owner(p.stem), t);
        EXPECT_EQ(p.freq, from);  // the sender's mark
        EXPECT_GT(static_cast<int64_t>(p.doc), last[from]) << "sender " << from << " to " << t;
        last[from] = p.doc;
      }
      total += received[t].size();
    }
    EXPECT_EQ(total, sent.load());
    EXPECT_EQ(router.routed(), sent.load());
    EXPECT_GT(total, 0u);
  }
  // One parser never finishes: another's finish() and a hand-over past the bound wait (for the
  // others, for room) and return once the build is stopped.
  pipeline::PostingRouter router(3, 4);
  std::atomic<bool> stop{false};
  std::atomic<int> returned{0};
  const pipeline::PostingRouter::Sink ignore = [](size_t, std::span<const pipeline::RoutedPosting>) {};
  std::thread waiting([&] {
    router.finish(0, ignore, stop);
    ++returned;
  });
  std::thread full([&] {  // over the bound, with nobody taking its inbox
    for (uint32_t i = 0; i < 64; ++i) router.add(1, 2 + 3 * i, i, 1);
    router.hand_over(1, ignore, stop);
    ++returned;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(returned.load(), 0) << "nothing may return while a parser is still handing over";
  stop = true;
  waiting.join();
  full.join();
  EXPECT_EQ(returned.load(), 2);
}

// A run's cursor reads exactly the records of its range, whatever the range and the buffer: from
// the first term at or past `from` up to the first at or past `to`, records longer than the buffer
// and ranges that begin or end between the run's sparse samples (one every 64 KiB) included.
TEST(RunFile, CursorsReadExactlyTheirRangesWithAnyBuffer) {
  const uint64_t seed = testing::test_seed();
  std::mt19937_64 rng(seed);
  const fs::path dir = fs::temp_directory_path() / ("warp-runfile-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::map<std::string, std::vector<Posting>> records;
  while (records.size() < 3000) {
    std::string term(1 + rng() % (rng() % 20 == 0 ? 200 : 12), 'a');
    for (char& c : term) c = static_cast<char>('a' + rng() % 26);
    std::vector<Posting> postings(rng() % 50 == 0 ? 20000 + rng() % 20000 : rng() % 40);
    DocId doc = 0;
    for (Posting& p : postings) p = {doc += 1 + static_cast<DocId>(rng() % 9), static_cast<TermFreq>(rng() % 5)};
    records.emplace(std::move(term), std::move(postings));
  }
  pipeline::RunWriter writer((dir / "run").string());
  for (const auto& [term, postings] : records) writer.add(term, postings);
  const pipeline::RunInfo run = writer.finish();
  ASSERT_GT(run.index.size(), 8u) << "the run should span several samples";
  std::vector<std::string> terms;
  for (const auto& record : records) terms.push_back(record.first);
  for (int trial = 0; trial < 200; ++trial) {
    // Bounds: terms of the run, words between them, or none.
    const auto bound = [&]() -> std::string {
      if (rng() % 3 == 0) return terms[rng() % terms.size()];
      std::string word(1 + rng() % 4, 'a');
      for (char& c : word) c = static_cast<char>('a' + rng() % 26);
      return word;
    };
    std::string from = rng() % 8 == 0 ? std::string() : bound(), to = bound();
    if (to < from) std::swap(from, to);
    const bool bounded = rng() % 4 != 0;
    const size_t buffer = rng() % 2 ? 4096 + rng() % 20000 : 1u << 20;
    pipeline::RunCursor cursor(run, from, buffer, bounded ? &to : nullptr);
    std::vector<Posting> list;
    auto expected = records.lower_bound(from);
    for (; cursor.valid() && (!bounded || cursor.term() < to); ++expected) {
      ASSERT_NE(expected, records.end()) << "seed " << seed << ": read past the run's last record";
      ASSERT_EQ(cursor.term(), expected->first) << "seed " << seed << " trial " << trial;
      list.clear();
      cursor.take(list);
      ASSERT_EQ(list.size(), expected->second.size()) << expected->first;
      ASSERT_TRUE(std::equal(list.begin(), list.end(), expected->second.begin(),
                             [](const Posting& a, const Posting& b) { return a.doc == b.doc && a.freq == b.freq; }))
          << "postings of " << expected->first;
    }
    const auto end = bounded ? records.lower_bound(to) : records.end();
    EXPECT_EQ(expected, end) << "seed " << seed << " trial " << trial << ": the cursor stopped early";
    if (cursor.valid()) {
      EXPECT_EQ(cursor.term(), end->first);
    }
  }
  fs::remove_all(dir);
}

// A run kept on a "device" that is the host: what GpuAnalyzer's run does, by std::sort, failing
// where a test asks (0: the sort, 1: the order, 2 + n: the n-th fetch).
class HostRun final : public pipeline::RunOnDevice {
 public:
  std::vector<std::pair<uint64_t, uint32_t>> postings;  // (stem id << 32 | docID, frequency)
  int fail_at = -1;
  const Analyzer* orders_by = nullptr;  // set: the stems ordered by prefix too, as the GPU does
  void sort(std::vector<uint32_t>& stems, std::vector<uint32_t>& begins, std::vector<uint32_t>& by_prefix,
            std::vector<uint64_t>& prefixes) override {
    fail_if(0);
    std::sort(postings.begin(), postings.end());
    stems.clear(), begins.clear();
    for (size_t i = 0; i < postings.size(); ++i) {
      if (i == 0 || postings[i].first >> 32 != postings[i - 1].first >> 32) {
        stems.push_back(static_cast<uint32_t>(postings[i].first >> 32));
        begins.push_back(static_cast<uint32_t>(i));
      }
    }
    begins.push_back(static_cast<uint32_t>(postings.size()));
    begins_ = begins;
    by_prefix.clear(), prefixes.clear();
    if (orders_by == nullptr) return;
    for (uint32_t i = 0; i < stems.size(); ++i) by_prefix.push_back(i);
    // Ties in an order of their own (stem id descending): the indexer must not rely on any.
    std::sort(by_prefix.begin(), by_prefix.end(), [&](uint32_t a, uint32_t b) {
      const uint64_t pa = pipeline::term_prefix(orders_by->stem(stems[a])),
                     pb = pipeline::term_prefix(orders_by->stem(stems[b]));
      return pa != pb ? pa < pb : stems[a] > stems[b];
    });
    for (uint32_t i : by_prefix) prefixes.push_back(pipeline::term_prefix(orders_by->stem(stems[i])));
  }
  void order(const std::vector<uint32_t>& out_begins) override {
    fail_if(1);
    laid_out_.assign(postings.size(), Posting{});
    for (size_t j = 0; j + 1 < begins_.size(); ++j) {
      for (uint32_t i = begins_[j]; i < begins_[j + 1]; ++i) {
        laid_out_.at(out_begins[j] + (i - begins_[j])) = {static_cast<DocId>(postings[i].first), postings[i].second};
      }
    }
  }
  const Posting* fetch(size_t from, size_t count) override {
    fail_if(2 + fetches_++);
    if (count > fetch_max() || from + count > laid_out_.size()) throw Error("a fetch outside the run");
    slice_.assign(laid_out_.begin() + static_cast<std::ptrdiff_t>(from),
                  laid_out_.begin() + static_cast<std::ptrdiff_t>(from + count));
    return slice_.data();
  }
  size_t fetch_max() const override { return 7; }  // a long list spans several fetches
  void replay(const Sink& sink) override {
    ++replays;
    for (const auto& [key, freq] : postings) sink(static_cast<uint32_t>(key >> 32), static_cast<DocId>(key), freq);
  }
  void clear() override { postings.clear(); }
  int replays = 0;

 private:
  void fail_if(int step) {
    if (step == fail_at) throw Error("a device failure simulated by a test");
  }
  std::vector<uint32_t> begins_;
  std::vector<Posting> laid_out_, slice_;
  int fetches_ = 0;
};

// A parser's indexer writes the same runs whether the chunks' inverted postings are filed into its
// lists or held on a device that sorts them at the spill, with documents the CPU analyzed mixed in
// (the same stems in both), and wherever the device fails: sorting, ordering, or halfway through
// the spill's fetches.
TEST(ParserIndexer, RunsOfPostingsHeldOnADeviceAreTheHostListsRuns) {
  const uint64_t seed = testing::test_seed();
  std::mt19937_64 rng(seed);
  const fs::path dir = fs::temp_directory_path() / ("warp-devicerun-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  SharedStemCache shared(1u << 14);
  Analyzer analyzer;
  analyzer.share_stem_cache(&shared);
  std::vector<std::string> vocabulary;
  for (int w = 0; w < 400; ++w) {
    std::string word(2 + rng() % 8, 'a');
    for (char& c : word) c = static_cast<char>('a' + rng() % 26);
    if (w % 10 == 0) word = "interconnect" + word;  // terms whose first 8 bytes tie
    vocabulary.push_back(word);
  }
  // Chunks of documents as stem ids, each document marked for the CPU or the device.
  struct Doc {
    std::vector<uint32_t> stems, freqs;
    bool on_device;
  };
  std::vector<std::vector<Doc>> chunks(12);
  for (auto& chunk : chunks) {
    chunk.resize(5 + rng() % 30);
    for (Doc& doc : chunk) {
      std::string text;
      const size_t words = 1 + rng() % 60;
      for (size_t i = 0; i < words; ++i) text += vocabulary[std::min<size_t>(rng() % 400, rng() % 400)] + " ";
      std::vector<uint32_t> stems;
      analyzer.analyze_stems(text, stems);
      std::map<uint32_t, uint32_t> counts;
      for (uint32_t id : stems) ++counts[id];
      for (const auto& [id, count] : counts) doc.stems.push_back(id), doc.freqs.push_back(count);
      doc.on_device = rng() % 5 != 0;
    }
  }
  ASSERT_EQ(analyzer.stable_stems(), shared.stems()) << "every stem should be the shared cache's";
  const auto read = [](const pipeline::RunInfo& run) {
    std::ifstream in(run.path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  // The runs (spilled after chunk 5 and at the end) with the device, or without where `run` is null.
  const auto runs_of = [&](const std::string& name, HostRun* run, std::string* failure) {
    const pipeline::IndexerContext context{0, (dir / name).string(), [] { return uint64_t{64} << 20; },
                                           nullptr};  // no spill but ours
    fs::create_directories(context.spill_dir);
    const auto indexer = pipeline::make_parser_indexer(context);
    if (run != nullptr) indexer->set_run_on_device(run);
    for (size_t c = 0; c < chunks.size(); ++c) {
      const DocId base = static_cast<DocId>(1000 * c);
      std::vector<std::pair<uint64_t, uint32_t>> keyed;  // the chunk's device postings, as its inversion sorts them
      for (size_t d = 0; d < chunks[c].size(); ++d) {
        const Doc& doc = chunks[c][d];
        if (!doc.on_device) {
          indexer->add_document(analyzer, base + static_cast<DocId>(d), doc.stems, doc.freqs);
          continue;
        }
        for (size_t i = 0; i < doc.stems.size(); ++i) keyed.push_back({uint64_t{doc.stems[i]} << 32 | d, doc.freqs[i]});
      }
      std::sort(keyed.begin(), keyed.end());
      std::vector<uint64_t> keys;
      std::vector<uint32_t> freqs;
      for (const auto& [key, freq] : keyed) keys.push_back(key), freqs.push_back(freq);
      if (run != nullptr) {
        for (const auto& [key, freq] : keyed) run->postings.push_back({key + base, freq});
        indexer->add_device_postings(analyzer, base, keys.data(), freqs.data(), keys.size());
      } else {
        indexer->add_sorted_postings(analyzer, base, keys.data(), freqs.data(), keys.size());
      }
      indexer->end_chunk();
      if (c == 5) indexer->spill();
    }
    indexer->spill();
    if (failure != nullptr) *failure = indexer->device_failure();
    std::vector<std::string> contents;
    for (const pipeline::RunInfo& info : indexer->runs()) contents.push_back(read(info));
    return contents;
  };
  const std::vector<std::string> expected = runs_of("host", nullptr, nullptr);
  ASSERT_EQ(expected.size(), 2u);
  int ordered = 0;
  for (const int fail_at : {-1, -1, 0, 1, 2, 3, 40, 41}) {
    HostRun run;
    run.fail_at = fail_at;
    if (ordered++ % 2) run.orders_by = &analyzer;  // every other case: the stems come ordered by prefix
    std::string failure;
    EXPECT_EQ(runs_of("device" + std::to_string(fail_at + 1), &run, &failure), expected)
        << "seed " << seed << ", failing at " << fail_at;
    if (fail_at < 0) {
      EXPECT_EQ(failure, "") << "seed " << seed;
      EXPECT_EQ(run.replays, 0) << "seed " << seed;
    } else {
      EXPECT_NE(failure.find("simulated"), std::string::npos)
          << "seed " << seed << ", failing at " << fail_at << ": " << failure;
      EXPECT_EQ(run.replays, 1) << "seed " << seed << ", failing at " << fail_at;
    }
  }
  fs::remove_all(dir);
}

// A parser whose postings go to a device spills once for the documents it analyzed itself before
// the device was ready, and then not again until the device's distinct stems fill its share: the
// arena's blocks are not kept past that spill, where, counted as held, they had made it spill
// every few chunks.
TEST(ParserIndexer, ADeviceRunAfterTheHostsFirstRunSpillsOnlyWhenItsStemsFillTheShare) {
  const uint64_t seed = testing::test_seed();
  std::mt19937_64 rng(seed);
  const fs::path dir = fs::temp_directory_path() / ("warp-devicespill-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  SharedStemCache shared(1u << 16);
  Analyzer analyzer;
  analyzer.share_stem_cache(&shared);
  std::string text;
  for (int w = 0; w < 20000; ++w) {
    std::string word = "w";
    for (int v = w; v > 0; v /= 26) word += static_cast<char>('a' + v % 26);
    text += word + "x ";
  }
  std::vector<uint32_t> stems;
  analyzer.analyze_stems(text, stems);
  std::sort(stems.begin(), stems.end());
  stems.erase(std::unique(stems.begin(), stems.end()), stems.end());
  ASSERT_GT(stems.size(), 19000u);
  constexpr uint64_t kShare = uint64_t{2} << 20;
  const pipeline::IndexerContext context{0, dir.string(), [] { return kShare; }, nullptr};
  const auto indexer = pipeline::make_parser_indexer(context);
  HostRun run;
  indexer->set_run_on_device(&run);
  // Before the device: 3,000 documents of 100 stems on the CPU (2.4 MB of postings, past the share).
  DocId doc = 0;
  for (int d = 0; d < 3000; ++d, ++doc) {
    std::vector<uint32_t> ids(100), freqs(100, 1);
    for (uint32_t& id : ids) id = stems[rng() % stems.size()];
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    freqs.resize(ids.size());
    indexer->add_document(analyzer, doc, ids, freqs);
    if (d % 100 == 99) indexer->end_chunk();
  }
  const size_t host_runs = indexer->runs().size();
  ASSERT_GE(host_runs, 1u) << "the CPU's documents past the share should have been spilled";
  // Then twelve chunks on the device, 2,000 distinct stems each: 12,000 stems at most at 36 bytes,
  // well within the share.
  for (int c = 0; c < 12; ++c) {
    const DocId base = doc;
    std::vector<uint64_t> keys;
    std::vector<uint32_t> freqs;
    for (int i = 0; i < 2000; ++i)
      keys.push_back(uint64_t{stems[(c * 1000 + i) % stems.size()]} << 32 | static_cast<uint32_t>(i % 50));
    std::sort(keys.begin(), keys.end());
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    freqs.assign(keys.size(), 2);
    for (size_t i = 0; i < keys.size(); ++i) run.postings.push_back({keys[i] + base, freqs[i]});
    indexer->add_device_postings(analyzer, base, keys.data(), freqs.data(), keys.size());
    indexer->end_chunk();
    doc += 50;
  }
  EXPECT_EQ(indexer->runs().size(), host_runs) << "seed " << seed << ": the device's chunks should not have spilled";
  indexer->spill();
  EXPECT_EQ(indexer->runs().size(), host_runs + 1);
  EXPECT_EQ(indexer->device_failure(), "");
  fs::remove_all(dir);
}

// A run that cannot be written (a full disk: /dev/full answers every write with ENOSPC) is an
// error naming the file, whether the writer's buffer fills while records are added or only at
// the end.
TEST(RunFile, AWriteThatFailsIsAnErrorNamingTheFile) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full here to fail the writes";
  for (const size_t postings : {size_t{10}, size_t{300000}}) {  // 80 bytes, or 2.4 MB past the 1 MiB buffer
    const std::vector<Posting> list(postings, Posting{7, 1});
    try {
      pipeline::RunWriter writer("/dev/full");
      writer.add("term", list);
      writer.finish();
      ADD_FAILURE() << "a run of " << postings << " postings written to /dev/full without an error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("cannot write run file /dev/full"), std::string::npos) << e.what();
    }
  }
}

TEST(MergeConcurrency, BoundedByThreadsBuffersAndOpenFiles) {
  const uint64_t gib = uint64_t{1} << 30;
  EXPECT_EQ(pipeline::merge_concurrency(2 * gib, 32, 16, 1024), 16u);
  EXPECT_EQ(pipeline::merge_concurrency(2 * gib, 863, 16, 1024), 1u);         // files: 768 spare for 863 runs
  EXPECT_EQ(pipeline::merge_concurrency(2 * gib, 100, 16, 1024), 7u);         // files: 768 / 100
  EXPECT_EQ(pipeline::merge_concurrency(128u << 20, 384, 16, 1u << 20), 5u);  // buffers: 32 MiB / (384 × 16 KiB)
  EXPECT_EQ(pipeline::merge_concurrency(1, 400, 16, 1u << 20), 1u);
  EXPECT_EQ(pipeline::merge_concurrency(2 * gib, 0, 4, 100), 1u);
}

// Many runs, many back-end threads and a low limit on open files: a build whose merges hold a
// descriptor per run completes, and leaks none, under a limit one merge fits in (16 merges of 863
// runs had failed with "cannot open run file"). Here the tiny budget alone already keeps the merges
// to one; that the open-file limit does so too is merge_concurrency's own test above.
TEST_F(PipelineTest, ManyRunsStayWithinTheOpenFileLimit) {
  const char* sample = std::getenv("WARP_DEFAULT_CORPUS_SAMPLE");
  ASSERT_NE(sample, nullptr) << "set WARP_DEFAULT_CORPUS_SAMPLE (ctest does)";
  pipeline::PipelineOptions options;
  options.build.partitions = 2;
  options.threads = 8, options.parsers = 4;
  options.chunk_bytes = 4 << 10;
  options.memory_budget = 1;  // a run every chunk
  pipeline::PipelineReport report;
  ReadReport read;
  const auto expected = pipeline({sample}, options, report, read);
  const uint64_t runs = report.runs_written;
  ASSERT_GE(runs, 200u) << "too few runs to need more descriptors than the limit below";
  rlimit before{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &before), 0);
  rlimit low = before;
  low.rlim_cur = std::min<rlim_t>(before.rlim_max, 256 + runs + 128);  // one merge fits, eight do not
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
  std::vector<std::string> bounded;
  EXPECT_NO_THROW(bounded = pipeline({sample}, options, report, read));
  ::setrlimit(RLIMIT_NOFILE, &before);
  EXPECT_EQ(bounded, expected);
  std::printf("%llu runs under a limit of %llu open files\n", static_cast<unsigned long long>(runs),
              static_cast<unsigned long long>(low.rlim_cur));
}

TEST_F(PipelineTest, DuplicatesAndManyFilesMatchTheBuilder) {
  std::mt19937_64 rng(testing::test_seed());
  const std::vector<std::string> words = {"wing",  "flap",  "lift",     "drag", "mach",
                                          "shock", "layer", "boundary", "über", "x1"};
  fs::create_directories(path("in"));
  for (int f = 0; f < 3; ++f) {
    std::ofstream out(path("in/part" + std::to_string(f) + ".jsonl"));
    for (int d = 0; d < 500; ++d) {
      std::string body;
      for (int w = 0; w < 1 + static_cast<int>(rng() % 40); ++w) body += words[rng() % words.size()] + " ";
      out << R"({"id":"d)" << rng() % 900 << R"(","title":"t","body":")" << body << "\"}\n";  // many repeated ids
    }
  }
  pipeline::PipelineOptions options;
  options.build.partitions = 2;
  options.parsers = 3;
  options.indexers = 3;
  options.split_bytes = 8 << 10;  // duplicates across splits and files
  options.chunk_bytes = 2 << 10;
  pipeline::PipelineReport report;
  ReadReport read, expected_read;
  const auto actual = pipeline({path("in")}, options, report, read);
  EXPECT_EQ(actual, reference({path("in")}, options.build, expected_read)) << "duplicates";
  EXPECT_GT(read.replaced, 100u);
  EXPECT_EQ(read.replaced, expected_read.replaced);
  EXPECT_EQ(read.documents, expected_read.documents);
}

// Terms repeated tens of thousands of times in a document (frequencies on either side of 16 bits,
// where a compact posting would cut them), in lists that stay inline, fill slices or span several,
// through parsers that index their own stems and routed ones, in many runs and in one, give the
// builder's partitions.
TEST_F(PipelineTest, LargeTermFrequenciesMatchTheBuilder) {
  std::mt19937_64 rng(testing::test_seed());
  const std::vector<uint32_t> repeats = {
      1, 2, 65534, 65535, 65536, 70001, 131072 + static_cast<uint32_t>(rng() % 1000)};
  {
    std::ofstream out(path("heavy.jsonl"));
    for (int d = 0; d < 80; ++d) {
      std::string body;
      // "heavy" in every document at a frequency drawn from `repeats`, "rare" in a few, and a
      // word of each document's own.
      const uint32_t heavy = repeats[rng() % repeats.size()];
      body.reserve(heavy * 6 + 64);
      for (uint32_t i = 0; i < heavy; ++i) body += "heavy ";
      if (d % 13 == 5) {
        for (uint32_t i = 0; i < 65535 + static_cast<uint32_t>(d); ++i) body += "rare ";
      }
      body += "own" + std::to_string(d);
      out << R"({"id":"h)" << d << R"(","title":"t","body":")" << body << "\"}\n";
    }
  }
  pipeline::PipelineOptions options;
  options.build.partitions = 2;
  ReadReport expected_read;
  const auto expected = reference({path("heavy.jsonl")}, options.build, expected_read);
  for (const size_t parsers : {1, 3}) {
    for (const uint64_t budget : {uint64_t{1}, uint64_t{512} << 20}) {  // many runs, one a parser
      options.parsers = parsers, options.indexers = 0, options.threads = parsers;
      options.memory_budget = budget;
      options.split_bytes = 256 << 10;
      options.chunk_bytes = 64 << 10;
      pipeline::PipelineReport report;
      ReadReport read;
      EXPECT_EQ(pipeline({path("heavy.jsonl")}, options, report, read), expected)
          << parsers << " parsers, budget " << budget;
    }
  }
}

// Malformed records in a file read in many splits are reported with their file line, as a
// single reader reports them.
TEST_F(PipelineTest, MalformedRecordsInSplitsKeepTheirFileLines) {
  {
    std::ofstream out(path("mixed.jsonl"));
    for (int i = 1; i <= 3000; ++i) {
      if (i % 397 == 0) {
        out << "{not json at line " << i << "\n";
      } else if (i % 501 == 0) {
        out << "\n";  // blank lines count as lines, not records
      } else {
        out << R"({"id":"m)" << i << R"(","body":"record )" << i << R"( of the mixed file"})"
            << "\n";
      }
    }
  }
  {
    std::ofstream out(path("mixed.trec"));
    for (int i = 1; i <= 800; ++i) {
      if (i % 97 == 0) out << "stray text between documents\n";
      out << "<DOC>\n<DOCNO> t" << i << " </DOCNO>\n<TEXT>\ndocument " << i << "\n</TEXT>\n</DOC>\n";
    }
  }
  for (const std::string& file : {path("mixed.jsonl"), path("mixed.trec")}) {
    ReadReport expected;
    read_documents({file}, expected);
    ASSERT_GT(expected.rejected, 4u) << file;
    pipeline::PipelineOptions options;
    options.parsers = 4;
    options.split_bytes = 4 << 10;
    options.chunk_bytes = 1 << 10;
    pipeline::PipelineReport report;
    ReadReport read;
    pipeline({file}, options, report, read);
    EXPECT_GT(report.splits, 10u) << file;
    EXPECT_EQ(read.documents, expected.documents) << file;
    EXPECT_EQ(read.rejected, expected.rejected) << file;
    EXPECT_EQ(read.errors, expected.errors) << file;
  }
}

// Every split of a file read alone, back to back, gives the file's records once each, in order.
TEST_F(PipelineTest, SplitsHoldEveryRecordOnce) {
  const char* sample = std::getenv("WARP_DEFAULT_CORPUS_SAMPLE");
  ASSERT_NE(sample, nullptr) << "set WARP_DEFAULT_CORPUS_SAMPLE (ctest does)";
  ReadReport report;
  const auto docs = read_documents({sample}, report);
  testing::write_trec(path("s.trec"), docs);
  std::mt19937_64 rng(testing::test_seed());
  for (const std::string& file : {std::string(sample), path("s.trec")}) {
    for (uint64_t split_bytes : {uint64_t{997}, 1 + rng() % 20000, uint64_t{1} << 40}) {
      std::vector<std::string> ids;
      uint64_t lines = 0;
      for (const InputSplit& split : plan_splits({file}, split_bytes)) {
        SplitReader reader(split);
        SourceDocument doc;
        while (reader.next(doc)) ids.push_back(doc.external_id);
        lines += reader.lines();
      }
      ASSERT_EQ(ids.size(), docs.size()) << file << " split " << split_bytes;
      for (size_t i = 0; i < ids.size(); ++i)
        ASSERT_EQ(ids[i], docs[i].external_id) << file << " split " << split_bytes;
      uint64_t file_lines = 0;
      std::ifstream in(file);
      for (std::string line; std::getline(in, line);) ++file_lines;
      EXPECT_EQ(lines, file_lines) << file << " split " << split_bytes;
    }
  }
}

// The indexer's large tables: huge-page aligned from 2 MiB on, small ones from the heap, contents
// kept as they grow (across the 2 MiB line).
TEST(HugePages, LargeTablesAreAlignedAndKeepTheirContentsAsTheyGrow) {
  std::mt19937_64 rng(testing::test_seed());
  HugeVector<uint64_t> table;
  std::vector<uint64_t> reference;
  for (size_t i = 0; i < (size_t{5} << 20) / sizeof(uint64_t); ++i) {
    const uint64_t v = rng();
    table.push_back(v);
    reference.push_back(v);
    if (table.capacity() * sizeof(uint64_t) >= kHugePageBytes) {
      ASSERT_EQ(reinterpret_cast<uintptr_t>(table.data()) % kHugePageBytes, 0u) << "at " << table.size() << " elements";
    }
  }
  EXPECT_TRUE(std::equal(table.begin(), table.end(), reference.begin(), reference.end()));
  HugeVector<uint32_t> small(10, 7);
  EXPECT_EQ(small[9], 7u);
}

TEST(HugePages, ZeroedTablesAreAlignedZeroedAndMovable) {
  for (size_t count : {size_t{3}, (size_t{5} << 20) / sizeof(uint64_t) + 1}) {
    ZeroedTable<uint64_t> table(count);
    ASSERT_EQ(reinterpret_cast<uintptr_t>(table.get()) % kHugePageBytes, 0u);
    for (size_t i = 0; i < count; i += 4093) ASSERT_EQ(table[i], 0u) << i;
    ASSERT_EQ(table[count - 1], 0u);
    table[count - 1] = 42;
    ZeroedTable<uint64_t> moved;
    moved = std::move(table);
    EXPECT_EQ(moved[count - 1], 42u);
    EXPECT_EQ(table.get(), nullptr);
  }
}

TEST(TermForest, FindsWhatItInsertedInOrder) {
  std::mt19937_64 rng(testing::test_seed());
  pipeline::TermForest forest;
  std::map<std::pair<uint32_t, std::string>, uint32_t> expected;
  for (int i = 0; i < 20000; ++i) {
    std::string s;
    for (size_t n = rng() % 9; n > 0; --n) s += static_cast<char>('a' + rng() % 6);  // many shared prefixes
    const uint32_t collection = static_cast<uint32_t>(rng() % 3);
    const uint32_t id = forest.find_or_insert(collection, s);
    auto [it, inserted] = expected.try_emplace({collection, s}, id);
    ASSERT_EQ(it->second, id) << s;
    if (inserted) {
      ASSERT_EQ(id, forest.size() - 1);
    }
  }
  for (uint32_t collection = 0; collection < 3; ++collection) {
    std::vector<uint32_t> ids;
    forest.in_order(collection, ids);
    std::vector<std::string> walked;
    for (uint32_t id : ids) walked.emplace_back(forest.suffix(id));
    std::vector<std::string> sorted;
    for (const auto& [key, id] : expected) {
      if (key.first == collection) sorted.push_back(key.second);
    }
    EXPECT_EQ(walked, sorted) << "collection " << collection;
  }
}

// The spill's order: every term of the forest in byte order, from the collections' trees, for
// terms of every kind (three letters and more, short ones, digits, punctuation, bytes past 'z').
TEST(TermForest, GivesEveryTermInByteOrder) {
  std::mt19937_64 rng(testing::test_seed());
  const std::string alphabet = "abcz0179-_:`~{\x7f\x80\xc3\xa9 !";
  pipeline::TermForest forest;
  std::map<std::string, uint32_t> expected;  // byte order: std::string compares as unsigned char
  for (int i = 0; i < 30000; ++i) {
    std::string term;
    const size_t length = rng() % 7;
    for (size_t n = 0; n < length; ++n)
      term += n < 3 && rng() % 4 != 0 ? static_cast<char>('a' + rng() % 3) : alphabet[rng() % alphabet.size()];
    const uint32_t collection = pipeline::trie_collection(term);
    const uint32_t id = forest.find_or_insert(collection, pipeline::trie_suffix(term, collection));
    expected.try_emplace(term, id);
  }
  std::vector<uint32_t> ids;
  forest.in_term_order(ids);
  std::vector<uint32_t> sorted;
  for (const auto& [term, id] : expected) sorted.push_back(id);
  EXPECT_EQ(ids, sorted);
}

TEST(TrieCollections, CoverEveryTerm) {
  EXPECT_EQ(pipeline::kTrieCollections, 17613u);
  EXPECT_EQ(pipeline::trie_collection("aaa"), 0u);
  EXPECT_EQ(pipeline::trie_collection("zzzebra"), 17575u);
  EXPECT_EQ(pipeline::trie_suffix("wingspan", pipeline::trie_collection("wingspan")), "gspan");
  EXPECT_EQ(pipeline::trie_collection("747"), 17576u + 7);
  EXPECT_EQ(pipeline::trie_collection("ox"), 17586u + ('o' - 'a'));
  EXPECT_EQ(pipeline::trie_collection("éclair"), pipeline::kTrieCollections - 1);
  EXPECT_EQ(pipeline::trie_suffix("éclair", pipeline::kTrieCollections - 1), "éclair");
}

}  // namespace
}  // namespace warp
