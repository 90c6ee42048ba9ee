// What each acknowledged write says it did (indexer/writes/live_ids.hpp): created or replaced for a
// put, deleted or not_found for a delete, against a plain set of the ids the writes leave. Random
// ops each run (seed printed): over a generation, recovered from the log at a restart, across folds
// into new generations (the writes they hold dropped), and across a generation built from other
// inputs (whose ids replace the old ones).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <future>
#include <random>
#include <set>

#include "common/index/index_builder.hpp"
#include "common/index/index_files.hpp"
#include "indexer/writes/live_ids.hpp"
#include "tests/support/test_seed.hpp"

namespace warp::writes {
namespace {
namespace fs = std::filesystem;

void write_generation(const std::set<std::string>& ids, uint64_t generation, const fs::path& dir) {
  BuildOptions options;
  options.partitions = 2, options.generation = generation;
  IndexBuilder builder(options);
  for (const std::string& id : ids) builder.add_document({id, "", "text of " + id, ""});
  write_index(builder.build(), dir.string());
}

struct Fixture {
  fs::path dir = fs::temp_directory_path() / ("warp-write-results-" + std::to_string(::getpid()));
  std::mt19937_64 rng{testing::test_seed()};
  std::set<std::string> truth;  // the ids the writes leave
  uint64_t sequence = 0;
  Fixture() { fs::create_directories(dir); }
  ~Fixture() { fs::remove_all(dir); }

  std::vector<WriteOp> random_ops(size_t n) {
    std::vector<WriteOp> ops;
    for (size_t i = 0; i < n; ++i) {
      const std::string id = "d" + std::to_string(std::uniform_int_distribution<int>(0, 60)(rng));
      const bool put = std::uniform_int_distribution<int>(0, 2)(rng) > 0;
      ops.push_back({put ? WriteOp::Kind::kPut : WriteOp::Kind::kDelete, id, put ? "{\"body\":\"x\"}" : ""});
    }
    return ops;
  }
  // Appends `ops` to `log` (durable) and checks what `ids` says each did against the truth.
  void write_and_check(WriteLog& log, LiveIds& ids, const std::vector<WriteOp>& ops) {
    std::promise<uint64_t> done;
    log.append(ops, [&](uint64_t last, const std::string& error) {
      EXPECT_EQ(error, "");
      done.set_value(last);
    });
    const uint64_t last = done.get_future().get();
    ASSERT_EQ(last, sequence + ops.size());
    const std::vector<WriteResult> results = ids.apply(sequence + 1, ops);
    ASSERT_EQ(results.size(), ops.size());
    for (size_t i = 0; i < ops.size(); ++i) {
      const bool held = truth.contains(ops[i].id), put = ops[i].kind == WriteOp::Kind::kPut;
      const WriteResult expected = put ? (held ? WriteResult::kReplaced : WriteResult::kCreated)
                                       : (held ? WriteResult::kDeleted : WriteResult::kNotFound);
      ASSERT_EQ(write_result_name(results[i]), std::string(write_result_name(expected)))
          << "write " << sequence + 1 + i << " of id " << ops[i].id;
      if (put)
        truth.insert(ops[i].id);
      else
        truth.erase(ops[i].id);
    }
    sequence = last;
    ASSERT_EQ(ids.size(), truth.size());
  }
};

TEST(WriteResults, EveryWriteSaysWhatItDidAcrossRestartsAndFolds) {
  Fixture f;
  for (int i = 0; i < 30; ++i) f.truth.insert("d" + std::to_string(i * 2));  // the inputs: even ids
  write_generation(f.truth, 1, f.dir / "gen-1");
  const std::string log_path = (f.dir / "writes.log").string();
  {
    WriteLog log(log_path);
    LiveIds ids((f.dir / "gen-1").string(), 0, log);
    ASSERT_EQ(ids.size(), 30u);
    for (int batch = 0; batch < 10; ++batch) f.write_and_check(log, ids, f.random_ops(1 + batch * 3));
  }
  // A restart: the generation and the whole log again.
  WriteLog log(log_path);
  auto ids = std::make_unique<LiveIds>((f.dir / "gen-1").string(), 0, log);
  ASSERT_EQ(ids->size(), f.truth.size()) << "recovered from the log";
  f.write_and_check(log, *ids, f.random_ops(20));
  // A fold: a generation holding the writes so far; writes after it go on being told right.
  const uint64_t folded = f.sequence;
  write_generation(f.truth, 2, f.dir / "gen-2");
  f.write_and_check(log, *ids, f.random_ops(15));  // between the build and its publication
  ids->published((f.dir / "gen-2").string(), folded, /*inputs_changed=*/false);  // derived, not read
  ASSERT_EQ(ids->size(), f.truth.size()) << "after the fold";
  for (int batch = 0; batch < 5; ++batch) f.write_and_check(log, *ids, f.random_ops(10));
  // A restart over the new generation.
  ids = std::make_unique<LiveIds>((f.dir / "gen-2").string(), folded, log);
  ASSERT_EQ(ids->size(), f.truth.size()) << "recovered over generation 2";
  f.write_and_check(log, *ids, f.random_ops(25));
  // The inputs changed: a generation holding ids no write named (e*) beside the writes' documents;
  // from then on the truth is what it holds.
  std::set<std::string> expected = f.truth;
  for (int i = 0; i < 20; ++i) expected.insert("e" + std::to_string(i));
  write_generation(expected, 3, f.dir / "gen-3");
  ids->published((f.dir / "gen-3").string(), f.sequence, /*inputs_changed=*/true);
  f.truth = expected;
  ASSERT_EQ(ids->size(), f.truth.size()) << "after a generation of other inputs";
  std::vector<WriteOp> touch_inputs = {
      {WriteOp::Kind::kPut, "e3", "{}"}, {WriteOp::Kind::kDelete, "e4", ""}, {WriteOp::Kind::kDelete, "e4", ""}};
  f.write_and_check(log, *ids, touch_inputs);
}

}  // namespace
}  // namespace warp::writes
