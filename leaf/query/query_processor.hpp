// The query-processor interface that the CPU processor and the GPU processor both implement, over
// the same IndexView, so tests run both on one query and compare.
#pragma once
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/index/index_view.hpp"
#include "common/query/query.hpp"
#include "leaf/query/live_overlay.hpp"
#include "leaf/query/posting_cursor.hpp"
#include "leaf/query/topk_queue.hpp"

namespace warp {

// Exact OR top-k algorithms; all give identical results.
enum class OrAlgorithm { kMaxScore, kBlockMaxWand, kTiles };

OrAlgorithm parse_or_algorithm(std::string_view text);  // "tiles" | "bmw" | "maxscore"; throws Error
std::string_view or_algorithm_name(OrAlgorithm algorithm);

// How one query is scored on a partition: the units (the same on every partition of a generation)
// and, per distinct term, its scoring or nothing when the partition has no such term.
struct QueryScoring {
  std::vector<QueryTerm> terms;
  std::vector<const TermInfo*> infos;  // per term; null: not in this partition
  std::vector<TermScoring> scoring;    // per term
  float units_per_score = 1;
  float score_of_unit = 1;  // 1 / units_per_score, exact (a power of two)
};
// With `live`, on the statistics it gives (live_overlay.hpp) instead of the view's own.
QueryScoring score_query(const Query& query, const IndexView& index, const LiveOverlay* live = nullptr);

// A query made ready for one partition once, on its way in (the leaf's scheduler, or search() for
// a bare Query): its distinct terms found in the partition's lexicon and weighed. The cost model
// and whichever processor answers read it; nobody looks the terms up again.
struct PreparedQuery {
  Query query;
  QueryScoring scoring;
  const IndexView* index = nullptr;   // the partition it was prepared for
  const LiveOverlay* live = nullptr;  // and its overlay, where writes after its generation apply
};
PreparedQuery prepare_query(Query query, const IndexView& index);
// `prepared`'s scoring where it was prepared for `index`; else scored on `index` into `local`.
const QueryScoring& scoring_on(const PreparedQuery& prepared, const IndexView& index, QueryScoring& local);

// The floor under the k-th best score of an OR query, where the CPU's top-k and the GPU's θ start
// (in its score units): the largest, over its terms with best postings, of the k-th best of those
// postings' scores for the term (each such posting's document scores at least that much); past
// kTermTops, the largest of its terms' rank floors at the first of kRankFloors at or past k (as
// many of the term's postings score at least that much). 0 where no term has them. With
// `kept_out` (a bit per document, query_constraints.hpp), only the best postings of documents it
// leaves in count, and no rank floor.
Score or_floor(const QueryScoring& scoring, const IndexView& index, size_t k, const uint64_t* kept_out = nullptr);

// Unit scores of hits to BM25 scores (exact: multiplication by a power of two).
void units_to_scores(std::vector<Hit>& hits, const QueryScoring& scoring);

struct QueryResult {
  std::vector<Hit> hits;  // best first
  CursorStats stats;
  uint64_t and_matches = 0;      // documents matching every term (AND and AND+OR modes)
  bool fell_back_to_or = false;  // AND+OR: AND found fewer than k
};

// Device memory of a processor that has a device (the GPU list cache); zeros for the CPU.
struct DeviceMemoryStats {
  uint64_t bytes_resident = 0;
  uint64_t list_cache_hits = 0, list_cache_misses = 0, list_cache_evictions = 0;
};

// A batch being answered asynchronously (start_batch): poll() until it returns true, then take()
// the answers, in the order of the queries. Driven by one thread at a time.
class BatchRun {
 public:
  virtual ~BatchRun() = default;
  // Advances the run when its device has finished the work in flight (launching what comes next);
  // true once every answer is ready. Never waits. Throws what search_batch would.
  virtual bool poll() = 0;
  virtual std::vector<QueryResult> take() = 0;
  // Seconds of host work in the polls that finished one of the run's phases and launched the next
  // (not the last one's; 0 where not measured).
  virtual double between_phases_seconds() const { return 0; }
};

// A run whose answers are already there (poll() is true at once).
std::unique_ptr<BatchRun> answered_run(std::vector<QueryResult> results);
// A run answered by `work` on a thread of its own, so that the caller keeps polling its other runs
// meanwhile (dropped unfinished, it waits for the thread).
std::unique_ptr<BatchRun> run_on_thread(std::function<std::vector<QueryResult>()> work);

class FacetCounter;  // facet_counts.hpp

class QueryProcessor {
 public:
  virtual ~QueryProcessor() = default;
  virtual std::string_view name() const = 0;
  virtual const IndexView& index() const = 0;  // the partition it searches
  // Thread-safe: many worker threads may call search on one processor.
  virtual QueryResult search(const PreparedQuery& query) const = 0;
  QueryResult search(const Query& query) const { return search(prepare_query(query, index())); }
  // Several queries at once (the GPU runs them as one PARA batch); by default one after another.
  virtual std::vector<QueryResult> search_batch(std::span<const PreparedQuery> queries) const {
    std::vector<QueryResult> results;
    for (const PreparedQuery& query : queries) results.push_back(search(query));
    return results;
  }
  std::vector<QueryResult> search_batch(std::span<const Query> queries) const;
  // search_batch without waiting: a GPU processor with batch executors launches the batch's first
  // phase and returns, so that one host thread keeps several batches in flight (the scheduler's
  // GPU driver). `queries` must outlive the run. By default the batch is answered here, and the
  // run is ready at once.
  virtual std::unique_ptr<BatchRun> start_batch(std::span<const PreparedQuery> queries) const;
  virtual DeviceMemoryStats device_memory() const { return {}; }
  // Adds the facets of the documents `prepared` matches here (facet_counts.hpp; `any_term`: those
  // holding any scored term, else every one) to `counter`, on the CPU whatever the processor.
  virtual void count_facets(const PreparedQuery& prepared, bool any_term, FacetCounter& counter) const;
};

inline constexpr size_t kMaxTopK = 10000;

}  // namespace warp
