#include "indexer/pipeline/merge_stage.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <cstdio>
#include <future>
#include <queue>
#include <span>

#include "common/index/word_positions.hpp"
#include "common/util/checksum.hpp"
#include "common/util/parallel_tasks.hpp"
#include "indexer/pipeline/parallel_builder.hpp"

namespace warp::pipeline {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// Boundaries of `parts` term ranges of about equal run bytes, from the runs' sparse indexes.
std::vector<std::string> term_ranges(const std::vector<RunInfo>& runs, size_t parts) {
  std::vector<std::pair<std::string_view, uint64_t>> samples;  // term, bytes up to the next sample
  uint64_t total = 0;
  for (const RunInfo& run : runs) {
    for (size_t i = 0; i < run.index.size(); ++i) {
      const uint64_t next = i + 1 < run.index.size() ? run.index[i + 1].offset : run.bytes;
      samples.emplace_back(run.index[i].term, next - run.index[i].offset);
      total += next - run.index[i].offset;
    }
  }
  std::sort(samples.begin(), samples.end());
  std::vector<std::string> bounds;
  uint64_t running = 0;
  size_t part = 1;
  for (const auto& [term, bytes] : samples) {
    if (part >= parts) break;
    if (running >= total * part / parts && !term.empty() && (bounds.empty() || bounds.back() < term)) {
      bounds.emplace_back(term);
      ++part;
    }
    running += bytes;
  }
  return bounds;
}

// One term range of the back end: a k-way merge of every run over [lo, hi), final docIDs, lists
// encoded per partition into that partition's SST files for the range.
RangeOutput merge_range(const std::vector<RunInfo>& runs, const std::string& lo, const std::string* hi,
                        size_t buffer_bytes, const DocTable& docs, const std::vector<DocId>& span_starts,
                        const std::vector<PartitionEncoder>& encoders, const std::vector<std::string>& partition_dirs,
                        size_t range) {
  const size_t parts = encoders.size();
  RangeOutput out;
  out.terms.assign(parts, 0), out.posting_count.assign(parts, 0), out.list_bytes.assign(parts, 0);
  std::vector<std::unique_ptr<SstRows>> lexicon, postings;
  char name[64];
  for (size_t p = 0; p < parts; ++p) {
    std::snprintf(name, sizeof name, "/ingest-lexicon-%04zu.sst", range);
    lexicon.push_back(std::make_unique<SstRows>(SstRows::Family::kLexicon, partition_dirs[p] + name));
    std::snprintf(name, sizeof name, "/ingest-postings-%04zu.sst", range);
    postings.push_back(std::make_unique<SstRows>(SstRows::Family::kPostings, partition_dirs[p] + name));
  }
  std::vector<std::unique_ptr<RunCursor>> cursors;
  for (const RunInfo& run : runs) cursors.push_back(std::make_unique<RunCursor>(run, lo, buffer_bytes, hi));
  // The heap orders the runs by their current terms' 8-byte prefixes as integers, the texts
  // compared only on equal prefixes: every run holds nearly every term, so each term took 2 log2(runs)
  // comparisons of texts per run (a tenth of the merge's time at 16 runs, a third at 4,600). A scan of
  // every run for the smallest prefix ran as fast at 16 and at 4,600 runs, but costs every run per
  // term where runs hold few of the terms (a long-tailed vocabulary); the heap costs log2(runs).
  // Runs holding one term pop in the order of `runs`: where that is docID order (the parsers' runs,
  // parser by parser), a term's parts come in docID order and need no reordering afterwards
  // (to_final_doc_order) but around the splits parsers took from others' ranges at the end; in an
  // arbitrary order, 95-99% of the lists had had their parts sorted and copied again. (Runs cut
  // where a parser takes another's split made every list ordered, but 12-18 more runs at 16
  // threads cost the merge what the ordering saved.)
  std::vector<uint64_t> keys(cursors.size());
  const auto later = [&](size_t a, size_t b) {
    if (keys[a] != keys[b]) return keys[a] > keys[b];
    const int order = cursors[a]->term().compare(cursors[b]->term());
    return order != 0 ? order > 0 : a > b;
  };
  std::priority_queue<size_t, std::vector<size_t>, decltype(later)> heap(later);
  for (size_t i = 0; i < cursors.size(); ++i) {
    if (cursors[i]->valid()) keys[i] = term_prefix(cursors[i]->term()), heap.push(i);
  }
  std::vector<Posting> list, scratch;
  TermBests bests;
  std::vector<size_t> segments;  // where each run's part of the list starts
  std::vector<ListPiece> pieces;
  std::vector<uint32_t> words;
  std::string term;
  while (!heap.empty() && (hi == nullptr || cursors[heap.top()]->term() < *hi)) {
    term = cursors[heap.top()]->term();
    const uint64_t key = keys[heap.top()];
    list.clear(), segments.clear();
    while (!heap.empty() && keys[heap.top()] == key && cursors[heap.top()]->term() == term) {
      const size_t c = heap.top();
      heap.pop();
      segments.push_back(list.size());
      cursors[c]->take(list);
      if (cursors[c]->valid()) keys[c] = term_prefix(cursors[c]->term()), heap.push(c);
    }
    to_final_doc_order(list, segments, docs.final_ids(), span_starts, scratch, pieces);
    if (list.empty()) continue;
    const uint64_t cf = PartitionEncoder::collection_frequency(list);
    for (size_t p = 0; p < parts; ++p) {
      TermInfo info;
      uint64_t count = 0;
      if (!encoders[p].encode(list, cf, info, words, count, &bests)) continue;
      const uint32_t list_crc = crc32_of(words.data(), size_t{info.words} * 4);
      lexicon[p]->put_term(term, info, list_crc, bests.tops, bests.rank_floors);
      postings[p]->put_list(term, words.data(), info.words);
      ++out.terms[p];
      out.posting_count[p] += count;
      out.list_bytes[p] += size_t{info.words} * 4;
    }
  }
  for (size_t p = 0; p < parts; ++p) {
    out.lexicon.push_back(lexicon[p]->finish());
    out.postings.push_back(postings[p]->finish());
  }
  return out;
}

// The files each partition's movers may hold open and the merge buffers: how many ranges merge
// at once, and each one's buffer per run.
struct MergeShape {
  size_t threads = 1;
  size_t buffer_bytes = 0;
};

MergeShape merge_shape(const BuildPlan& plan, size_t runs) {
  rlimit files{};
  const uint64_t open_files =
      ::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur != RLIM_INFINITY ? files.rlim_cur : 1u << 20;
  const uint64_t run_count = std::max<size_t>(runs, 1);
  MergeShape shape;
  shape.threads = merge_concurrency(plan.budget, run_count, plan.threads, open_files);
  shape.buffer_bytes = std::clamp<uint64_t>(plan.budget / (4 * shape.threads * run_count), kMinMergeBuffer, 1u << 20);
  return shape;
}

}  // namespace

namespace {

// Slice `slice` of partition p's documents (of `slices`): their records, stored forms, columns and
// word positions, in one pass over their part of the spill.
void write_slice(const BuildOptions& build, const DocTable& docs, const std::vector<std::string>& partition_dirs,
                 uint32_t p, size_t slice, size_t slices, MergeOutput& out) {
  const DocId count = out.bounds[p + 1] - out.bounds[p];
  DocId lo = out.bounds[p] + static_cast<DocId>(uint64_t{count} * slice / slices);
  DocId hi = out.bounds[p] + static_cast<DocId>(uint64_t{count} * (slice + 1) / slices);
  const std::vector<DocId>* chunks = build.positions ? &out.position_chunks[p] : nullptr;
  size_t chunk = 0;  // the chunk being made
  if (chunks) {      // from the first chunk at or after the slice's start to the next slice's
    const auto snap = [&](DocId doc) {
      return static_cast<size_t>(std::lower_bound(chunks->begin(), chunks->end(), doc) - chunks->begin());
    };
    chunk = slice == 0 ? 0 : snap(lo);
    lo = chunk < chunks->size() ? (*chunks)[chunk] : out.bounds[p + 1];
    const size_t next = slice + 1 == slices ? chunks->size() : snap(hi);
    hi = next < chunks->size() ? (*chunks)[next] : out.bounds[p + 1];
  }
  const std::string suffix = "-" + std::to_string(slice) + ".sst";
  SstRows rows(SstRows::Family::kDocuments, partition_dirs[p] + "/ingest-documents" + suffix);
  SstRows stored(SstRows::Family::kStored, partition_dirs[p] + "/ingest-stored" + suffix);
  SstRows positions(SstRows::Family::kPositions, partition_dirs[p] + "/ingest-positions" + suffix);
  ColumnsBuilder* columns = build.columns.empty() ? nullptr : &out.columns[p][slice];
  std::optional<PositionsBuilder> chunk_positions;
  const auto flush_positions = [&] {
    if (chunk_positions)
      chunk_positions->rows([&](const std::string& key, const std::string& row) { positions.put(key, row); });
    chunk_positions.reset();
  };
  docs.for_each_document(lo, hi, [&](DocId doc, const DocumentRecord& record) {
    rows.put_document(doc, record);
    if (build.store) stored.put_stored(doc, record);
    if (columns) columns->add(record.source);
    if (!chunks) return;
    while (chunk + 1 < chunks->size() && (*chunks)[chunk + 1] <= doc) flush_positions(), ++chunk;
    if (!chunk_positions) chunk_positions.emplace(build.analyzer, (*chunks)[chunk]);
    chunk_positions->add_source(doc, record.source);
  });
  flush_positions();
  out.documents[p][slice] = rows.finish();
  out.stored[p][slice] = stored.finish();
  if (chunks) out.positions[p][slice] = positions.finish();
}

}  // namespace

MergeOutput merge_runs(const BuildPlan& plan, const PipelineOptions& options, DocTable& docs, const ParseOutput& parsed,
                       const std::vector<std::string>& partition_dirs, ReadReport& read, PipelineReport& report) {
  const auto merge_start = Clock::now();
  // The final docIDs (duplicates resolved) on one thread while the others prepare the back end,
  // which needs only the runs and the directories: its term ranges and the partitions'
  // databases. One after the other they had been the build's serial gap between its phases.
  std::future<void> finishing = std::async(std::launch::async, [&] { docs.finish(plan.splits, read, plan.threads); });
  const uint32_t parts = options.build.partitions;
  const std::vector<RunInfo>& runs = parsed.runs;
  // Term ranges (two per thread, for balance) and the documents of each partition, in parallel.
  const std::vector<std::string> range_bounds = term_ranges(runs, 2 * plan.threads);
  const size_t ranges = range_bounds.size() + 1;
  const MergeShape shape = merge_shape(plan, runs.size());
  MergeOutput out;
  out.ranges.resize(ranges);
  // Movers: a partition's share of the back-end threads, beside them (they wait on RocksDB about as
  // much as they work); with fewer threads than partitions, the threads move their ranges in.
  const size_t movers = shape.threads / parts;
  // The partitions' databases created side by side: each open writes and syncs its first files, and
  // one after another they had kept every back-end thread waiting (62-84 ms for 4 partitions on
  // the development VM, 25-38 side by side).
  out.assemblies.resize(parts);
  run_parallel_tasks(parts, plan.threads, [&](size_t p) {
    out.assemblies[p] = std::make_unique<PartitionAssembly>(partition_dirs[p], movers);
  });
  finishing.get();  // rethrows what finish() threw
  report.documents = docs.kept();
  const std::vector<DocId> span_starts = parsed.split_taker->span_starts(docs.split_starts());
  report.merge_seconds = seconds_since(merge_start);
  if (docs.kept() == 0) {
    out.assemblies.clear();  // closed before their directories go
    return out;
  }

  // The partitions: boundaries balanced by postings, collection statistics, one encoder each.
  const auto encode_start = Clock::now();
  out.bounds = balanced_boundaries(docs.distinct(), parts);
  uint64_t total_length = 0;
  for (uint32_t length : docs.lengths()) total_length += length;
  const CollectionStats stats{docs.kept(), total_length};
  for (uint32_t p = 0; p < parts; ++p) {
    const PartitionMeta meta = partition_meta(options.build, p, out.bounds, stats);
    out.encoders.emplace_back(
        meta, std::span<const uint32_t>(docs.lengths()).subspan(out.bounds[p], out.bounds[p + 1] - out.bounds[p]));
  }
  // The partitions' documents first, each in slices of its docIDs (a pass over their part of the
  // spill, the stored forms compressed): one task a partition had been the phase's long pole, the
  // other threads idle at its end (stored forms made a 16-thread build of 87 MB 1.9x as long).
  const size_t slices = std::max<size_t>(1, (shape.threads + parts - 1) / parts);
  out.documents.assign(parts, std::vector<SstRows::Done>(slices));
  out.stored.assign(parts, std::vector<SstRows::Done>(slices));
  const ColumnSchema& schema = options.build.columns;
  if (!schema.empty()) out.columns.assign(parts, std::vector<ColumnsBuilder>(slices, ColumnsBuilder(schema)));
  // Word positions: their chunks (cut as every builder cuts them) bound the slices, so each slice
  // makes its chunks' rows in its one pass over the documents, a chunk at a time in memory.
  if (options.build.positions) {
    out.position_chunks.resize(parts);
    out.positions.assign(parts, std::vector<SstRows::Done>(slices));
    for (uint32_t p = 0; p < parts; ++p) {
      out.position_chunks[p] = position_chunk_begins(
          out.bounds[p],
          std::span<const uint32_t>(docs.lengths()).subspan(out.bounds[p], out.bounds[p + 1] - out.bounds[p]));
    }
  }
  const size_t document_tasks = parts * slices;
  run_parallel_tasks(document_tasks + ranges, shape.threads, [&](size_t task) {
    if (task >= document_tasks) {
      task -= document_tasks;
      const std::string lo = task == 0 ? std::string() : range_bounds[task - 1];
      const std::string* hi = task + 1 < ranges ? &range_bounds[task] : nullptr;
      out.ranges[task] =
          merge_range(runs, lo, hi, shape.buffer_bytes, docs, span_starts, out.encoders, partition_dirs, task);
      // To the partitions' movers (long lists to blob files) while this thread encodes the next range.
      for (uint32_t p = 0; p < parts; ++p)
        out.assemblies[p]->add_terms(out.ranges[task].lexicon[p], out.ranges[task].postings[p]);
      return;
    }
    write_slice(options.build, docs, partition_dirs, static_cast<uint32_t>(task / slices), task % slices, slices, out);
  });
  report.encode_seconds = seconds_since(encode_start);
  return out;
}

}  // namespace warp::pipeline
