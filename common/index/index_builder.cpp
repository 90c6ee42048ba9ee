#include "common/index/index_builder.hpp"

#include <algorithm>
#include <array>
#include <memory>

#include "common/index/stored_source.hpp"
#include "common/util/status.hpp"

namespace warp {

IndexBuilder::IndexBuilder(BuildOptions options) : options_(std::move(options)), analyzer_(options_.analyzer) {
  if (options_.partitions == 0) throw Error("the number of partitions must be at least 1");
  codec_by_name(options_.codec);  // fail early on an unknown codec
}

DocId IndexBuilder::add_document(const SourceDocument& document) {
  scratch_terms_.clear();
  analyzer_.analyze(document.title, scratch_terms_);
  analyzer_.analyze(document.body, scratch_terms_);
  return add_analyzed({document.external_id, document.title, document.url, 0,
                       options_.keeps_sources() ? stored_source(document) : std::string()},
                      scratch_terms_);
}

DocId IndexBuilder::add_analyzed(DocumentRecord record, std::span<const std::string> terms) {
  if (documents_.size() >= kEndDoc - 1) throw Error("a generation holds at most 2^32-2 documents");
  const DocId doc = static_cast<DocId>(documents_.size());
  std::unordered_map<uint32_t, uint32_t> counts;
  for (const std::string& term : terms) {
    auto [it, inserted] = term_ids_.try_emplace(term, static_cast<uint32_t>(terms_.size()));
    if (inserted) {
      terms_.push_back(term);
      postings_.emplace_back();
    }
    ++counts[it->second];
  }
  for (const auto& [term_id, freq] : counts) postings_[term_id].push_back({doc, freq});
  record.length = static_cast<uint32_t>(terms.size());
  documents_.push_back(std::move(record));
  distinct_terms_.push_back(static_cast<uint32_t>(counts.size()));
  return doc;
}

DocId IndexBuilder::add_counted(DocumentRecord record, std::span<const std::pair<std::string, uint32_t>> term_freqs) {
  if (documents_.size() >= kEndDoc - 1) throw Error("a generation holds at most 2^32-2 documents");
  const DocId doc = static_cast<DocId>(documents_.size());
  uint32_t distinct = 0;
  for (const auto& [term, freq] : term_freqs) {
    if (freq == 0) continue;
    auto [it, inserted] = term_ids_.try_emplace(term, static_cast<uint32_t>(terms_.size()));
    if (inserted) {
      terms_.push_back(term);
      postings_.emplace_back();
    }
    postings_[it->second].push_back({doc, freq});
    ++distinct;
  }
  documents_.push_back(std::move(record));
  distinct_terms_.push_back(distinct);
  return doc;
}

std::vector<DocId> balanced_boundaries(std::span<const uint32_t> weights, uint32_t parts) {
  uint64_t total = 0;
  for (uint32_t w : weights) total += w;
  std::vector<DocId> bounds{0};
  uint64_t running = 0;
  size_t doc = 0;
  for (uint32_t part = 1; part < parts; ++part) {
    const uint64_t target = total * part / parts;
    // Leave at least one document for each later partition when there are enough documents.
    const size_t limit = weights.size() > parts ? weights.size() - (parts - part) : weights.size();
    while (doc < limit && (running < target || doc < bounds.back() + 1)) running += weights[doc++];
    bounds.push_back(static_cast<DocId>(doc));
  }
  bounds.push_back(static_cast<DocId>(weights.size()));
  return bounds;
}

std::vector<BuiltPartition> IndexBuilder::build() const {
  return build_partitions(options_, documents_, distinct_terms_, [this](const TermVisitor& visit) {
    for (size_t term_id = 0; term_id < terms_.size(); ++term_id) visit(terms_[term_id], postings_[term_id]);
  });
}

PartitionMeta partition_meta(const BuildOptions& options, uint32_t partition, std::span<const DocId> bounds,
                             const CollectionStats& stats) {
  PartitionMeta meta;
  meta.analyzer_version = options.analyzer.version();
  meta.generation = options.generation;
  meta.partition_id = partition;
  meta.partition_count = options.partitions;
  meta.doc_begin = bounds[partition];
  meta.doc_end = bounds[partition + 1];
  meta.codec = std::string(codec_by_name(options.codec).name());
  meta.bm25 = options.bm25;
  meta.stats = stats;
  return meta;
}

std::vector<BuiltPartition> build_partitions(const BuildOptions& options, const std::vector<DocumentRecord>& documents,
                                             std::span<const uint32_t> distinct_terms,
                                             const ForEachTerm& for_each_term) {
  if (options.partitions == 0) throw Error("the number of partitions must be at least 1");
  codec_by_name(options.codec);  // throws on an unknown codec
  const std::vector<DocId> bounds = balanced_boundaries(distinct_terms, options.partitions);
  uint64_t total_length = 0;
  for (const DocumentRecord& record : documents) total_length += record.length;
  const CollectionStats stats{documents.size(), total_length};

  std::vector<BuiltPartition> partitions(options.partitions);
  std::vector<uint32_t> words;
  for (uint32_t p = 0; p < options.partitions; ++p) {
    BuiltPartition& part = partitions[p];
    IndexView& view = part.view;
    view.meta = partition_meta(options, p, bounds, stats);
    for (DocId doc = view.meta.doc_begin; doc < view.meta.doc_end; ++doc) {
      part.documents.push_back(documents[doc]);
      view.doc_lengths.push_back(documents[doc].length);
      view.external_ids.push_back(documents[doc].external_id);
    }
    view.compute_length_norms();
    if (!options.columns.empty()) {
      ColumnsBuilder columns(options.columns);
      for (const DocumentRecord& record : part.documents) columns.add(record.source);
      view.columns = std::make_shared<const DocColumns>(columns.build());
    }
    if (options.positions) {
      view.positions = positions_of_sources(options.analyzer, view.meta.doc_begin, view.doc_lengths, [&](DocId doc) {
        return std::string_view(part.documents[doc - view.meta.doc_begin].source);
      });
    }
    if (!options.store)  // kept for the columns or the positions alone
      for (DocumentRecord& record : part.documents) record.source.clear();

    PartitionEncoder encoder(view.meta, view.doc_lengths);
    TermBests bests;
    for_each_term([&](const std::string& term, std::span<const Posting> all) {
      TermInfo info;
      uint64_t postings = 0;
      if (!encoder.encode(all, info, words, postings, &bests)) return;
      keep_term_bests(view, info, bests);
      info.offset = view.postings.size();
      view.lexicon[term] = info;
      view.postings.insert(view.postings.end(), words.begin(), words.end());
      view.meta.posting_count += postings;
    });
    view.postings.resize(view.postings.size() + kReadPaddingWords, 0);
  }
  return partitions;
}

PartitionEncoder::PartitionEncoder(const PartitionMeta& meta, std::span<const uint32_t> doc_lengths)
    : meta_(meta), codec_(codec_by_name(meta.codec)) {
  const double average = meta.stats.average_length();
  length_norms_.resize(doc_lengths.size());
  for (size_t i = 0; i < doc_lengths.size(); ++i)
    length_norms_[i] = bm25_length_norm(doc_lengths[i], average, meta.bm25);
}

uint64_t PartitionEncoder::collection_frequency(std::span<const Posting> all) {
  uint64_t cf = 0;
  for (const Posting& posting : all) cf += posting.freq;
  return cf;
}

void best_postings(std::span<const Posting> slice, std::span<const Score> scores, std::vector<Posting>& tops) {
  tops.clear();
  if (slice.size() < kTermTops) return;
  // A min-heap of the best kTermTops (score, index) seen: the worst kept at its front; on the
  // stack (the back end calls this for every list of every partition). Within a slice, a smaller
  // index is a smaller docID.
  const auto better = [&](uint32_t a, uint32_t b) {
    return scores[a] > scores[b] || (scores[a] == scores[b] && a < b);
  };
  std::array<uint32_t, kTermTops> heap;
  for (uint32_t i = 0; i < kTermTops; ++i) heap[i] = i;
  std::make_heap(heap.begin(), heap.end(), better);
  for (uint32_t i = kTermTops; i < slice.size(); ++i) {
    if (!better(i, heap.front())) continue;
    std::pop_heap(heap.begin(), heap.end(), better);
    heap.back() = i;
    std::push_heap(heap.begin(), heap.end(), better);
  }
  std::sort_heap(heap.begin(), heap.end(), better);
  for (uint32_t i : heap) tops.push_back(slice[i]);
}

void select_term_bests(std::span<const Posting> slice, std::span<const Score> scores, std::span<const uint32_t> words,
                       TermBests& bests) {
  best_postings(slice, scores, bests.tops);
  bests.rank_floors.clear();
  if (slice.size() < kRankFloors[0]) return;
  // The list's block maxima as encoded: a long list's floors then count only its best postings.
  const PostingListView encoded = PostingListView::parse(words.data(), words.size(), std::string());
  compute_rank_floors(scores, {encoded.block_max_score, encoded.block_count}, encoded.codec->block_size(),
                      bests.rank_floors);
}

void keep_term_bests(IndexView& view, TermInfo& info, const TermBests& bests) {
  if (!bests.tops.empty()) {
    info.tops = static_cast<uint32_t>(view.term_tops.size());
    view.term_tops.insert(view.term_tops.end(), bests.tops.begin(), bests.tops.end());
  }
  info.ranks = static_cast<uint32_t>(view.term_rank_floors.size());
  info.rank_count = static_cast<uint32_t>(bests.rank_floors.size());
  view.term_rank_floors.insert(view.term_rank_floors.end(), bests.rank_floors.begin(), bests.rank_floors.end());
}

bool PartitionEncoder::encode(std::span<const Posting> all, uint64_t cf, TermInfo& info, std::vector<uint32_t>& words,
                              uint64_t& postings, TermBests* bests) const {
  const auto by_doc = [](const Posting& posting, DocId d) { return posting.doc < d; };
  auto first = std::lower_bound(all.begin(), all.end(), meta_.doc_begin, by_doc);
  auto last = std::lower_bound(first, all.end(), meta_.doc_end, by_doc);
  if (first == last) return false;
  const float weight = bm25_term_weight(bm25_idf(all.size(), meta_.stats.doc_count), meta_.bm25);
  thread_local std::vector<Score> scores;
  scores.resize(static_cast<size_t>(last - first));
  Score* score = scores.data();
  for (auto it = first; it != last; ++it)
    *score++ = bm25_score(weight, it->freq, length_norms_[it->doc - meta_.doc_begin]);
  const std::span<const Posting> slice{&*first, static_cast<size_t>(last - first)};
  encode_posting_list(slice, scores, codec_, words);
  if (bests != nullptr) select_term_bests(slice, scores, words, *bests);
  info.df = static_cast<uint32_t>(all.size());
  info.cf = cf;
  info.words = static_cast<uint32_t>(words.size());
  postings = static_cast<uint64_t>(last - first);
  return true;
}

}  // namespace warp
