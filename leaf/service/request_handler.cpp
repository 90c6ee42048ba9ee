// The leaf's one request handler, behind both front ends (the ZeroMQ ROUTER and the direct search
// path): a request is read once (read_request: checked, its query prepared on its partition), then
// answered inline, by a worker, or by the scheduler (answer).
#include <algorithm>
#include <future>
#include <optional>

#include "common/protocol/search.capnp.h"
#include "common/query/filter.hpp"
#include "common/transfer/capnp_frames.hpp"
#include "leaf/query/facet_counts.hpp"
#include "leaf/service/leaf_request.hpp"
#include "leaf/service/leaf_server.hpp"

namespace warp {
namespace {

// First segments of the replies' builders. Cap'n Proto's default, 1,024 words, is an 8 KiB calloc
// for every message; malloc's consolidation of such chunks was a visible share of the CPU per
// search under load. A search reply of ten hits takes about 1 KiB; a longer one grows a segment.
constexpr unsigned kReplyFirstSegmentWords = 256, kSmallFirstSegmentWords = 64;

std::string flat_bytes(capnp::MessageBuilder& builder) {
  const auto words = capnp::messageToFlatArray(builder);
  return std::string(reinterpret_cast<const char*>(words.asBytes().begin()), words.asBytes().size());
}

// A search reply carrying only `error` (a request that could not be read, or failed).
std::string error_reply(const std::string& error) {
  capnp::MallocMessageBuilder builder;
  builder.initRoot<protocol::LeafReply>().initSearch().setError(error);
  return flat_bytes(builder);
}

// A string as Cap'n Proto text with its length: the conversion from std::string reads a C string,
// and a title holding a NUL (JSON's \u0000 is kept) was cut there.
capnp::Text::Reader whole_text(const std::string& text) { return capnp::Text::Reader(text.data(), text.size()); }

void write_facets(const FacetResult& facets, protocol::SearchResponse::Builder response) {
  response.setFacetMatches(facets.matches);
  if (!facets.error.empty()) response.setFacetError(facets.error);
  auto fields = response.initFacets(static_cast<unsigned>(facets.fields.size()));
  for (size_t f = 0; f < facets.fields.size(); ++f) {
    const FacetField& field = facets.fields[f];
    auto out = fields[static_cast<unsigned>(f)];
    out.setField(field.field);
    out.setOthers(field.others);
    out.setOtherValues(field.other_values);
    auto values = out.initValues(static_cast<unsigned>(field.values.size()));
    for (size_t v = 0; v < field.values.size(); ++v) {
      values[static_cast<unsigned>(v)].setValue(
          capnp::Text::Reader(field.values[v].value.data(), field.values[v].value.size()));
      values[static_cast<unsigned>(v)].setCount(field.values[v].count);
    }
  }
}

// The facets of a search (facet_counts.hpp) on its partition, before it is ranked: AND+OR counts
// the documents AND matches where there are k of them, else OR's, as its ranking falls back.
FacetResult count_facets(const LoadedIndex& index, size_t slot, const PreparedQuery& query,
                         const std::vector<std::string>& fields, size_t values, uint64_t max_postings) {
  const QueryProcessor& processor = index.cpu[slot] ? *index.cpu[slot] : *index.gpu[slot];
  const QueryMode mode = query.query.mode;
  FacetCounter counter(fields, max_postings);
  processor.count_facets(query, mode == QueryMode::kOr, counter);
  FacetResult result = counter.take(values);
  if (mode == QueryMode::kAndOr && result.error.empty() && result.matches < query.query.k) {
    FacetCounter any(fields, max_postings);
    processor.count_facets(query, true, any);
    result = any.take(values);
  }
  return result;
}

// A search reply: the hits with their documents' identity, and how the search went.
std::string search_reply(const LoadedIndex& index, size_t slot, uint64_t query_id, uint32_t partition_id,
                         const QueryResult& result, std::string_view processor, double seconds,
                         std::chrono::steady_clock::time_point arrival, const FacetResult* facets = nullptr) {
  capnp::MallocMessageBuilder builder(kReplyFirstSegmentWords);
  auto response = builder.initRoot<protocol::LeafReply>().initSearch();
  response.setQueryId(query_id);
  response.setPartition(partition_id);
  response.setGeneration(index.generation);
  response.setAndMatches(result.and_matches);
  response.setPostingsDecoded(result.stats.postings_decoded);
  response.setBlocksDecoded(result.stats.blocks_decoded);
  response.setBlocksTotal(result.stats.blocks_total);
  response.setProcessor(std::string(processor));
  response.setMicros(static_cast<uint64_t>(seconds * 1e6));
  auto hits = response.initHits(static_cast<unsigned>(result.hits.size()));
  for (size_t i = 0; i < result.hits.size(); ++i) {
    auto hit = hits[static_cast<unsigned>(i)];
    hit.setDoc(result.hits[i].doc);
    hit.setScore(result.hits[i].score);
    const PartitionMeta& meta = index.partitions[slot]->view().meta;
    hit.setWritten(result.hits[i].doc < meta.doc_begin || result.hits[i].doc >= meta.doc_end);
    if (auto record = index.document(slot, result.hits[i].doc)) {
      hit.setExternalId(whole_text(record->external_id));
      hit.setTitle(whole_text(record->title));
      hit.setUrl(whole_text(record->url));
    }
  }
  if (facets) write_facets(*facets, response);
  const auto in_leaf =
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - arrival);
  response.setLeafMicros(static_cast<uint64_t>(std::max<int64_t>(1, in_leaf.count())));
  return flat_bytes(builder);
}

std::string documents_error(uint64_t query_id, uint32_t partition_id, const std::string& why) {
  capnp::MallocMessageBuilder builder(kSmallFirstSegmentWords);
  auto reply = builder.initRoot<protocol::LeafReply>().initDocuments();
  reply.setQueryId(query_id);
  reply.setPartition(partition_id);
  reply.setError(why);
  return flat_bytes(builder);
}

// The slot of partition `id` in `index`; partitions.size() when the leaf does not serve it.
size_t slot_of(const LoadedIndex& index, uint32_t id) {
  for (size_t i = 0; i < index.partitions.size(); ++i)
    if (index.partitions[i]->view().meta.partition_id == id) return i;
  return index.partitions.size();
}

constexpr size_t kMaxSnippetLength = 10000, kMaxTagBytes = 256;

// A DocumentsRequest's ask; the reason it is refused, if it is.
std::optional<std::string> read_ask(protocol::DocumentsRequest::Reader frame, DocumentsAsk& ask) {
  for (uint32_t doc : frame.getDocs()) ask.docs.push_back(doc);
  for (auto id : frame.getIds()) ask.ids.emplace_back(id.cStr(), id.size());
  if (!ask.docs.empty() && !ask.ids.empty() && ask.ids.size() != ask.docs.size())
    return "ids must be absent or one per doc";
  if (std::max(ask.docs.size(), ask.ids.size()) > kMaxTopK)
    return "at most " + std::to_string(kMaxTopK) + " documents a request";
  ask.source = frame.getSource();
  for (auto term : frame.getTerms()) ask.terms.emplace_back(term.cStr(), term.size());
  ask.field = frame.getSnippetField().cStr();
  ask.snippet.length = frame.getSnippetLength();
  ask.snippet.pre_tag = frame.getPreTag().cStr();
  ask.snippet.post_tag = frame.getPostTag().cStr();
  if (frame.getPhrases().size() > 64) return "at most 64 phrases to highlight";
  for (auto phrase : frame.getPhrases()) {
    ask.snippet.phrases.emplace_back();
    for (auto word : phrase) ask.snippet.phrases.back().emplace_back(word.cStr(), word.size());
  }
  if (ask.snippet.length > kMaxSnippetLength || ask.snippet.pre_tag.size() > kMaxTagBytes ||
      ask.snippet.post_tag.size() > kMaxTagBytes)
    return "snippet length at most 10000 and tags at most 256 bytes";
  return std::nullopt;
}

std::string search_error(uint64_t query_id, uint32_t partition_id, const std::string& why) {
  capnp::MallocMessageBuilder builder(kSmallFirstSegmentWords);
  auto response = builder.initRoot<protocol::LeafReply>().initSearch();
  response.setQueryId(query_id);
  response.setPartition(partition_id);
  response.setError(why);
  return flat_bytes(builder);
}

}  // namespace

LeafServer::Request LeafServer::read_request(std::string_view bytes, std::chrono::steady_clock::time_point arrival) {
  Request request;
  request.arrival = arrival;
  const LoadedIndex* index = nullptr;
  try {
    transfer::FrameReader reader(bytes.data(), bytes.size());
    auto frame = reader.root<protocol::LeafRequest>();
    // The generation the request reads, to the end: the one it names (a staged one swapped in
    // first), or the one served.
    request.index = index_for(frame.isSearch()      ? frame.getSearch().getGeneration()
                              : frame.isDocuments() ? frame.getDocuments().getGeneration()
                              : frame.isStatusAt()  ? frame.getStatusAt()
                                                    : 0,
                              frame.isSearch() ? frame.getSearch().getAfter() : 0);
    index = request.index.get();
    if (frame.isStatus() || frame.isStatusAt()) {
      status_requests_.Increment();
      expire_previous();
      request.index = this->index();  // what is served, whatever the broker reads
      index = request.index.get();
      capnp::MallocMessageBuilder builder(kSmallFirstSegmentWords);
      auto status = builder.initRoot<protocol::LeafReply>().initStatus();
      status.setReady(index != nullptr);
      status.setInFlight(in_flight_);
      status.setSearchPort(search_port_);
      if (index) {
        status.setGeneration(index->generation);
        status.setStagedGeneration(staged_generation_);
        status.setWriteSequence(index->write_sequence);
        status.setAnalyzer(index->analyzer);
        auto ids = status.initPartitions(static_cast<unsigned>(index->partitions.size()));
        for (size_t i = 0; i < index->partitions.size(); ++i)
          ids.set(static_cast<unsigned>(i), index->partitions[i]->view().meta.partition_id);
        status.setPositions(!index->partitions.empty() &&
                            std::all_of(index->partitions.begin(), index->partitions.end(),
                                        [](const auto& partition) { return partition->view().positions != nullptr; }));
        if (!index->partitions.empty() && index->partitions[0]->view().columns) {
          const ColumnSchema schema = index->partitions[0]->view().columns->schema();
          auto keyword = status.initKeywordFields(static_cast<unsigned>(schema.keyword.size()));
          for (size_t i = 0; i < schema.keyword.size(); ++i) keyword.set(static_cast<unsigned>(i), schema.keyword[i]);
          auto numeric = status.initNumericFields(static_cast<unsigned>(schema.numeric.size()));
          for (size_t i = 0; i < schema.numeric.size(); ++i) numeric.set(static_cast<unsigned>(i), schema.numeric[i]);
        }
      }
      request.reply = flat_bytes(builder);
      return request;
    }
    if (frame.isDocuments()) {
      auto documents = frame.getDocuments();
      request.query_id = documents.getQueryId();
      request.partition_id = documents.getPartition();
      const auto refuse = [&](const char* kind, const std::string& why) {
        requests_.Add({{"kind", kind}}).Increment();
        request.reply = documents_error(request.query_id, request.partition_id, why);
        return std::move(request);
      };
      if (index == nullptr) return refuse("not_ready", "leaf is not ready");
      request.slot = slot_of(*index, request.partition_id);
      if (request.slot == index->partitions.size())
        return refuse("bad_request", "this leaf does not serve partition " + std::to_string(request.partition_id));
      if (auto why = read_ask(documents, request.ask)) return refuse("bad_request", *why);
      request.budget = std::chrono::microseconds(documents.getDeadlineMicros());
      request.documents = true;
      return request;
    }
    auto search = frame.getSearch();
    request.query_id = search.getQueryId();
    request.partition_id = search.getPartition();
    const auto fail = [&](const char* kind, const std::string& why) {
      requests_.Add({{"kind", kind}}).Increment();
      request.reply = search_error(request.query_id, request.partition_id, why);
      return std::move(request);
    };
    if (index == nullptr) return fail("not_ready", "leaf is not ready");
    if (search.getK() == 0 || search.getK() > kMaxTopK) return fail("bad_request", "k must be between 1 and 10000");
    request.slot = slot_of(*index, request.partition_id);
    if (request.slot == index->partitions.size()) {
      return fail("bad_request", "this leaf does not serve partition " + std::to_string(request.partition_id));
    }
    Query query;
    for (auto term : search.getTerms()) query.terms.emplace_back(term.cStr());
    for (uint32_t count : search.getTermCounts()) query.counts.push_back(count);
    for (auto term : search.getRequired()) query.required.emplace_back(term.cStr());
    for (auto group : search.getExcluded()) {
      query.excluded.emplace_back();
      for (auto term : group) query.excluded.back().emplace_back(term.cStr());
    }
    for (auto phrase : search.getPhrases()) {
      query.phrases.emplace_back();
      for (auto term : phrase) query.phrases.back().emplace_back(term.cStr());
    }
    for (auto phrase : search.getExcludedPhrases()) {
      query.excluded_phrases.emplace_back();
      for (auto term : phrase) query.excluded_phrases.back().emplace_back(term.cStr());
    }
    query.mode = search.getMode() == protocol::Mode::AND  ? QueryMode::kAnd
                 : search.getMode() == protocol::Mode::OR ? QueryMode::kOr
                                                          : QueryMode::kAndOr;
    query.k = search.getK();
    if (search.hasFilter() && search.getFilter().size() > 0) {
      const auto text = search.getFilter();
      query.filter = std::make_shared<const FilterNode>(parse_filter(std::string_view(text.cStr(), text.size())));
    }
    if (search.getFacets().size() > 16) return fail("bad_request", "at most 16 facet fields a search");
    for (auto field : search.getFacets()) request.facets.emplace_back(field.cStr(), field.size());
    request.facet_values = std::clamp<size_t>(search.getFacetValues(), 1, 10000);
    request.budget = std::chrono::microseconds(search.getDeadlineMicros());
    request.query = prepare_query(std::move(query), index->partitions[request.slot]->view());
    for (const TermInfo* info : request.query.scoring.infos) request.postings += info != nullptr ? info->df : 0;
    request.search = true;
  } catch (const std::exception& e) {
    requests_.Add({{"kind", "malformed"}}).Increment();
    request.reply = error_reply(std::string("bad request: ") + e.what());
    request.search = false;
  }
  return request;
}

bool LeafServer::answers_inline(const Request& request) {
  if (request.documents) return false;  // reads and snippets: a worker's
  if (!request.search) return true;
  if (!request.facets.empty()) return false;  // a pass over the lists: a worker's
  // --processor gpu: every search on the GPU. With the scheduler (auto), a search this small is the
  // CPU's at once: it costs less than the queue hand-off the scheduler would add.
  if (options_.inline_max_postings == 0 || request.index->gpu_only) return false;
  if (request.postings > options_.inline_max_postings) return false;
  answered_inline_.Increment();
  return true;
}

std::optional<std::string> LeafServer::answer(Request request, std::function<void(std::string)> deliver,
                                              bool on_cpu_now) {
  if (request.documents) return answer_documents(request);
  if (!request.search) return std::move(request.reply);
  const std::shared_ptr<const LoadedIndex> index = request.index;
  const uint64_t query_id = request.query_id;
  const uint32_t partition_id = request.partition_id;
  const size_t slot = request.slot;
  const auto arrival = request.arrival;
  try {
    if (std::chrono::steady_clock::now() - arrival > request.budget) {
      requests_.Add({{"kind", "deadline"}}).Increment();
      return search_error(query_id, partition_id, "deadline exceeded before the query started");
    }
    // Facets on this thread (a worker's), before the search: it may go on to the GPU's driver.
    std::shared_ptr<const FacetResult> facets;
    if (!request.facets.empty())
      facets = std::make_shared<const FacetResult>(
          count_facets(*index, slot, request.query, request.facets, request.facet_values, options_.max_facet_postings));
    if (scheduler_ && index->scheduled() && !on_cpu_now) {
      sched::Target target{&index->partitions[slot]->view(), index->cpu[slot].get(), index->gpu[slot].get(), index};
      scheduler_->submit(
          target, std::move(request.query), arrival + request.budget,
          [this, index, slot, query_id, partition_id, deliver, arrival, facets](sched::Outcome&& outcome) {
            if (!outcome.error.empty()) {
              requests_.Add({{"kind", "deadline"}}).Increment();
              deliver(search_error(query_id, partition_id, outcome.error));
              return;
            }
            const bool gpu = outcome.processor == sched::Processor::kGpu;
            (gpu ? latency_gpu_ : latency_cpu_).Observe(outcome.seconds);
            search_requests_.Increment();
            deliver(search_reply(*index, slot, query_id, partition_id, outcome.result, gpu ? "gpu" : "cpu",
                                 outcome.seconds, arrival, facets.get()));
          });
      return std::nullopt;
    }
    const auto start = std::chrono::steady_clock::now();
    const QueryProcessor& processor = index->gpu_only ? *index->gpu[slot] : *index->cpu[slot];
    const QueryResult result = processor.search(request.query);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    (processor.name() == "gpu" ? latency_gpu_ : latency_cpu_).Observe(seconds);
    search_requests_.Increment();
    return search_reply(*index, slot, query_id, partition_id, result, processor.name(), seconds, arrival, facets.get());
  } catch (const std::exception& e) {
    requests_.Add({{"kind", "malformed"}}).Increment();
    return error_reply(std::string("bad request: ") + e.what());
  } catch (...) {  // nothing may reach the top of a worker thread
    requests_.Add({{"kind", "error"}}).Increment();
    return error_reply("internal error");
  }
}

std::string LeafServer::answer_documents(const Request& request) {
  try {
    if (std::chrono::steady_clock::now() - request.arrival > request.budget) {
      requests_.Add({{"kind", "deadline"}}).Increment();
      return documents_error(request.query_id, request.partition_id, "deadline exceeded before the fetch started");
    }
    requests_.Add({{"kind", "documents"}}).Increment();
    fetched_documents_.Increment(static_cast<double>(std::max(request.ask.docs.size(), request.ask.ids.size())));
    return documents_reply(*request.index, request.slot, request.query_id, request.partition_id, request.ask,
                           [this](std::string_view id) { return written(id); });
  } catch (const std::exception& e) {
    requests_.Add({{"kind", "error"}}).Increment();
    return documents_error(request.query_id, request.partition_id, std::string("cannot fetch: ") + e.what());
  }
}

std::optional<std::string> LeafServer::handle(const std::string& bytes, std::chrono::steady_clock::time_point arrival,
                                              std::function<void(std::string)> deliver, bool on_cpu_now) {
  return answer(read_request(bytes, arrival), std::move(deliver), on_cpu_now);
}

std::string LeafServer::handle(const std::string& bytes, std::chrono::steady_clock::time_point arrival) {
  std::promise<std::string> later;
  std::optional<std::string> now =
      handle(bytes, arrival, [&later](std::string reply) { later.set_value(std::move(reply)); });
  return now ? std::move(*now) : later.get_future().get();
}

}  // namespace warp
