#include "indexer/pipeline/parallel_builder.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "common/util/bounded_queue.hpp"
#include "common/util/status.hpp"
#include "indexer/pipeline/term_btree.hpp"
#include "indexer/pipeline/trie_collections.hpp"

namespace warp::pipeline {
namespace {

struct Batch {
  DocId first_doc = 0;
  std::vector<SourceDocument> documents;
};

// One parser's terms for one indexer: postings with their term's collection and suffix.
struct Piece {
  std::string suffixes;  // concatenated
  struct Entry {
    uint32_t collection, suffix_offset, suffix_size;
    Posting posting;
  };
  std::vector<Entry> entries;
};

struct DocStats {
  DocId doc;
  uint32_t length, distinct;
};

std::string collection_prefix(uint32_t collection) {
  if (collection >= 17576) return {};
  return {static_cast<char>('a' + collection / 676), static_cast<char>('a' + collection / 26 % 26),
          static_cast<char>('a' + collection % 26)};
}

// A CPU indexer: dictionary B-trees of its collections, postings by term id, run files.
class IndexerThread {
 public:
  IndexerThread(size_t index, uint64_t memory_share, std::string spill_dir, std::atomic<uint64_t>& runs_written)
      : index_(index), memory_share_(memory_share), spill_dir_(std::move(spill_dir)), runs_written_(runs_written) {}

  void consume(const Piece& piece) {
    for (const Piece::Entry& e : piece.entries) {
      const uint32_t id = forest_.find_or_insert(e.collection, std::string_view(piece.suffixes).substr(e.suffix_offset, e.suffix_size));
      if (id == postings_.size()) {
        postings_.emplace_back();
        collection_of_.push_back(e.collection);
      }
      postings_[id].push_back(e.posting);
    }
    held_ += piece.entries.size();
    if (held_ * sizeof(Posting) > memory_share_) spill();
  }

  // Run file: [term id][count][count postings]... for every term holding postings now.
  void spill() {
    std::filesystem::create_directories(spill_dir_);
    const std::string path = spill_dir_ + "/run-" + std::to_string(index_) + "-" + std::to_string(runs_.size());
    std::ofstream out(path, std::ios::binary);
    for (uint32_t id = 0; id < postings_.size(); ++id) {
      std::vector<Posting>& list = postings_[id];
      if (list.empty()) continue;
      const uint32_t header[2] = {id, static_cast<uint32_t>(list.size())};
      out.write(reinterpret_cast<const char*>(header), sizeof header);
      out.write(reinterpret_cast<const char*>(list.data()), static_cast<std::streamsize>(list.size() * sizeof(Posting)));
      std::vector<Posting>().swap(list);
    }
    if (!out.flush()) throw Error("cannot write run file " + path + " (disk full?)");
    runs_.push_back(path);
    held_ = 0;
    ++runs_written_;
  }

  // Reads the runs back into memory and sorts every list by docID; returns the runs merged.
  uint64_t merge_runs() {
    for (const std::string& path : runs_) {
      std::ifstream in(path, std::ios::binary);
      uint32_t header[2];
      while (in.read(reinterpret_cast<char*>(header), sizeof header)) {
        std::vector<Posting>& list = postings_[header[0]];
        const size_t at = list.size();
        list.resize(at + header[1]);
        if (!in.read(reinterpret_cast<char*>(list.data() + at), static_cast<std::streamsize>(header[1] * sizeof(Posting)))) {
          throw Error("run file " + path + " is truncated");
        }
      }
      std::filesystem::remove(path);
    }
    for (auto& list : postings_) {
      std::sort(list.begin(), list.end(), [](const Posting& a, const Posting& b) { return a.doc < b.doc; });
    }
    return runs_.size();
  }

  size_t term_count() const { return postings_.size(); }
  std::string term(uint32_t id) const { return collection_prefix(collection_of_[id]) + forest_.suffix(id); }
  std::vector<Posting>& postings(uint32_t id) { return postings_[id]; }

 private:
  size_t index_;
  uint64_t memory_share_;
  std::string spill_dir_;
  std::atomic<uint64_t>& runs_written_;
  TermForest forest_;
  std::vector<std::vector<Posting>> postings_;
  std::vector<uint32_t> collection_of_;
  std::vector<std::string> runs_;
  uint64_t held_ = 0;
};

// Collections to indexers by sampled token counts, heaviest first onto the lightest indexer.
std::vector<uint32_t> assign_collections(const std::vector<uint64_t>& tokens, size_t indexers) {
  std::vector<uint32_t> owner(kTrieCollections);
  for (uint32_t c = 0; c < kTrieCollections; ++c) owner[c] = c % indexers;  // unseen collections
  std::vector<uint32_t> order(kTrieCollections);
  for (uint32_t c = 0; c < kTrieCollections; ++c) order[c] = c;
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return tokens[a] > tokens[b]; });
  std::vector<uint64_t> load(indexers, 0);
  for (uint32_t c : order) {
    if (tokens[c] == 0) break;
    const size_t lightest = std::min_element(load.begin(), load.end()) - load.begin();
    owner[c] = static_cast<uint32_t>(lightest);
    load[lightest] += tokens[c];
  }
  return owner;
}

}  // namespace

std::vector<BuiltPartition> build_with_pipeline(DocumentStream& input, const PipelineOptions& options,
                                                PipelineReport& report,
                                                const std::function<void(const PipelineProgress&)>& on_progress) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const size_t cores = std::max(1u, std::thread::hardware_concurrency());
  const size_t parsers = options.parsers ? options.parsers : cores;
  const size_t indexers = options.indexers ? options.indexers : std::max<size_t>(1, cores / 2);
  report.parsers = parsers, report.indexers = indexers;
  codec_by_name(options.build.codec);  // fail before reading on an unknown codec
  const std::string spill_dir = options.spill_dir.empty()
      ? (std::filesystem::temp_directory_path() / ("warp-runs-" + std::to_string(::getpid()))).string()
      : options.spill_dir;

  // The first batch is read up front: it is the sample that assigns collections to indexers.
  std::vector<DocumentRecord> documents;
  std::unordered_map<std::string, DocId> doc_by_id;
  std::vector<bool> deleted;
  const auto read_batch = [&](Batch& batch) {
    batch.first_doc = static_cast<DocId>(documents.size());
    batch.documents.clear();
    SourceDocument doc;
    while (batch.documents.size() < options.batch_documents && input.next(doc)) {
      const DocId id = static_cast<DocId>(documents.size());
      auto [it, inserted] = doc_by_id.try_emplace(doc.external_id, id);
      if (!inserted) {  // the last one wins
        deleted[it->second] = true;
        ++input.report().replaced;
        it->second = id;
      }
      documents.push_back({doc.external_id, doc.title, doc.url, 0});
      deleted.push_back(false);
      batch.documents.push_back(std::move(doc));
    }
    return !batch.documents.empty();
  };
  Batch first;
  const bool any = read_batch(first);
  std::vector<uint64_t> sample_tokens(kTrieCollections, 0);
  {
    Analyzer analyzer(options.build.analyzer);
    std::vector<std::string> terms;
    for (const SourceDocument& doc : first.documents) {
      terms.clear();
      analyzer.analyze(doc.title, terms);
      analyzer.analyze(doc.body, terms);
      for (const std::string& term : terms) ++sample_tokens[trie_collection(term)];
    }
  }
  const std::vector<uint32_t> owner = assign_collections(sample_tokens, indexers);

  BoundedQueue<Batch> batches(options.queue_depth);
  std::vector<std::unique_ptr<BoundedQueue<Piece>>> pieces;
  std::atomic<uint64_t> runs_written{0};
  std::vector<std::unique_ptr<IndexerThread>> indexer_state;
  for (size_t i = 0; i < indexers; ++i) {
    pieces.push_back(std::make_unique<BoundedQueue<Piece>>(options.queue_depth * parsers));
    indexer_state.push_back(std::make_unique<IndexerThread>(i, options.memory_budget / indexers, spill_dir, runs_written));
  }
  std::mutex stats_mutex;
  std::vector<DocStats> doc_stats;
  std::exception_ptr failure;
  std::mutex failure_mutex;
  const auto record_failure = [&] {
    std::lock_guard<std::mutex> lock(failure_mutex);
    if (!failure) failure = std::current_exception();
  };

  std::vector<std::thread> parser_threads, indexer_threads;
  for (size_t i = 0; i < indexers; ++i) {
    indexer_threads.emplace_back([&, i] {
      try {
        while (auto piece = pieces[i]->pop()) indexer_state[i]->consume(*piece);
      } catch (...) {
        record_failure();
        while (pieces[i]->pop()) {  // keep draining so parsers never block forever
        }
      }
    });
  }
  for (size_t p = 0; p < parsers; ++p) {
    parser_threads.emplace_back([&] {
      Analyzer analyzer(options.build.analyzer);
      std::vector<std::string> terms;
      std::unordered_map<std::string_view, uint32_t> counts;
      try {
        while (auto batch = batches.pop()) {
          std::vector<Piece> out(indexers);
          std::vector<DocStats> stats;
          for (size_t d = 0; d < batch->documents.size(); ++d) {
            const SourceDocument& doc = batch->documents[d];
            const DocId id = batch->first_doc + static_cast<DocId>(d);
            terms.clear();
            analyzer.analyze(doc.title, terms);
            analyzer.analyze(doc.body, terms);
            counts.clear();
            for (const std::string& term : terms) ++counts[term];
            stats.push_back({id, static_cast<uint32_t>(terms.size()), static_cast<uint32_t>(counts.size())});
            for (const auto& [term, freq] : counts) {
              const uint32_t collection = trie_collection(term);
              const std::string_view suffix = trie_suffix(term, collection);
              Piece& piece = out[owner[collection]];
              piece.entries.push_back({collection, static_cast<uint32_t>(piece.suffixes.size()),
                                       static_cast<uint32_t>(suffix.size()), {id, freq}});
              piece.suffixes.append(suffix);
            }
          }
          {
            std::lock_guard<std::mutex> lock(stats_mutex);
            doc_stats.insert(doc_stats.end(), stats.begin(), stats.end());
          }
          for (size_t i = 0; i < indexers; ++i) {
            if (!out[i].entries.empty()) pieces[i]->push(std::move(out[i]));
          }
        }
      } catch (...) {
        record_failure();
        while (batches.pop()) {
        }
      }
    });
  }

  // The reader: this thread.
  auto last_progress = Clock::now();
  try {
    if (any) {
      batches.push(std::move(first));
      for (;;) {
        Batch batch;
        if (!read_batch(batch)) break;
        batches.push(std::move(batch));
        if (on_progress && Clock::now() - last_progress > std::chrono::seconds(1)) {
          on_progress({documents.size(), input.report().bytes, input.total_file_bytes(), runs_written.load()});
          last_progress = Clock::now();
        }
      }
    }
  } catch (...) {  // an unreadable input: stop the workers cleanly, then report it
    record_failure();
  }
  batches.close();
  for (auto& t : parser_threads) t.join();
  for (auto& queue : pieces) queue->close();
  for (auto& t : indexer_threads) t.join();
  const auto parsed = Clock::now();
  report.parse_seconds = std::chrono::duration<double>(parsed - start).count();
  if (failure) {
    std::filesystem::remove_all(spill_dir);
    std::rethrow_exception(failure);
  }
  report.runs_written = runs_written;
  for (auto& indexer : indexer_state) report.runs_merged += indexer->merge_runs();
  std::filesystem::remove_all(spill_dir);

  // Replaced duplicates: drop them and renumber (monotone, so lists stay sorted).
  for (const DocStats& s : doc_stats) documents[s.doc].length = s.length;
  std::vector<DocId> new_id(documents.size());
  std::vector<DocumentRecord> kept;
  std::vector<uint32_t> distinct(documents.size());
  for (const DocStats& s : doc_stats) distinct[s.doc] = s.distinct;
  std::vector<uint32_t> kept_distinct;
  for (DocId d = 0; d < documents.size(); ++d) {
    new_id[d] = static_cast<DocId>(kept.size());
    if (deleted[d]) continue;
    kept.push_back(std::move(documents[d]));
    kept_distinct.push_back(distinct[d]);
  }
  const bool any_deleted = kept.size() != documents.size();
  for (auto& indexer : indexer_state) {
    for (uint32_t id = 0; id < indexer->term_count(); ++id) {
      std::vector<Posting>& list = indexer->postings(id);
      if (!any_deleted) continue;
      size_t out = 0;
      for (const Posting& p : list) {
        if (!deleted[p.doc]) list[out++] = {new_id[p.doc], p.freq};
      }
      list.resize(out);
    }
  }
  report.documents = kept.size();
  input.report().documents = kept.size();
  const auto merged = Clock::now();
  report.merge_seconds = std::chrono::duration<double>(merged - parsed).count();
  if (kept.empty()) return {};
  std::vector<BuiltPartition> partitions = build_partitions(options.build, kept, kept_distinct, [&](const TermVisitor& visit) {
    for (auto& indexer : indexer_state) {
      for (uint32_t id = 0; id < indexer->term_count(); ++id) {
        const std::vector<Posting>& list = indexer->postings(id);
        if (!list.empty()) visit(indexer->term(id), list);
      }
    }
  });
  report.encode_seconds = std::chrono::duration<double>(Clock::now() - merged).count();
  return partitions;
}

}  // namespace warp::pipeline
