// Partitions on disk: round trip through RocksDB, refusal of corrupt, truncated, foreign or
// mismatched partitions with a clear error, index directories, and rescoring for other BM25
// parameters.
#include <gtest/gtest.h>
#include <rocksdb/db.h>
#include <rocksdb/env.h>
#include <rocksdb/file_system.h>
#include <unistd.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "common/index/build_file_system.hpp"
#include "common/index/index_files.hpp"
#include "common/index/partition_store.hpp"
#include "common/util/byte_io.hpp"
#include "common/util/checksum.hpp"
#include "common/util/status.hpp"
#include "leaf/query/cpu_query_processor.hpp"
#include "leaf/query/index_searcher.hpp"
#include "tests/bench/synthetic_collection.hpp"
#include "tests/support/brute_force.hpp"
#include "tests/support/test_seed.hpp"
#include "tests/support/topk_match.hpp"

namespace warp {
namespace {
namespace fs = std::filesystem;

// crc32_of folds short inputs with its own tables and long ones with zlib: both must be zlib's
// CRC-32 at every length, seed, alignment and split into pieces (partitions written before the
// tables carry zlib's checksums).
TEST(Checksum, EqualsZlibAtEveryLengthSeedAlignmentAndSplit) {
  std::mt19937_64 rng(testing::test_seed());
  std::vector<unsigned char> data(70'000);
  for (auto& b : data) b = static_cast<unsigned char>(rng());
  const auto zlib = [&](size_t at, size_t n, uint32_t seed) {
    return static_cast<uint32_t>(crc32(seed, data.data() + at, static_cast<uInt>(n)));
  };
  for (size_t n = 0; n <= 1100; ++n) {
    const size_t at = rng() % 64;
    const uint32_t seed = n % 3 == 0 ? 0 : static_cast<uint32_t>(rng());
    ASSERT_EQ(crc32_of(data.data() + at, n, seed), zlib(at, n, seed)) << "length " << n << " at " << at;
  }
  for (int i = 0; i < 200; ++i) {
    const size_t n = rng() % 65'000, at = rng() % 4096;
    const size_t cut = n == 0 ? 0 : rng() % n;
    const uint32_t first = crc32_of(data.data() + at, cut);
    EXPECT_EQ(crc32_of(data.data() + at + cut, n - cut, first), zlib(at, n, 0)) << "length " << n << " cut at " << cut;
  }
  EXPECT_EQ(crc32_of(std::string_view("123456789")), 0xCBF43926u);  // the CRC-32 check value
}

class PartitionStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("warp-store-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    synthetic::CollectionParams params;
    params.documents = 3000;
    params.vocabulary = 2000;
    params.mean_length = 40;
    params.seed = testing::test_seed();
    BuildOptions options;
    options.partitions = 3;
    options.generation = 7;
    IndexBuilder builder(options);
    uint32_t doc = 0;
    synthetic::generate_collection(params, [&](const std::vector<std::string>& terms) {
      builder.add_analyzed(
          {"doc-" + std::to_string(doc), "title " + std::to_string(doc), "http://x/" + std::to_string(doc), 0}, terms);
      reference_.add(terms);
      ++doc;
    });
    built_ = builder.build();
    write_index(built_, dir_.string());
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string part(int id) const { return (dir_ / ("part-000" + std::to_string(id))).string(); }

  fs::path dir_;
  std::vector<BuiltPartition> built_;
  testing::BruteForceIndex reference_;
};

TEST_F(PartitionStoreTest, RoundTripKeepsEverything) {
  for (int id = 0; id < 3; ++id) {
    auto partition = open_partition(part(id));
    const IndexView& loaded = partition->view();
    const IndexView& original = built_[id].view;
    EXPECT_EQ(loaded.meta.generation, 7u);
    EXPECT_EQ(loaded.meta.partition_id, static_cast<uint32_t>(id));
    EXPECT_EQ(loaded.meta.doc_begin, original.meta.doc_begin);
    EXPECT_EQ(loaded.meta.doc_end, original.meta.doc_end);
    EXPECT_EQ(loaded.meta.stats.doc_count, 3000u);
    EXPECT_EQ(loaded.meta.stats.total_length, original.meta.stats.total_length);
    EXPECT_EQ(loaded.meta.analyzer_version, original.meta.analyzer_version);
    EXPECT_EQ(loaded.doc_lengths, original.doc_lengths);
    EXPECT_EQ(loaded.external_ids, original.external_ids);
    EXPECT_EQ(loaded.lexicon.size(), original.lexicon.size());
    // The lists' arena sized exactly (from the lexicon's words, before any list is read): no growth, no slack.
    EXPECT_EQ(loaded.postings.capacity(), loaded.postings.size());
    for (const auto& [term, info] : original.lexicon) {
      const TermInfo* other = loaded.find(term);
      ASSERT_NE(other, nullptr) << term;
      EXPECT_EQ(other->df, info.df);
      EXPECT_EQ(other->cf, info.cf);
      const auto tops = original.tops(info), loaded_tops = loaded.tops(*other);  // the best postings (TermInfo::tops)
      ASSERT_EQ(tops.size(), loaded_tops.size()) << term;
      for (size_t i = 0; i < tops.size(); ++i)
        ASSERT_TRUE(tops[i].doc == loaded_tops[i].doc && tops[i].freq == loaded_tops[i].freq) << term;
      const auto floors = original.rank_floors(info), loaded_floors = loaded.rank_floors(*other);  // TermInfo::ranks
      ASSERT_TRUE(std::equal(floors.begin(), floors.end(), loaded_floors.begin(), loaded_floors.end())) << term;
      const auto a = decode_posting_list(original.list(term, info));
      const auto b = decode_posting_list(loaded.list(term, *other));
      ASSERT_EQ(a.size(), b.size());
      for (size_t i = 0; i < a.size(); ++i) ASSERT_TRUE(a[i].doc == b[i].doc && a[i].freq == b[i].freq);
    }
    const auto record = partition->document(original.meta.doc_begin + 1);
    ASSERT_TRUE(record.has_value());
    EXPECT_EQ(record->title, "title " + std::to_string(original.meta.doc_begin + 1));
    EXPECT_EQ(record->url, "http://x/" + std::to_string(original.meta.doc_begin + 1));
    EXPECT_FALSE(partition->document(original.meta.doc_end).has_value());
  }
}

// Lists of 4,096 bytes and more end in blob files (the assembly compacts their file alone), the
// others stay rows of the LSM tree (their file is not compacted), and the partition reads back
// every list of both.
TEST(PartitionAssembly, LongListsGoToBlobFilesAndShortOnesStayRows) {
  const fs::path dir = fs::temp_directory_path() / ("warp-blobs-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  std::mt19937_64 rng(testing::test_seed());
  BuildOptions options;
  IndexBuilder builder(options);
  for (uint32_t doc = 0; doc < 30000; ++doc) {  // three long lists, 30,000 short ones
    std::vector<std::string> terms = {"unique" + std::to_string(doc), "every", "even" + std::to_string(doc % 2)};
    for (uint64_t r = rng() % 30; r > 0; --r) terms.push_back("every");  // frequencies 1-30
    for (uint64_t r = rng() % 30; r > 0; --r) terms.push_back(terms[2]);
    builder.add_analyzed({"d" + std::to_string(doc), "", "", 0}, terms);
  }
  const std::vector<BuiltPartition> built = builder.build();
  write_index(built, dir.string());
  const IndexView& original = built[0].view;
  uint64_t long_bytes = 0, short_bytes = 0;
  for (const auto& [term, info] : original.lexicon)
    (info.words * 4 >= 4096 ? long_bytes : short_bytes) += info.words * 4;
  ASSERT_GT(long_bytes, 3 * 4096u);
  ASSERT_GT(short_bytes, 100'000u);
  uint64_t blob_bytes = 0;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    if (entry.path().extension() == ".blob") blob_bytes += entry.file_size();
  }
  EXPECT_GE(blob_bytes, long_bytes);
  EXPECT_LT(blob_bytes, long_bytes + short_bytes / 2);
  const auto partition = open_partition((dir / partition_dir_name(0)).string());
  const IndexView& loaded = partition->view();
  ASSERT_EQ(loaded.lexicon.size(), original.lexicon.size());
  for (const auto& [term, info] : original.lexicon) {
    const TermInfo* other = loaded.find(term);
    ASSERT_NE(other, nullptr) << term;
    ASSERT_EQ(other->words, info.words) << term;
    ASSERT_TRUE(std::equal(loaded.postings.begin() + other->offset,
                           loaded.postings.begin() + other->offset + other->words,
                           original.postings.begin() + info.offset))
        << term;
  }
  fs::remove_all(dir);
}

TEST_F(PartitionStoreTest, IndexDirectorySearchesLikeTheReference) {
  IndexSearcher searcher(open_index(dir_.string()));
  EXPECT_EQ(searcher.partitions().size(), 3u);
  for (const auto& query : synthetic::generate_queries(200, 2000, 4, testing::test_seed())) {
    for (QueryMode mode : {QueryMode::kAnd, QueryMode::kOr, QueryMode::kAndOr}) {
      ASSERT_TRUE(testing::same_topk(reference_.search(query, mode, 20), searcher.search({query, mode, 20}).hits,
                                     reference_, query));
    }
  }
  EXPECT_EQ(searcher.external_id(2999), "doc-2999");
}

// k1 and b other than the index's: the block maxima and the rank floors are computed again for
// them (stale floors of the index's k1 1.2 would be above these scores), and OR top-k for k from 10
// to 1000 equals the reference's.
TEST_F(PartitionStoreTest, OtherBm25ParametersRescoreTheBounds) {
  const Bm25Params params{0.6f, 0.9f};
  testing::BruteForceIndex reference(params);
  synthetic::CollectionParams collection;
  collection.documents = 3000;
  collection.vocabulary = 2000;
  collection.mean_length = 40;
  collection.seed = testing::test_seed();
  synthetic::generate_collection(collection, [&](const std::vector<std::string>& terms) { reference.add(terms); });
  OpenOptions options;
  options.bm25 = {params.k1, params.b, params.k3};
  IndexSearcher searcher(open_index(dir_.string(), options));
  for (const auto& query : synthetic::generate_queries(200, 2000, 4, testing::test_seed() + 1)) {
    for (size_t k : {10, 100, 1000}) {
      ASSERT_TRUE(testing::same_topk(reference.search(query, QueryMode::kOr, k),
                                     searcher.search({query, QueryMode::kOr, k}).hits, reference, query))
          << "k " << k;
    }
  }
  const auto partition = open_partition(part(1), options);
  const IndexView& view = partition->view();
  size_t with = 0;
  std::vector<Score> scores, floors;
  for (const auto& [term, info] : view.lexicon) {
    const float weight = bm25_term_weight(bm25_idf(info.df, view.meta.stats.doc_count), params);
    scores.clear();
    for (const Posting& p : decode_posting_list(view.list(term, info))) {
      scores.push_back(bm25_score(weight, p.freq, view.length_norms[p.doc - view.meta.doc_begin]));
    }
    const PostingListView list = view.list(term, info);
    compute_rank_floors(scores, {list.block_max_score, list.block_count}, list.codec->block_size(), floors);
    const auto stored = view.rank_floors(info);
    ASSERT_TRUE(std::equal(floors.begin(), floors.end(), stored.begin(), stored.end())) << term;
    with += !floors.empty();
  }
  EXPECT_GT(with, 20u);
}

TEST_F(PartitionStoreTest, QueryTermSaturationIsStoredAndCanBeOverridden) {
  const auto stored = [&](const OpenOptions& options) { return open_partition(part(1), options)->view().meta.bm25; };
  EXPECT_TRUE(std::isinf(stored({}).k3)) << "the default, linear query-term frequency, written and read back";
  OpenOptions options;
  options.bm25.k3 = 0;
  const Bm25Params overridden = stored(options);
  EXPECT_EQ(overridden.k3, 0.0f);
  EXPECT_EQ(overridden.k1, Bm25Params{}.k1);  // k1 and b stay the index's
  EXPECT_EQ(overridden.b, Bm25Params{}.b);
  IndexSearcher searcher(open_index(dir_.string(), options));  // repeats now count once
  const std::vector<std::string> repeated{"t1", "t1", "t2"}, once{"t1", "t2"};
  EXPECT_TRUE(testing::identical_hits(searcher.search({once, QueryMode::kOr, 10}).hits,
                                      searcher.search({repeated, QueryMode::kOr, 10}).hits));
  EXPECT_THROW(check_bm25_params({1.2f, 0.75f, -1.0f}), Error);
  EXPECT_THROW(check_bm25_params({1.2f, 1.5f, 1.0f}), Error);
}

TEST_F(PartitionStoreTest, RefusesAnotherAnalyzer) {
  OpenOptions options;
  options.expected_analyzer = "warp-analyzer/1 fold=latin-greek-cyrillic stem=none stop=english max=64";
  try {
    open_partition(part(0), options);
    FAIL() << "a partition of another analyzer was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("analyzed with"), std::string::npos) << e.what();
  }
}

// Changes one value inside the partition through RocksDB itself (a valid database, wrong content).
void put_raw(const std::string& dir, const std::string& family, const std::string& key, const std::string& value) {
  std::vector<rocksdb::ColumnFamilyDescriptor> families;
  for (const char* name : {"default", "meta", "lexicon", "postings", "documents", "stored", "positions"})
    families.emplace_back(name, rocksdb::ColumnFamilyOptions());
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* db = nullptr;
  ASSERT_TRUE(rocksdb::DB::Open(rocksdb::DBOptions(), dir, families, &handles, &db).ok());
  const std::vector<std::string> names = {"default", "meta", "lexicon", "postings", "documents", "stored", "positions"};
  const size_t index = std::find(names.begin(), names.end(), family) - names.begin();
  ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), handles[index], key, value).ok());
  ASSERT_TRUE(db->Flush(rocksdb::FlushOptions(), handles).ok());
  for (auto* handle : handles) db->DestroyColumnFamilyHandle(handle);
  delete db;
  seal_partition(dir);  // self-consistent files with the wrong content: the deeper checks must catch it
}

// XORs the byte at `at` of `file` with `mask` (twice: restored).
void flip_bits(const fs::path& file, std::streamoff at, char mask) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  char c = 0;
  f.seekg(at);
  f.get(c);
  f.seekp(at);
  f.put(static_cast<char>(c ^ mask));
}

// A term's lexicon row as SstRows::put_term writes it (its list's CRC from the view), with the
// best postings given and, where `floors` is given, its rank floors' count and floors (none written
// if it is null): put over the partition's own to damage it.
std::string lexicon_row(const IndexView& view, const TermInfo& info, std::span<const Posting> tops,
                        const std::vector<Score>* floors = nullptr) {
  ByteWriter entry;
  entry.u32(info.df);
  entry.u64(info.cf);
  entry.u32(info.words);
  entry.u32(crc32_of(view.postings.data() + info.offset, size_t{info.words} * 4));
  entry.u8(static_cast<uint8_t>(tops.size()));
  for (const Posting& top : tops) entry.u32(top.doc), entry.u32(top.freq);
  if (floors != nullptr) {
    entry.u8(static_cast<uint8_t>(floors->size()));
    for (const Score floor : *floors) entry.u32(std::bit_cast<uint32_t>(floor));
  }
  return entry.take();
}

void expect_refused(const std::string& dir, const std::string& needle) {
  try {
    open_partition(dir);
    FAIL() << "a bad partition was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(dir), std::string::npos) << "the error names the partition: " << e.what();
  }
}

// A term's best postings (TermInfo::tops) are its list's best by BM25 alone, best first; a term
// with fewer postings in the partition has none.
TEST_F(PartitionStoreTest, TheBestPostingsAreTheListsBest) {
  const IndexView& view = built_[0].view;
  size_t with = 0;
  for (const auto& [term, info] : view.lexicon) {
    const auto list = decode_posting_list(view.list(term, info));
    const auto tops = view.tops(info);
    if (list.size() < kTermTops) {
      EXPECT_TRUE(tops.empty()) << term;
      continue;
    }
    ASSERT_EQ(tops.size(), kTermTops) << term;
    ++with;
    const float weight = bm25_term_weight(bm25_idf(info.df, view.meta.stats.doc_count), view.meta.bm25);
    const auto score = [&](const Posting& p) {
      return bm25_score(weight, p.freq, view.length_norms[p.doc - view.meta.doc_begin]);
    };
    std::vector<Score> all;
    for (const Posting& p : list) all.push_back(score(p));
    std::sort(all.begin(), all.end(), std::greater<Score>());
    for (size_t i = 0; i < kTermTops; ++i) EXPECT_EQ(score(tops[i]), all[i]) << term << " rank " << i;
  }
  EXPECT_GT(with, 100u);
}

// A partition written before the best postings were stored (format version 1, lexicon rows of four
// fields) opens, without them, and searches as before; a best posting outside the partition is refused.
TEST_F(PartitionStoreTest, RowsWithoutBestPostingsOpenAndDamagedOnesAreRefused) {
  BuiltPartition older = built_[1];
  older.view.meta.format_version = 1;
  for (auto& [term, info] : older.view.lexicon) info.tops = kNoTermTops, info.rank_count = 0;
  older.view.term_tops.clear();
  older.view.term_rank_floors.clear();
  const std::string old_dir = (dir_ / "older").string();
  write_partition(older, old_dir);
  {
    auto partition = open_partition(old_dir);
    EXPECT_EQ(partition->view().meta.format_version, 1u);
    EXPECT_TRUE(partition->view().term_tops.empty());
    EXPECT_TRUE(partition->view().term_rank_floors.empty());
    const CpuQueryProcessor on_old(partition->view()), on_new(built_[1].view);
    for (const auto& query : synthetic::generate_queries(100, 2000, 4, testing::test_seed() + 5)) {
      for (size_t k : {10, 100}) {
        ASSERT_TRUE(testing::identical_hits(on_new.search({query, QueryMode::kOr, k}).hits,
                                            on_old.search({query, QueryMode::kOr, k}).hits));
      }
    }
  }
  // A row whose best posting names a document of another partition.
  const IndexView& view = built_[2].view;
  const auto with_tops = std::find_if(view.lexicon.begin(), view.lexicon.end(),
                                      [](const auto& e) { return e.second.tops != kNoTermTops; });
  ASSERT_NE(with_tops, view.lexicon.end());
  std::vector<Posting> tops(view.tops(with_tops->second).begin(), view.tops(with_tops->second).end());
  tops[3].doc = view.meta.doc_end + 5;
  put_raw(part(2), "lexicon", with_tops->first, lexicon_row(view, with_tops->second, tops));
  expect_refused(part(2), "a best posting outside the partition");
}

// Rank floors that are not what the encoder writes are refused: too many, none, one above the one
// before, negative, infinite, cut short, or in a partition of format version 1.
TEST_F(PartitionStoreTest, DamagedRankFloorsAreRefused) {
  const IndexView& view = built_[2].view;
  const auto with_floors =
      std::find_if(view.lexicon.begin(), view.lexicon.end(), [](const auto& e) { return e.second.rank_count >= 2; });
  ASSERT_NE(with_floors, view.lexicon.end());
  const TermInfo& info = with_floors->second;
  const auto row = [&](const std::vector<Score>& floors, size_t cut) {
    const std::string value = lexicon_row(view, info, view.tops(info), &floors);
    return value.substr(0, value.size() - cut);
  };
  const std::vector<Score> good(view.rank_floors(info).begin(), view.rank_floors(info).end());
  std::vector<std::pair<std::string, std::string>> cases;
  cases.push_back({"seven floors", row(std::vector<Score>(kRankFloors.size() + 1, 1.0f), 0)});
  cases.push_back({"none", row({}, 0)});
  cases.push_back({"rising", row({good[1], good[0] + 1}, 0)});
  cases.push_back({"negative", row({good[0], -1.0f}, 0)});
  cases.push_back({"infinite", row({std::numeric_limits<Score>::infinity(), good[1]}, 0)});
  cases.push_back({"cut short", row(good, 2)});
  for (const auto& [what, value] : cases) {
    SCOPED_TRACE(what);
    fs::remove_all(dir_);
    write_index(built_, dir_.string());
    put_raw(part(2), "lexicon", with_floors->first, value);
    expect_refused(part(2), "its rank floors");
  }
  // Floors for more ranks than a term's list has postings (a term of fewer than 1,000 there).
  const auto short_list = std::find_if(view.lexicon.begin(), view.lexicon.end(), [](const auto& e) {
    return e.second.rank_count > 0 && e.second.rank_count < kRankFloors.size();
  });
  ASSERT_NE(short_list, view.lexicon.end());
  fs::remove_all(dir_);
  write_index(built_, dir_.string());
  const std::vector<Score> six(kRankFloors.size(), 1.0f);
  put_raw(part(2), "lexicon", short_list->first,
          lexicon_row(view, short_list->second, view.tops(short_list->second), &six));
  expect_refused(part(2), "more ranks than its list has postings");
  // The same row, well formed, in a partition that says it is of format version 1.
  fs::remove_all(dir_);
  write_index(built_, dir_.string());
  put_raw(part(2), "lexicon", with_floors->first, row(good, 0));
  put_raw(part(2), "meta", "format_version", "1");
  expect_refused(part(2), "its rank floors");
}

TEST_F(PartitionStoreTest, RefusesANewerFormatVersion) {
  put_raw(part(0), "meta", "format_version", "99");
  expect_refused(part(0), "format version 99, this build reads versions 1 to 2; upgrade this service");
}

TEST_F(PartitionStoreTest, RefusesChangedContent) {
  put_raw(part(1), "documents", std::string("\0\0\x10\0", 4), "x");
  expect_refused(part(1), "checksum");
}

TEST_F(PartitionStoreTest, RefusesAChangedPostingList) {
  const std::string term = built_[2].view.lexicon.begin()->first;
  const TermInfo& info = built_[2].view.lexicon.begin()->second;
  std::string blob(reinterpret_cast<const char*>(built_[2].view.postings.data() + info.offset), info.words * 4);
  blob[blob.size() / 2] ^= 0x40;
  put_raw(part(2), "postings", term, blob);
  expect_refused(part(2), "checksum mismatch in the posting list");
}

TEST_F(PartitionStoreTest, RefusesCorruptOrTruncatedFiles) {
  std::mt19937_64 rng(testing::test_seed());
  for (int id = 0; id < 3; ++id) {
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(part(id))) {
      const auto ext = entry.path().extension();
      if (ext == ".sst" || ext == ".blob") files.push_back(entry.path());
    }
    ASSERT_FALSE(files.empty());
    std::sort(files.begin(), files.end());
    const fs::path victim = files[std::uniform_int_distribution<size_t>(0, files.size() - 1)(rng)];
    const auto size = fs::file_size(victim);
    if (id == 0) {
      fs::resize_file(victim, size / 2);  // truncated
    } else {
      std::fstream f(victim, std::ios::in | std::ios::out | std::ios::binary);  // bytes flipped in the middle
      for (uint64_t at = size / 4; at < size * 3 / 4; at += 64) {
        f.seekg(static_cast<std::streamoff>(at));
        char c = 0;
        f.get(c);
        f.seekp(static_cast<std::streamoff>(at));
        f.put(static_cast<char>(c ^ 0x5A));
      }
    }
    EXPECT_THROW(open_partition(part(id)), Error) << victim;
  }
}

// One byte changed in any file of the database (RocksDB's own MANIFEST, CURRENT and OPTIONS
// included) is refused by the file checksums, naming the file, before RocksDB parses it: some
// damage made RocksDB's parsers assert and abort the process (found by fuzz_partition_open).
TEST_F(PartitionStoreTest, RefusesAnyChangedFileBeforeRocksDbReadsIt) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(part(0))) {
    const std::string name = entry.path().filename().string();
    if (name != "LOCK" && name.rfind("LOG", 0) != 0 && name != "WARP-CHECKSUMS") names.push_back(name);
  }
  ASSERT_GE(names.size(), 5u);
  for (const std::string& name : names) {
    const fs::path file = fs::path(part(0)) / name;
    const uintmax_t size = fs::file_size(file);
    if (size == 0) continue;
    const auto at = static_cast<std::streamoff>(size / 2);
    flip_bits(file, at, 0x01);
    expect_refused(part(0), "checksum mismatch in file " + name);
    flip_bits(file, at, 0x01);  // restored: opens again
    EXPECT_NO_THROW(open_partition(part(0)));
  }
  // The list itself: cut short (an entry and the end line gone), or a file it does not name.
  const fs::path list = fs::path(part(0)) / "WARP-CHECKSUMS";
  std::ifstream in(list);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  in.close();
  ASSERT_GE(lines.size(), 3u);
  std::ofstream(list, std::ios::trunc) << lines[0] << "\n" << lines[1] << "\n";
  expect_refused(part(0), "WARP-CHECKSUMS is damaged");
  {
    std::ofstream out(list, std::ios::trunc);
    for (const std::string& line : lines) out << line << "\n";
  }
  EXPECT_NO_THROW(open_partition(part(0)));
  std::ofstream(fs::path(part(0)) / "000999.sst") << "stray";
  expect_refused(part(0), "file 000999.sst is not in WARP-CHECKSUMS");
  fs::remove(fs::path(part(0)) / "000999.sst");
  fs::remove(list);
  expect_refused(part(0), "no WARP-CHECKSUMS");
}

// A list_words that cannot be right changes nothing: the row sized the arena of readers before the
// lexicon's two-pass load, which sizes it from the lexicon's own words.
TEST_F(PartitionStoreTest, AWrongListWordsRowChangesNothing) {
  const IndexView& original = built_[0].view;
  for (const char* words : {"0", "12", "99999999999999"}) {
    put_raw(part(0), "meta", "list_words", words);
    auto partition = open_partition(part(0));
    const IndexView& loaded = partition->view();
    ASSERT_EQ(loaded.lexicon.size(), original.lexicon.size());
    for (const auto& [term, info] : original.lexicon) {
      const TermInfo* other = loaded.find(term);
      ASSERT_NE(other, nullptr) << term;
      ASSERT_EQ(decode_posting_list(loaded.list(term, *other)).size(),
                decode_posting_list(original.list(term, info)).size())
          << words;
    }
  }
}

// open_index opens the partitions side by side: a damaged one among them is still refused by name,
// whichever finishes first, and nothing half-open is returned.
TEST_F(PartitionStoreTest, ADamagedPartitionAmongSeveralIsRefusedByName) {
  fs::path sst;
  for (const auto& entry : fs::directory_iterator(part(1))) {
    if (entry.path().extension() == ".sst" && fs::file_size(entry.path()) > 0) sst = entry.path();
  }
  ASSERT_FALSE(sst.empty());
  flip_bits(sst, static_cast<std::streamoff>(fs::file_size(sst) / 2), 0x10);
  for (int round = 0; round < 5; ++round) {
    try {
      open_index(dir_.string());
      FAIL() << "a damaged partition was opened";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("part-0001"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("checksum mismatch in file " + sst.filename().string()), std::string::npos)
          << e.what();
    }
  }
  OpenOptions others;
  others.partitions = {0, 2};
  EXPECT_EQ(open_index(dir_.string(), others).size(), 2u);  // the others alone open
}

TEST_F(PartitionStoreTest, RefusesMissingPiecesAndForeignDirectories) {
  EXPECT_THROW(open_partition((dir_ / "nope").string()), Error);
  EXPECT_THROW(open_index(fs::temp_directory_path().string()), Error);
  fs::remove_all(part(1));
  EXPECT_THROW(open_index(dir_.string()), Error);
  EXPECT_THROW(write_index(built_, dir_.string()), Error);  // never overwrites
}

// A partition sealed again (as the builders seal theirs) lists all of its files but RocksDB's lock
// and info logs, the list unchanged, its syncs passing (that they reach the disk is not observable
// here); a file or directory that cannot be synced is an error naming it.
TEST_F(PartitionStoreTest, TheSealListsEveryFileOfThePartitionAndItsSyncsPass) {
  for (int id = 0; id < 3; ++id) {
    const fs::path list = fs::path(part(id)) / "WARP-CHECKSUMS";
    std::ifstream before_in(list);
    const std::string before((std::istreambuf_iterator<char>(before_in)), std::istreambuf_iterator<char>());
    size_t files = 0;
    for (const auto& entry : fs::directory_iterator(part(id))) {
      const std::string name = entry.path().filename().string();
      files += entry.is_regular_file() && name != "WARP-CHECKSUMS" && name != "LOCK" && name.rfind("LOG", 0) != 0;
    }
    EXPECT_GT(files, 3u) << part(id);
    EXPECT_EQ(seal_partition(part(id), 2), files) << part(id);
    std::ifstream after_in(list);
    const std::string after((std::istreambuf_iterator<char>(after_in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(after, before) << part(id);
    EXPECT_NO_THROW(open_partition(part(id)));
  }
  try {
    sync_directory((dir_ / "no-such-partition").string());
    ADD_FAILURE() << "no error for a missing directory";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no-such-partition"), std::string::npos) << e.what();
  }
  try {
    sync_file((dir_ / "no-such-file").string());
    ADD_FAILURE() << "no error for a missing file";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no-such-file"), std::string::npos) << e.what();
  }
}

// The build's file system defers syncs but passes every byte through: a file written, synced,
// closed, reopened (as an ingestion does to sync a moved file), appended to and synced again holds
// exactly what was written; a directory it opens syncs without error.
TEST(BuildFileSystem, SyncsAreDeferredButEveryByteIsWritten) {
  const fs::path dir = fs::temp_directory_path() / ("warp-build-fs-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::shared_ptr<rocksdb::FileSystem> files = build_env()->GetFileSystem();
  ASSERT_NE(files, nullptr);
  std::mt19937_64 rng(testing::test_seed());
  std::string expected;
  for (const std::string name : {"ingest-postings-0001.sst", "000012.blob"}) {  // consumed by a compaction, and kept
    const std::string path = (dir / name).string();
    expected.clear();
    std::unique_ptr<rocksdb::FSWritableFile> file;
    ASSERT_TRUE(files->NewWritableFile(path, rocksdb::FileOptions(), &file, nullptr).ok());
    for (int part = 0; part < 3; ++part) {
      std::string bytes(1 + rng() % 100'000, '\0');
      for (char& c : bytes) c = static_cast<char>(rng());
      ASSERT_TRUE(file->Append(bytes, rocksdb::IOOptions(), nullptr).ok());
      expected += bytes;
      ASSERT_TRUE(file->Sync(rocksdb::IOOptions(), nullptr).ok());
    }
    ASSERT_TRUE(file->Fsync(rocksdb::IOOptions(), nullptr).ok());
    ASSERT_TRUE(file->Close(rocksdb::IOOptions(), nullptr).ok());
    file.reset();
    ASSERT_TRUE(files->ReopenWritableFile(path, rocksdb::FileOptions(), &file, nullptr).ok());
    ASSERT_TRUE(file->Append("tail", rocksdb::IOOptions(), nullptr).ok());
    expected += "tail";
    ASSERT_TRUE(file->Sync(rocksdb::IOOptions(), nullptr).ok());
    ASSERT_TRUE(file->Close(rocksdb::IOOptions(), nullptr).ok());
    std::ifstream in(path, std::ios::binary);
    const std::string written((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(written.size(), expected.size()) << name;
    EXPECT_TRUE(written == expected) << name;
  }
  std::unique_ptr<rocksdb::FSDirectory> directory;
  ASSERT_TRUE(files->NewDirectory(dir.string(), rocksdb::IOOptions(), &directory, nullptr).ok());
  EXPECT_TRUE(directory->Fsync(rocksdb::IOOptions(), nullptr).ok());
  EXPECT_NO_THROW(sync_directory(dir.string()));
  fs::remove_all(dir);
}

// A range whose file (of short lists, or of long ones) cannot be moved in fails the assembly with
// the partition's name, whether the move runs on the caller (no movers) or on the assembly's movers
// (reported by a later add_terms or by finish), and the ranges queued after it neither hang nor
// hide the error.
TEST(PartitionAssembly, AFailedMoveIsReportedWithThePartition) {
  for (const bool long_lists : {false, true}) {
    for (const size_t movers : {0, 1, 3}) {
      const fs::path dir = fs::temp_directory_path() / ("warp-assembly-" + std::to_string(::getpid()) + "-" +
                                                        std::to_string(long_lists) + std::to_string(movers));
      fs::remove_all(dir);
      fs::create_directories(dir);
      SstRows::Done missing;
      if (long_lists) {
        missing.long_path = (dir / "no-such-range.sst-long").string();
        missing.long_first_key = "a", missing.long_last_key = "b";
      } else {
        missing.path = (dir / "no-such-range.sst").string();
      }
      try {
        PartitionAssembly assembly(dir.string(), movers);
        for (int range = 0; range < 4; ++range) assembly.add_terms({}, missing);
        assembly.finish(PartitionMeta{}, 0, {}, {}, {});
        ADD_FAILURE() << "no error with " << movers << " movers" << (long_lists ? ", long lists' file" : "");
      } catch (const Error& e) {
        const std::string message = e.what();
        EXPECT_NE(message.find("partition " + dir.string()), std::string::npos) << message;
        EXPECT_NE(message.find("ingesting a term range"), std::string::npos) << message;
      }
      fs::remove_all(dir);
    }
  }
}

}  // namespace
}  // namespace warp
