// The near-real-time path against a fresh build: a generation, then random puts (new ids and
// replacements of the generation's documents and of written ones) and deletes, computed by the
// indexer's CollectionState and applied by a leaf's LiveWrites in batches. After every batch, and
// after a newer generation holding some of the writes is swapped in, every query's top k (ids and
// scores, bit for bit, ties in order) equals that of a fresh single-partition build of the
// documents the writes leave, in the order a fold gives them (the generation's survivors, then the
// written documents by their last write). Four swaps: twice to a generation of as many partitions
// holding some of the writes (the segments kept), to one of fewer partitions holding more (made
// again), and to one holding all (served as it is). On the CPU, and on the GPU where there is one
// (the generation's lists searched there under the overlay; the deleted documents kept out by
// their norms on the device).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "common/index/index_files.hpp"
#include "common/index/word_positions.hpp"
#include "common/transfer/generation_files.hpp"
#include "common/transfer/tail_frames.hpp"
#include "common/util/status.hpp"
#include "indexer/writes/collection_state.hpp"
#include "leaf/gpu/gpu_runtime.hpp"
#include "leaf/live/live_writes.hpp"
#include "leaf/query/cpu_query_processor.hpp"
#include "tests/support/test_seed.hpp"

namespace warp {
namespace {
namespace fs = std::filesystem;

struct Doc {
  std::string id, title, body;
};

class Collection {
 public:
  explicit Collection(std::mt19937_64& rng) : rng_(rng) {
    const char* syllables[] = {"ka", "lo", "mi", "ru", "te", "zan", "por", "vel", "dus", "quin"};
    for (int i = 0; i < 10; ++i)
      for (int j = 0; j < 10; ++j) words_.push_back(std::string(syllables[i]) + syllables[j] + "x");
  }
  std::string word() {  // skewed: low ranks often, as in text
    std::uniform_real_distribution<double> u(0, 1);
    return words_[static_cast<size_t>(std::pow(u(rng_), 2.5) * static_cast<double>(words_.size()))];
  }
  std::string text(int at_most) {
    std::string t;
    const int n = std::uniform_int_distribution<int>(0, at_most)(rng_);
    for (int i = 0; i < n; ++i) t += word() + " ";
    return t;
  }
  Doc doc(const std::string& id) { return {id, text(3), text(40)}; }

 private:
  std::mt19937_64& rng_;
  std::vector<std::string> words_;
};

SourceDocument source(const Doc& d) { return {d.id, d.title, d.body, ""}; }

void write_generation(const std::vector<Doc>& docs, uint32_t partitions, uint64_t generation, uint64_t sequence,
                      const fs::path& dir) {
  BuildOptions options;
  options.partitions = partitions, options.generation = generation;
  IndexBuilder builder(options);
  for (const Doc& d : docs) builder.add_document(source(d));
  write_index(builder.build(), dir.string());
  transfer::write_write_sequence(dir.string(), sequence);
}

using Answer = std::vector<std::pair<std::string, Score>>;

// The served index's answer: on its GPU processors where it has them (processor "gpu"), else the CPU's.
Answer live_answer(const LoadedIndex& index, const Query& query) {
  std::vector<std::vector<Hit>> lists;
  std::map<DocId, std::string> ids;
  for (size_t slot = 0; slot < index.cpu.size(); ++slot) {
    lists.push_back(index.gpu.empty() ? index.cpu[slot]->search(query).hits : index.gpu[slot]->search(query).hits);
    for (const Hit& hit : lists.back()) {
      auto record = index.document(slot, hit.doc);
      ids[hit.doc] = record ? record->external_id : "?";
    }
  }
  Answer answer;
  for (const Hit& hit : merge_topk(std::move(lists), query.k)) answer.emplace_back(ids[hit.doc], hit.score);
  return answer;
}

Answer fresh_answer(const std::vector<Doc>& docs, const Query& query) {
  IndexBuilder builder(BuildOptions{});
  for (const Doc& d : docs) builder.add_document(source(d));
  std::vector<BuiltPartition> built = builder.build();
  CpuQueryProcessor processor(built[0].view);
  Answer answer;
  for (const Hit& hit : processor.search(query).hits)
    answer.emplace_back(built[0].documents[hit.doc - built[0].view.meta.doc_begin].external_id, hit.score);
  return answer;
}

// The documents the writes leave, in a fold's order.
struct Truth {
  std::vector<Doc> base;                                                   // the generation's, in order
  std::map<std::string, std::pair<uint64_t, std::optional<Doc>>> written;  // id → last write
  std::vector<Doc> documents() const {
    std::vector<Doc> out;
    for (const Doc& d : base)
      if (!written.count(d.id)) out.push_back(d);
    std::map<uint64_t, Doc> by_sequence;
    for (const auto& [id, last] : written)
      if (last.second) by_sequence.emplace(last.first, *last.second);
    for (auto& [sequence, d] : by_sequence) out.push_back(d);
    return out;
  }
};

// Write `sequence` as the indexer logs it: a delete of `id`, or a put of a new random document
// under it; `truth` follows.
LoggedWrite logged_op(writes::CollectionState& indexer, uint64_t sequence, const std::string& id, bool remove,
                      Collection& words, Truth& truth) {
  writes::WriteOp op;
  op.id = id;
  if (remove) {
    op.kind = writes::WriteOp::Kind::kDelete;
    truth.written[id] = {sequence, std::nullopt};
  } else {
    const Doc d = words.doc(id);
    op.document = nlohmann::json{{"id", d.id}, {"title", d.title}, {"body", d.body}}.dump();
    truth.written[id] = {sequence, d};
  }
  return indexer.apply(sequence, op);
}

void expect_same_answers(const LoadedIndex& served, const std::vector<Doc>& docs, Collection& words,
                         std::mt19937_64& rng, const std::string& where) {
  Analyzer analyzer;
  for (int q = 0; q < 60; ++q) {
    std::vector<std::string> terms = analyzer.analyze(words.text(4) + words.word());
    const QueryMode mode = q % 2 == 0 ? QueryMode::kOr : QueryMode::kAnd;
    const size_t k = std::vector<size_t>{1, 10, 50}[static_cast<size_t>(q) % 3];
    Query query(terms, mode, k);
    // The query syntax's constraints too: the overlay's deletions and a query's own kept-out
    // documents together.
    if (q % 4 == 1 && !terms.empty()) query.required = {terms.front()};
    if (q % 4 == 2 && terms.size() > 1) query.excluded = {{terms.back()}};
    const Answer expected = fresh_answer(docs, query);
    const Answer got = live_answer(served, query);
    ASSERT_EQ(got, expected) << where << " on the " << (served.gpu.empty() ? "CPU" : "GPU") << ": query " << q << " ("
                             << (mode == QueryMode::kOr ? "OR" : "AND") << ", k " << k << ")";
  }
  (void)rng;
}

// The whole run with the generations served on `processor` ("cpu", or "gpu": the overlay's norms
// on the device, the segments on the CPU).
void every_point_answers_as_a_fresh_build(const std::string& processor) {
  std::mt19937_64 rng(testing::test_seed());
  Collection words(rng);
  const fs::path root = fs::temp_directory_path() / ("warp-live-writes-" + std::to_string(::getpid()));
  fs::remove_all(root);
  Truth truth;
  for (int i = 0; i < 300; ++i) truth.base.push_back(words.doc("base-" + std::to_string(i)));
  constexpr uint32_t kPartitions = 3;
  write_generation(truth.base, kPartitions, 1, 0, root / "gen-000001");

  writes::CollectionState indexer{AnalyzerConfig{}};
  indexer.load_generation((root / "gen-000001").string());
  ASSERT_EQ(indexer.doc_count(), 300u);
  LiveWrites live;
  std::shared_ptr<const LoadedIndex> served =
      live.rebase(load_index((root / "gen-000001").string(), {}, processor, gpu::GpuSettings{}));
  transfer::TailAnswer hello;
  hello.epoch = 1;
  live.take(hello);  // the indexer's epoch learned

  uint64_t sequence = 0;
  std::vector<transfer::TailAnswer> batches;
  std::map<uint64_t, Doc> put_docs;  // by sequence
  // A generation holding the writes of batches 0..last (a fold: in the fold's order), swapped in:
  // the writes it holds are dropped and the rest served over it.
  const auto fold = [&](size_t last, uint32_t partitions, uint64_t generation) {
    Truth at_fold;
    at_fold.base = truth.base;
    for (size_t b = 0; b <= last; ++b)
      for (const LoggedWrite& w : batches[b].writes)
        at_fold.written[w.id] = {
            w.sequence, w.kind == LoggedWrite::Kind::kPut ? std::optional<Doc>(put_docs.at(w.sequence)) : std::nullopt};
    const uint64_t folded_to = batches[last].writes.back().sequence;
    const fs::path dir = root / ("gen-00000" + std::to_string(generation));
    write_generation(at_fold.documents(), partitions, generation, folded_to, dir);
    served = live.rebase(load_index(dir.string(), {}, processor, gpu::GpuSettings{}));
    EXPECT_EQ(served->generation, generation);
    EXPECT_EQ(served->write_sequence, sequence);
    EXPECT_EQ(live.writes_held(), sequence - folded_to);
    expect_same_answers(*served, truth.documents(), words, rng, "over generation " + std::to_string(generation));
  };
  for (int batch = 0; batch < 9; ++batch) {
    transfer::TailAnswer answer;
    answer.epoch = 1;
    const int ops = std::uniform_int_distribution<int>(1, 40)(rng);
    for (int o = 0; o < ops; ++o) {
      const int kind = std::uniform_int_distribution<int>(0, 9)(rng);
      std::string id;
      if (kind < 4)
        id = "new-" + std::to_string(sequence);
      else if (kind < 7)
        id = "base-" + std::to_string(std::uniform_int_distribution<int>(0, 299)(rng));
      else
        id = "new-" + std::to_string(std::uniform_int_distribution<uint64_t>(0, sequence)(rng));
      answer.writes.push_back(logged_op(indexer, ++sequence, id, kind == 9 || kind == 6, words, truth));
      if (const auto& put = truth.written[id].second) put_docs[sequence] = *put;
    }
    answer.last = sequence;
    served = live.take(answer);
    ASSERT_NE(served, nullptr);
    EXPECT_EQ(served->write_sequence, sequence);
    const std::vector<Doc> docs = truth.documents();
    EXPECT_EQ(indexer.doc_count(), docs.size());
    expect_same_answers(*served, docs, words, rng, "after batch " + std::to_string(batch));
    if (::testing::Test::HasFatalFailure()) return;
    batches.push_back(std::move(answer));
    // Folds: after batch 5 a generation holding batches 0-2 in as many partitions (the segments
    // kept, what it holds masked in them), after batch 6 one holding batches 0-4 (kept again: the
    // writes the one before held are gone); after batch 7 one holding batches 0-6 in 2 partitions
    // (the segments made again from the writes it lacks).
    if (batch == 5) fold(2, kPartitions, 2);
    if (batch == 6) fold(4, kPartitions, 3);
    if (batch == 7) fold(6, 2, 4);
    if (::testing::Test::HasFatalFailure()) return;
  }

  // One holding them all: served as it is, nothing over it.
  write_generation(truth.documents(), 1, 5, sequence, root / "gen-000005");
  std::shared_ptr<const LoadedIndex> generation5 =
      load_index((root / "gen-000005").string(), {}, processor, gpu::GpuSettings{});
  served = live.rebase(generation5);
  EXPECT_EQ(served, generation5);
  EXPECT_EQ(live.writes_held(), 0u);
  expect_same_answers(*served, truth.documents(), words, rng, "over generation 5");
  fs::remove_all(root);
}

TEST(LiveWrites, EveryPointAnswersAsAFreshBuildOfTheSameDocuments) { every_point_answers_as_a_fresh_build("cpu"); }

// Segments merge on threads of their own and are taken in later: the documents of a merge's
// segments replaced or deleted while it ran stay out of the merged segment, the others are found
// in it (a later replacement masks them there), and the answers equal a fresh build's throughout.
TEST(LiveWrites, MergedSegmentsKeepOutWhatWasWrittenWhileTheyMerged) {
  std::mt19937_64 rng(testing::test_seed());
  Collection words(rng);
  const fs::path root = fs::temp_directory_path() / ("warp-live-merges-" + std::to_string(::getpid()));
  fs::remove_all(root);
  Truth truth;
  for (int i = 0; i < 50; ++i) truth.base.push_back(words.doc("base-" + std::to_string(i)));
  write_generation(truth.base, 1, 1, 0, root / "gen-000001");
  writes::CollectionState indexer{AnalyzerConfig{}};
  indexer.load_generation((root / "gen-000001").string());
  LiveWrites live;
  std::shared_ptr<const LoadedIndex> served =
      live.rebase(load_index((root / "gen-000001").string(), {}, "cpu", gpu::GpuSettings{}));
  transfer::TailAnswer hello;
  hello.epoch = 1;
  live.take(hello);
  live.hold_merges(true);
  uint64_t sequence = 0;
  const auto batch = [&](const std::vector<std::pair<std::string, bool>>& ops) {  // (id, delete)
    transfer::TailAnswer answer;
    answer.epoch = 1;
    for (const auto& [id, remove] : ops)
      answer.writes.push_back(logged_op(indexer, ++sequence, id, remove, words, truth));
    answer.last = sequence;
    served = live.take(answer);
    ASSERT_NE(served, nullptr);
  };
  // Four segments of a tier: their merge starts with the fourth.
  for (int b = 0; b < 4; ++b) {
    std::vector<std::pair<std::string, bool>> ops;
    for (int i = 0; i < 5; ++i) ops.emplace_back("new-" + std::to_string(b * 5 + i), false);
    batch(ops);
    if (::testing::Test::HasFatalFailure()) return;
  }
  EXPECT_EQ(live.merges_running(), 1u);
  EXPECT_EQ(live.segments(0), 4u);
  // While it runs (done or not, not taken in): documents of its segments replaced and deleted.
  batch({{"new-1", false}, {"new-7", true}, {"new-12", false}, {"new-19", true}, {"base-3", false}});
  if (::testing::Test::HasFatalFailure()) return;
  expect_same_answers(*served, truth.documents(), words, rng, "with the merge under way");
  if (::testing::Test::HasFatalFailure()) return;
  served = live.settle();
  ASSERT_NE(served, nullptr);
  EXPECT_EQ(live.merges_running(), 0u);
  EXPECT_EQ(live.segments(0), 2u);  // the merged one and the last batch's
  expect_same_answers(*served, truth.documents(), words, rng, "the merged segment taken in");
  if (::testing::Test::HasFatalFailure()) return;
  // Documents of the merged segment replaced and deleted after it was taken in.
  batch({{"new-2", false}, {"new-8", true}, {"new-1", true}, {"new-30", false}});
  if (::testing::Test::HasFatalFailure()) return;
  expect_same_answers(*served, truth.documents(), words, rng, "after writes over the merged segment");
  if (::testing::Test::HasFatalFailure()) return;
  // A swap with a merge under way (held: not taken) leaves it to end on its own; the segments it
  // read stay, renumbered past the new generation, and are merged again later.
  for (int b = 0; b < 4; ++b) {
    std::vector<std::pair<std::string, bool>> ops;
    for (int i = 0; i < 5; ++i) ops.emplace_back("later-" + std::to_string(b * 5 + i), false);
    batch(ops);
    if (::testing::Test::HasFatalFailure()) return;
  }
  EXPECT_EQ(live.merges_running(), 1u);
  const uint64_t folded = sequence;
  batch({{"last-1", false}, {"last-2", false}});
  if (::testing::Test::HasFatalFailure()) return;
  Truth at_fold{truth.base, {}};  // the generation holds every write up to `folded`
  for (const auto& [id, last] : truth.written)
    if (last.first <= folded) at_fold.written.emplace(id, last);
  write_generation(at_fold.documents(), 1, 2, folded, root / "gen-000002");
  served = live.rebase(load_index((root / "gen-000002").string(), {}, "cpu", gpu::GpuSettings{}));
  EXPECT_EQ(live.merges_running(), 0u);
  EXPECT_EQ(served->write_sequence, sequence);
  expect_same_answers(*served, truth.documents(), words, rng, "swapped with a merge under way");
  fs::remove_all(root);
}

TEST(LiveWrites, OnTheGpuEveryPointAnswersAsAFreshBuild) {
  std::string why;
  if (!gpu::gpu_available(&why)) GTEST_SKIP() << "no usable GPU: " << why;
  every_point_answers_as_a_fresh_build("gpu");
}

// The tail's two forms of a reply (writes encoded once by the indexer, or built per reply for a
// leaf of an earlier release) read back as the same writes; a reply out of sequence and a
// malformed encoded write are refused.
// The words in order the indexer sends with a put are the analyzer's, title then body, and the
// word positions a leaf makes of them are those a build makes of the document's stored form.
TEST(LoggedWrites, WordsInOrderGiveTheStoredFormsPositions) {
  std::mt19937_64 rng(testing::test_seed());
  Collection words(rng);
  writes::CollectionState indexer{AnalyzerConfig{}};
  Analyzer analyzer;
  PositionsBuilder from_tokens(AnalyzerConfig{}, 0), from_sources(AnalyzerConfig{}, 0);
  for (uint64_t sequence = 1; sequence <= 200; ++sequence) {
    writes::WriteOp op;
    op.id = "d" + std::to_string(sequence);
    nlohmann::json doc = {{"id", op.id}};
    if (rng() % 5 != 0) doc["title"] = words.text(4);  // some without a title, some with an empty one
    if (rng() % 7 != 0) doc["body"] = words.text(30);
    op.document = doc.dump();
    const LoggedWrite write = indexer.apply(sequence, op);
    const std::string title = doc.value("title", ""), body = doc.value("body", "");
    std::vector<std::string> expected = analyzer.analyze(title);
    ASSERT_EQ(write.title_tokens, expected.size()) << op.document;
    for (std::string& word : analyzer.analyze(body)) expected.push_back(std::move(word));
    ASSERT_EQ(write.tokens.size(), write.length);
    std::vector<std::string> got;
    for (uint32_t token : write.tokens) got.push_back(write.terms.at(token).first);
    ASSERT_EQ(got, expected) << op.document;
    const auto doc_id = static_cast<DocId>(sequence - 1);
    from_tokens.add_tokens(doc_id, write.terms, write.tokens, write.title_tokens);
    from_sources.add_source(doc_id, write.source);
  }
  EXPECT_GT(from_tokens.position_count(), 1000u);
  EXPECT_EQ(from_tokens.rows(), from_sources.rows());
}

TEST(TailFrames, EncodedAndPlainRepliesCarryTheSameWrites) {
  std::mt19937_64 rng(testing::test_seed());
  Collection words(rng);
  std::vector<LoggedWrite> writes;
  for (uint64_t sequence = 41; sequence < 41 + 30; ++sequence) {
    LoggedWrite w;
    w.sequence = sequence;
    w.kind = sequence % 5 == 0 ? LoggedWrite::Kind::kDelete : LoggedWrite::Kind::kPut;
    w.id = "doc-" + std::to_string(rng() % 1000);
    w.title = words.text(3), w.url = "http://example.org/" + w.id, w.source = "{\"body\":\"" + words.text(9) + "\"}";
    for (int t = 0; t < 1 + static_cast<int>(rng() % 12); ++t) w.terms.emplace_back(words.word(), 1 + rng() % 4);
    w.length = static_cast<uint32_t>(rng() % 200), w.doc_count = rng(), w.total_length = rng();
    if (w.kind == LoggedWrite::Kind::kPut && rng() % 4 != 0) {  // the words in order (absent: an older indexer's)
      for (uint32_t i = 0; i < w.length; ++i) w.tokens.push_back(static_cast<uint32_t>(rng() % w.terms.size()));
      w.title_tokens = static_cast<uint32_t>(rng() % (w.length + 1));
    }
    for (const auto& [term, freq] : w.terms) w.df.emplace_back(term, rng() % 100000);
    w.logged_unix_ns = rng();
    writes.push_back(std::move(w));
  }
  transfer::TailAnswer plain;
  plain.epoch = 7, plain.first_kept = 12, plain.last = 99, plain.writes = writes;
  transfer::TailAnswer header = plain;
  header.writes.clear();
  std::vector<std::string> encoded;
  for (const LoggedWrite& w : writes) encoded.push_back(transfer::encode_logged_write(w));
  const std::vector<std::string_view> views(encoded.begin(), encoded.end());
  const auto same = [&](const transfer::TailAnswer& got) {
    ASSERT_EQ(got.writes.size(), writes.size());
    EXPECT_EQ(got.epoch, 7u);
    EXPECT_EQ(got.first_kept, 12u);
    EXPECT_EQ(got.last, 99u);
    for (size_t i = 0; i < writes.size(); ++i) {
      const LoggedWrite &a = got.writes[i], &b = writes[i];
      EXPECT_EQ(a.sequence, b.sequence);
      EXPECT_EQ(a.kind, b.kind);
      EXPECT_EQ(std::tie(a.id, a.title, a.url, a.source), std::tie(b.id, b.title, b.url, b.source));
      EXPECT_EQ(a.terms, b.terms);
      EXPECT_EQ(a.tokens, b.tokens);
      EXPECT_EQ(a.title_tokens, b.title_tokens);
      EXPECT_EQ(a.df, b.df);
      EXPECT_EQ(std::tie(a.length, a.doc_count, a.total_length, a.logged_unix_ns),
                std::tie(b.length, b.doc_count, b.total_length, b.logged_unix_ns));
    }
  };
  same(transfer::read_tail_reply(transfer::tail_reply_frame(plain), 40));
  same(transfer::read_tail_reply(transfer::tail_reply_frame(header, views), 40));
  EXPECT_THROW(transfer::read_tail_reply(transfer::tail_reply_frame(header, views), 39), Error);
  std::vector<std::string_view> gap = views;
  gap.erase(gap.begin() + 3);
  EXPECT_THROW(transfer::read_tail_reply(transfer::tail_reply_frame(header, gap), 40), Error);
  const std::string torn = encoded[2].substr(0, 12);
  EXPECT_THROW(transfer::decode_logged_write(torn), Error);
  // Words in order that are none of the write's terms, or not as many as its length: refused.
  LoggedWrite bad = writes[1];
  bad.kind = LoggedWrite::Kind::kPut;
  bad.length = 2, bad.tokens = {0, static_cast<uint32_t>(bad.terms.size())}, bad.title_tokens = 0;
  EXPECT_THROW(transfer::decode_logged_write(transfer::encode_logged_write(bad)), Error);
  bad.tokens = {0};
  EXPECT_THROW(transfer::decode_logged_write(transfer::encode_logged_write(bad)), Error);
  bad.tokens = {0, 0}, bad.title_tokens = 3;
  EXPECT_THROW(transfer::decode_logged_write(transfer::encode_logged_write(bad)), Error);
}

}  // namespace
}  // namespace warp
