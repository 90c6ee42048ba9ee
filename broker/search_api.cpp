#include "broker/search_api.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <nlohmann/json.hpp>

#include "broker/fan_out.hpp"
#include "broker/fetch_phase.hpp"
#include "broker/search_facets.hpp"
#include "broker/search_page.hpp"
#include "broker/search_params.hpp"
#include "common/analysis/analyzer.hpp"
#include "common/query/query_syntax.hpp"
#include "common/util/utf8.hpp"
#include "common/metrics/metrics_text.hpp"
#include "common/util/json_writer.hpp"

namespace warp {
namespace {

using Clock = std::chrono::steady_clock;

// JSON text of a value that may hold a client's bytes (a path, a query): invalid UTF-8 becomes
// U+FFFD instead of an exception (found by fuzz_http_search: "GET /me\xf4rics" gave a 500).
std::string json_text(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

http::Response error(int status, const std::string& message) { return json_error(status, message); }

// One analyzer per thread and analyzer version (libstemmer state is not shared). Its stem cache
// holds at most 2^15 words between trims (~3.4 MB a thread; the analyzer's default, 2^18 for an
// indexer's parser, had grown a broker of 8 threads by ~200 MB under distinct queries).
constexpr size_t kQueryStemCacheTokens = size_t{1} << 15;
Analyzer& analyzer_for(const std::string& version) {
  thread_local std::string current;
  thread_local std::unique_ptr<Analyzer> analyzer;
  if (!analyzer || current != version) {
    analyzer = std::make_unique<Analyzer>(version.empty() ? AnalyzerConfig{} : AnalyzerConfig::from_version(version));
    analyzer->limit_stem_cache(kQueryStemCacheTokens);
    current = version;
  }
  return *analyzer;
}

}  // namespace

SearchApi::SearchApi(SearchApiOptions options, Cluster& cluster, ResultCache& cache,
                     std::shared_ptr<prometheus::Registry> registry, http::IoPool& pool)
    : options_(options),
      cluster_(cluster),
      cache_(cache),
      registry_(std::move(registry)),
      requests_(prometheus::BuildCounter()
                    .Name("warpsearch_broker_requests_total")
                    .Help("HTTP requests by endpoint and status")
                    .Register(*registry_)),
      latency_(prometheus::BuildHistogram()
                   .Name("warpsearch_broker_request_seconds")
                   .Help("Search latency in the broker, end to end")
                   .Register(*registry_)
                   .Add({}, latency_buckets())),
      leaf_latency_(prometheus::BuildHistogram()
                        .Name("warpsearch_broker_leaf_seconds")
                        .Help("Round trip to each leaf")
                        .Register(*registry_)),
      stages_(prometheus::BuildHistogram()
                  .Name("warpsearch_broker_stage_seconds")
                  .Help("An uncached full answer's time in the broker split along the partition that answered last: "
                        "the broker's "
                        "own work before that request and after its reply (broker), its round trip less the leaf's "
                        "time (transport: "
                        "both sides' ZeroMQ threads, the network, the wake-ups), the leaf's time from reading it to "
                        "its reply (leaf)")
                  .Register(*registry_)),
      stage_broker_(stages_.Add({{"stage", "broker"}}, latency_buckets())),
      stage_transport_(stages_.Add({{"stage", "transport"}}, latency_buckets())),
      stage_leaf_(stages_.Add({{"stage", "leaf"}}, latency_buckets())),
      cache_hits_(prometheus::BuildCounter()
                      .Name("warpsearch_broker_cache_hits_total")
                      .Help("Result cache hits")
                      .Register(*registry_)
                      .Add({})),
      cache_misses_(prometheus::BuildCounter()
                        .Name("warpsearch_broker_cache_misses_total")
                        .Help("Result cache misses")
                        .Register(*registry_)
                        .Add({})),
      cache_evictions_(prometheus::BuildCounter()
                           .Name("warpsearch_broker_cache_evictions_total")
                           .Help("Result cache evictions")
                           .Register(*registry_)
                           .Add({})),
      cache_bytes_(prometheus::BuildGauge()
                       .Name("warpsearch_broker_cache_bytes")
                       .Help("Bytes held by the result cache")
                       .Register(*registry_)
                       .Add({})),
      retries_(prometheus::BuildCounter()
                   .Name("warpsearch_broker_fanout_retries_total")
                   .Help("Partition requests sent to another replica")
                   .Register(*registry_)
                   .Add({})),
      leaf_requests_(prometheus::BuildCounter()
                         .Name("warpsearch_broker_leaf_requests_total")
                         .Help("Search requests sent to leaves, by path: direct (the leaves' TCP search port) or zmq")
                         .Register(*registry_)),
      sent_direct_(leaf_requests_.Add({{"path", "direct"}})),
      sent_zmq_(leaf_requests_.Add({{"path", "zmq"}})),
      partials_(prometheus::BuildCounter()
                    .Name("warpsearch_broker_partial_results_total")
                    .Help("Answers missing a partition")
                    .Register(*registry_)
                    .Add({})),
      rejected_(prometheus::BuildCounter()
                    .Name("warpsearch_broker_rejected_total")
                    .Help("Searches refused at once for overload, by reason")
                    .Register(*registry_)),
      unauthorized_(prometheus::BuildCounter()
                        .Name("warpsearch_broker_unauthorized_total")
                        .Help("Requests without a valid bearer token")
                        .Register(*registry_)
                        .Add({})),
      in_flight_(prometheus::BuildGauge()
                     .Name("warpsearch_broker_in_flight")
                     .Help("Queries in the fan-out")
                     .Register(*registry_)
                     .Add({})),
      connections_open_(prometheus::BuildGauge()
                            .Name("warpsearch_broker_http_connections")
                            .Help("Open HTTP connections")
                            .Register(*registry_)
                            .Add({})),
      connections_total_(prometheus::BuildCounter()
                             .Name("warpsearch_broker_http_connections_total")
                             .Help("HTTP connections accepted")
                             .Register(*registry_)
                             .Add({})),
      connections_refused_(prometheus::BuildCounter()
                               .Name("warpsearch_broker_http_connections_refused_total")
                               .Help("HTTP connections over the limit, answered 503")
                               .Register(*registry_)
                               .Add({})),
      connection_timeouts_(prometheus::BuildCounter()
                               .Name("warpsearch_broker_http_timeouts_total")
                               .Help("HTTP connections closed for a request or idle timeout")
                               .Register(*registry_)
                               .Add({})),
      replicas_(prometheus::BuildGauge()
                    .Name("warpsearch_broker_replicas")
                    .Help("Replicas known per partition, by state (healthy: ready and answering status requests)")
                    .Register(*registry_)),
      dns_failures_(prometheus::BuildCounter()
                        .Name("warpsearch_broker_dns_failures_total")
                        .Help("Replica-discovery lookups that got no answer (the replicas known were kept)")
                        .Register(*registry_)
                        .Add({})),
      fan_out_(cluster, pool, options_.zmq_io_threads, options_.direct_search) {
  cluster_.set_max_outstanding(static_cast<int>(options.max_outstanding));
  for (const char* reason : {"in_flight", "saturated"}) rejected_.Add({{"reason", reason}});  // at 0 from the start
}

// The partition that answered last bounds the answer: the broker's own time is the rest of the
// answer's (before its request went out, after its reply came back), its round trip less the time
// its leaf reports is the transport. Answers with a retried partition, or from leaves that report
// no time (older ones), are left out.
void SearchApi::observe_stages(const FanOutResult& result, double total_ms) {
  const PartitionOutcome* last = nullptr;
  for (const PartitionOutcome& outcome : result.partitions) {
    if (outcome.leaf_ms <= 0 || outcome.attempts != 1) return;  // a retry's wait is no stage
    if (last == nullptr || outcome.took_ms > last->took_ms) last = &outcome;
  }
  if (last == nullptr) return;
  stage_broker_.Observe(std::max(0.0, total_ms - last->round_trip_ms) / 1000);
  stage_transport_.Observe(std::max(0.0, last->round_trip_ms - last->leaf_ms) / 1000);
  stage_leaf_.Observe(last->leaf_ms / 1000);
}

http::Response SearchApi::counted(const std::string& endpoint, http::Response response) {
  requests_.Add({{"endpoint", endpoint}, {"status", std::to_string(response.status)}}).Increment();
  return response;
}

void SearchApi::respond_counted(const std::string& endpoint, const http::Respond& respond, http::Response response) {
  respond(counted(endpoint, std::move(response)));
}

http::Response SearchApi::refuse(const std::string& reason, const std::string& message) {
  rejected_.Add({{"reason", reason}}).Increment();
  return {503, "application/json", json_text(nlohmann::json{{"error", message}}), {{"Retry-After", "1"}}};
}

std::optional<http::Response> SearchApi::admit(const http::Request& head) {
  // The search page holds no data: a browser gets it without a token (its searches need one).
  if (head.path == "/" || head.path == "/index.html") return std::nullopt;
  // Writes need a token with the write scope; everything else, read.
  const bool writes = DocumentApi::serves(head.path) && head.method != "GET" && head.method != "HEAD";
  if (options_.auth == nullptr ||
      options_.auth->allows(head.authorization, writes ? AuthTokens::kWrite : AuthTokens::kRead))
    return std::nullopt;
  unauthorized_.Increment();
  if (writes && options_.auth->allows(head.authorization, AuthTokens::kRead))
    return counted("unauthorized", error(403, "this token may search, not write (give it the write scope)"));
  return counted("unauthorized", {401,
                                  "application/json",
                                  error(401, "a valid bearer token is required (Authorization: Bearer TOKEN)").body,
                                  {{"WWW-Authenticate", "Bearer realm=\"warpsearch\""}}});
}

void SearchApi::handle(const http::Request& request, http::Respond respond) {
  // Admitted on its header already where the server asks admit(); checked again for any other.
  if (std::optional<http::Response> refusal = admit(request)) return respond(std::move(*refusal));
  if (request.path == "/search") return search(request, std::move(respond));
  if (request.path == "/" || request.path == "/index.html") {
    if (request.method != "GET" && request.method != "HEAD")
      return respond_counted("/", respond, error(405, "use GET"));
    // Its own policy: nothing but this page's inline style and script, and calls to this origin.
    return respond_counted("/", respond,
                           {200,
                            "text/html; charset=utf-8",
                            search_page_html(),
                            {{"Content-Security-Policy",
                              "default-src 'self'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; "
                              "img-src 'self' data:; base-uri 'none'; form-action 'self'"},
                             {"Cache-Control", "no-cache"}}});
  }
  // A document's read needs no indexer: the leaves hold the stored documents.
  if (request.method == "GET" || request.method == "HEAD") {
    if (std::optional<std::string> id = DocumentApi::document_path_id(request.path))
      return get_document(request, *id, std::move(respond));
  }
  if (DocumentApi::serves(request.path)) {
    if (options_.documents == nullptr)
      return respond_counted("/indexes", respond,
                             error(404, "writes are not enabled here: start the broker with --indexer ENDPOINT"));
    return options_.documents->handle(request, [this, respond](http::Response response) {
      respond_counted("/indexes", respond, std::move(response));
    });
  }
  if (options_.admin_listener)
    return respond_counted("other", respond, error(404, "no such endpoint: " + request.path));
  respond(handle_admin(request));
}

http::Response SearchApi::handle_admin(const http::Request& request) {
  if (request.path == "/healthz") return counted("/healthz", {200, "application/json", R"({"status":"ok"})"});
  if (request.path == "/readyz") {
    return counted("/readyz", cluster_.ready() ? http::Response{200, "application/json", R"({"ready":true})"}
                                               : http::Response{503, "application/json", R"({"ready":false})"});
  }
  if (request.path == "/cluster") return counted("/cluster", {200, "application/json", json_text(cluster_.describe())});
  if (request.path == "/metrics") return counted("/metrics", metrics());
  return counted("other", error(404, "no such endpoint: " + request.path));
}

http::Response SearchApi::metrics() {
  std::lock_guard<std::mutex> lock(metrics_mutex_);
  const CacheStats now = cache_.stats();
  cache_hits_.Increment(static_cast<double>(now.hits - reported_.hits));
  cache_misses_.Increment(static_cast<double>(now.misses - reported_.misses));
  cache_evictions_.Increment(static_cast<double>(now.evictions - reported_.evictions));
  cache_bytes_.Set(static_cast<double>(now.bytes));
  reported_ = now;
  in_flight_.Set(static_cast<double>(fan_out_.in_flight()));
  const uint64_t direct = fan_out_.counts().direct, zmq = fan_out_.counts().zmq;
  sent_direct_.Increment(static_cast<double>(direct - reported_direct_));
  sent_zmq_.Increment(static_cast<double>(zmq - reported_zmq_));
  reported_direct_ = direct, reported_zmq_ = zmq;
  const nlohmann::json cluster = cluster_.describe();
  for (const auto& partition : cluster["partitions"]) {
    int healthy = 0, unhealthy = 0;
    for (const auto& replica : partition["replicas"]) (replica["healthy"].get<bool>() ? healthy : unhealthy) += 1;
    const std::string id = std::to_string(partition["partition"].get<uint32_t>());
    replicas_.Add({{"partition", id}, {"state", "healthy"}}).Set(healthy);
    replicas_.Add({{"partition", id}, {"state", "unhealthy"}}).Set(unhealthy);
  }
  const uint64_t dns_failures = cluster_.dns_failures();
  dns_failures_.Increment(static_cast<double>(dns_failures - reported_dns_failures_));
  reported_dns_failures_ = dns_failures;
  if (server_stats_) {
    const http::ServerStats server = server_stats_();
    connections_open_.Set(static_cast<double>(server.connections_open));
    connections_total_.Increment(static_cast<double>(server.connections_total - reported_server_.connections_total));
    connections_refused_.Increment(
        static_cast<double>(server.connections_refused - reported_server_.connections_refused));
    connection_timeouts_.Increment(static_cast<double>(server.timeouts - reported_server_.timeouts));
    if (server.bodies_refused > reported_server_.bodies_refused) {
      rejected_.Add({{"reason", "body_budget"}})
          .Increment(static_cast<double>(server.bodies_refused - reported_server_.bodies_refused));
    }
    reported_server_ = server;
  }
  return {200, "text/plain; version=0.0.4", metrics_text(*registry_)};
}

SearchApi::~SearchApi() {
  std::vector<AfterWaiter> left;
  {
    std::lock_guard<std::mutex> lock(after_mutex_);
    after_stop_ = true;
    left.swap(after_waiters_);
  }
  after_wake_.notify_all();
  if (after_thread_.joinable()) after_thread_.join();
  for (AfterWaiter& waiter : left) waiter.respond(error(503, "the broker is stopping"));
}

void SearchApi::wait_for_writes(const http::Request& request, uint64_t after, http::Respond respond) {
  std::lock_guard<std::mutex> lock(after_mutex_);
  if (after_stop_) return respond(error(503, "the broker is stopping"));
  if (!after_thread_.joinable()) after_thread_ = std::thread([this] { watch_writes(); });
  after_waiters_.push_back({request, after, std::move(respond), Clock::now() + options_.after_wait});
  after_wake_.notify_one();
}

void SearchApi::watch_writes() {
  std::unique_lock<std::mutex> lock(after_mutex_);
  while (!after_stop_) {
    after_wake_.wait_for(lock, std::chrono::milliseconds(5));
    std::vector<AfterWaiter> ready, late;
    std::string behind;
    for (auto it = after_waiters_.begin(); it != after_waiters_.end();) {
      if (cluster_.serves_writes(it->after, &behind)) {
        ready.push_back(std::move(*it));
      } else if (Clock::now() >= it->deadline) {
        late.push_back(std::move(*it));
      } else {
        ++it;
        continue;
      }
      it = after_waiters_.erase(it);
    }
    if (ready.empty() && late.empty()) continue;
    lock.unlock();
    for (AfterWaiter& waiter : ready) handle(waiter.request, std::move(waiter.respond));
    for (AfterWaiter& waiter : late) {
      cluster_.serves_writes(waiter.after, &behind);
      respond_counted(waiter.request.path == "/search" ? "/search" : "/indexes", waiter.respond,
                      error(504, "the writes up to " + std::to_string(waiter.after) + " were not searchable within " +
                                     std::to_string(options_.after_wait.count()) + " ms: " + behind));
    }
    lock.lock();
  }
}

prometheus::Histogram& SearchApi::leaf_latency(const std::string& replica) {
  std::lock_guard<std::mutex> lock(leaf_latency_mutex_);
  auto it = leaf_latency_by_replica_.find(replica);
  if (it == leaf_latency_by_replica_.end()) {
    it = leaf_latency_by_replica_.emplace(replica, &leaf_latency_.Add({{"leaf", replica}}, latency_buckets())).first;
  }
  return *it->second;
}

void SearchApi::search(const http::Request& request, http::Respond respond) {
  const auto reply = [this, respond](http::Response response) {
    respond_counted("/search", respond, std::move(response));
  };
  const auto start = Clock::now();
  if (request.method != "GET" && request.method != "POST") {
    http::Response refused = error(405, "use GET or POST");
    refused.headers.emplace_back("Allow", "GET, HEAD, POST");  // a 405 names them (RFC 9110 §15.5.6)
    return reply(std::move(refused));
  }
  SearchParams params;
  if (auto refused = read_search_params(request, options_.max_k, params)) return reply(std::move(*refused));
  const std::string& q = params.q;
  const size_t k = params.k, offset = params.offset;
  if (q.empty()) return reply(error(400, "the query q is empty"));
  // Read-your-writes: answered once every partition serves the writes up to `after`, by the waiter
  // (a search again, then), or 504 when that takes past --after-wait-ms.
  if (params.after > 0 && !cluster_.serves_writes(params.after)) return wait_for_writes(request, params.after, respond);
  if (q.size() > options_.max_query_bytes)
    return reply(error(400, "the query is longer than " + std::to_string(options_.max_query_bytes) + " bytes"));
  if (!utf8_valid(q)) return reply(error(400, "the query is not valid UTF-8"));
  QueryMode mode;
  try {
    mode = parse_query_mode(params.mode);
  } catch (const std::exception&) {
    return reply(error(400, "mode must be and, or or andor"));
  }
  const std::string mode_text(to_string(mode));
  // Distinct terms with how often the query holds each: a term said twice weighs more (BM25's
  // query-term frequency), and the cache tells such queries apart.
  // The query syntax (+required, -excluded: query_syntax.hpp), or words only with syntax=plain.
  Query query;
  try {
    Analyzer& analyzer = analyzer_for(cluster_.analyzer());
    query = params.syntax ? analyze_query_syntax(q, analyzer, mode, k) : Query(analyzer.analyze_query(q), mode, k);
  } catch (const QuerySyntaxError& e) {
    return reply(error(400, e.what()));
  }
  const std::vector<QueryTerm> terms = distinct_terms(query);
  if (terms.empty()) return reply(error(400, "the query has no searchable terms"));
  if (query.has_phrases() && !cluster_.keeps_positions()) {
    return reply(error(400,
                       "phrase queries (\"…\") need word positions, which this index does not keep (built with "
                       "--no-positions); search the words without quotes"));
  }
  std::string filter;  // the filters over the index's columns, checked, as the leaves read them
  if (auto refused = read_filters_and_facets(params, cluster_.columns(), filter)) return reply(error(400, *refused));
  size_t words = terms.size();
  for (const std::vector<std::string>& group : query.excluded) words += group.size();
  for (const auto* phrases : {&query.phrases, &query.excluded_phrases})
    for (const std::vector<std::string>& phrase : *phrases) words += phrase.size();
  if (words > options_.max_terms) {
    return reply(error(400, "the query has " + std::to_string(words) + " distinct and excluded terms; at most " +
                                std::to_string(options_.max_terms) + " are accepted (--max-terms)"));
  }
  std::string key;
  for (const QueryTerm& term : terms) key += term.text + ' ' + std::to_string(term.count) + ' ';
  if (query.constrained()) {  // terms hold no white space or control characters (the analyzer's)
    key += "|+";
    for (const std::string& term : query.required) key += term + ' ';
    for (const std::vector<std::string>& group : query.excluded) {
      key += "|-";
      for (const std::string& term : group) key += term + ' ';
    }
    for (const std::vector<std::string>& phrase : query.phrases) {
      key += "|\"";
      for (const std::string& term : phrase) key += term + ' ';
    }
    for (const std::vector<std::string>& phrase : query.excluded_phrases) {
      key += "|-\"";
      for (const std::string& term : phrase) key += term + ' ';
    }
  }
  key += "|" + mode_text + "|" + std::to_string(k) + "|" + std::to_string(offset) + "|" +
         std::to_string(cluster_.generation_signature());
  if (!filter.empty() || !params.facets.empty()) {  // filter_text quotes values: no '|' ambiguity matters
    key += "|F" + filter + "|";
    for (const std::string& field : params.facets) key += field + ',';
    key += std::to_string(params.facet_size);
  }
  if (params.fetches()) {  // what the fetch phase adds to the answer
    key += "|" + std::to_string(params.source) + "|" + params.snippet + "|" + std::to_string(params.snippet_length) +
           "|" + params.highlight_pre + "|" + params.highlight_post;
  }
  // `ms`: the answer's time, where the caller has taken it already (its stages add up to it).
  const auto answer = [this, start](const std::string& core, bool cached, double ms = -1) {
    if (ms < 0) ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    latency_.Observe(ms / 1000);
    char head[96];
    std::snprintf(head, sizeof head, R"({"took_ms":%.3f,"cached":%s,)", ms, cached ? "true" : "false");
    return http::Response{200, "application/json", head + core.substr(1)};
  };
  if (auto hit = cache_.get(key)) return reply(answer(*hit, true));

  // Overload is refused at once: a query that would wait past its deadline helps nobody.
  if (fan_out_.in_flight() >= options_.max_in_flight) {
    return reply(refuse("in_flight", "overloaded: " + std::to_string(options_.max_in_flight) +
                                         " queries in flight (--max-in-flight); retry"));
  }
  if (const auto partition = cluster_.saturated_partition()) {
    return reply(refuse("saturated", "overloaded: every replica of partition " + std::to_string(*partition) + " has " +
                                         std::to_string(options_.max_outstanding) +
                                         " requests outstanding (--max-outstanding); retry"));
  }
  // A page past the first: every leaf returns its top offset + k, and the merge keeps the
  // global top offset + k, of which the page is the last k (ties go to the lower docID, so pages
  // tile the ranking without gaps or repeats).
  FanOutRequest fan_out_request{terms, mode, offset + k, options_.timeout};
  fan_out_request.required = std::move(query.required);
  fan_out_request.excluded = std::move(query.excluded);
  fan_out_request.phrases = query.phrases;
  fan_out_request.excluded_phrases = std::move(query.excluded_phrases);
  fan_out_request.filter = std::move(filter);
  fan_out_request.facets = params.facets;
  fan_out_request.facet_values = kFacetValuesPerPartition;
  fan_out_request.generation = cluster_.read_generation(), fan_out_request.after = params.after;
  auto shown =
      std::make_shared<const ShownSearch>(ShownSearch{params, terms, std::move(query.phrases), mode_text, key, start});
  // Runs on this I/O thread's loop once every partition answered or the deadline passed; with
  // stored documents or snippets asked for, the page's hits are fetched (fetch_phase.hpp) first.
  auto done = [this, reply, answer, shown](FanOutResult result) {
    retries_.Increment(result.retries);
    if (result.partial) partials_.Increment();
    auto searched = std::make_shared<FanOutResult>(std::move(result));
    const std::vector<const BrokerHit*> ranked = merge_hits(*searched, shown->params.offset + shown->params.k);
    const std::vector<const BrokerHit*> page(
        ranked.begin() + static_cast<std::ptrdiff_t>(std::min(shown->params.offset, ranked.size())), ranked.end());
    const auto finish = [this, reply, answer, shown, searched, page](const FanOutResult* fetched) {
      const FetchedDocuments documents = fetched ? FetchedDocuments(*fetched) : FetchedDocuments(FanOutResult{});
      const bool partial = searched->partial || (fetched && documents.partial());
      const std::string body = search_body(*shown, *searched, page, fetched ? &documents : nullptr, partial);
      const double ms = std::chrono::duration<double, std::milli>(Clock::now() - shown->start).count();
      if (!partial) {
        cache_.put(shown->key, body);  // partial answers are never cached
        if (!fetched) observe_stages(*searched, ms);
      }
      reply(answer(body, false, ms));
    };
    std::shared_ptr<const DocumentsPlan> plan = plan_fetch(page, shown->params, shown->terms, shown->phrases);
    if (!plan) return finish(nullptr);
    const auto left =
        options_.timeout - std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - shown->start);
    FanOutRequest fetch{{}, QueryMode::kOr, 0, std::max(left, std::chrono::milliseconds(1)), std::move(plan)};
    fetch.generation = searched->generation;  // the hits' docIDs are of it
    fan_out_.submit(std::move(fetch), [finish](FanOutResult fetched) { finish(&fetched); });
  };
  fan_out_.submit(std::move(fan_out_request), std::move(done));
}

std::string SearchApi::search_body(const ShownSearch& shown, const FanOutResult& result,
                                   const std::vector<const BrokerHit*>& page, const FetchedDocuments* fetched,
                                   bool partial) {
  // Keys in alphabetical order, as the answers were written before (nlohmann's objects).
  JsonWriter json;
  json.begin_object();
  uint64_t matches = 0;
  for (const PartitionOutcome& outcome : result.partitions) matches += outcome.and_matches;
  json.key("and_matches").value(matches);
  const bool facets = !shown.params.facets.empty();
  if (facets) write_facets(json, result, shown.params);
  json.key("hits").begin_array();
  for (const BrokerHit* hit : page) write_hit(json, *hit, fetched, shown.params);
  json.end_array().key("k").value(static_cast<uint64_t>(shown.params.k));
  if (facets) json.key("matches").value(facet_matches(result));
  json.key("mode").value(shown.mode_text);
  json.key("offset")
      .value(static_cast<uint64_t>(shown.params.offset))
      .key("partial")
      .value(partial)
      .key("partitions")
      .begin_array();
  for (const PartitionOutcome& outcome : result.partitions) {
    json.begin_object().key("attempts").value(outcome.attempts);
    if (!outcome.error.empty()) json.key("error").value(outcome.error);
    json.key("partition").value(static_cast<uint64_t>(outcome.partition)).key("replica").value(outcome.replica);
    json.key("status").value(outcome.status).key("took_ms").value(outcome.took_ms).end_object();
    if (outcome.status == "ok") leaf_latency(outcome.replica).Observe(outcome.took_ms / 1000);
  }
  json.end_array().key("query").value(shown.params.q).key("term_counts").begin_array();
  for (const QueryTerm& term : shown.terms) json.value(static_cast<uint64_t>(term.count));
  json.end_array().key("terms").begin_array();
  for (const QueryTerm& term : shown.terms) json.value(term.text);
  json.end_array().end_object();
  return json.take();
}

void SearchApi::get_document(const http::Request& request, const std::string& id, http::Respond respond) {
  const auto reply = [this, respond](http::Response response) {
    respond_counted("/indexes", respond, std::move(response));
  };
  if (id.size() > 512) return reply(error(400, "not a document id: more than 512 bytes"));
  uint64_t after = 0;
  for (const auto& [name, value] : request.query) {
    if (name != "after") return reply(error(400, "unknown parameter '" + name + "' (accepted: after)"));
    if (value.empty() || value.size() > 19 || value.find_first_not_of("0123456789") != std::string::npos)
      return reply(error(400, "after must be a write's sequence, a whole number"));
    after = std::stoull(value);
  }
  // Read-your-writes, as for a search: answered once every partition serves the writes up to `after`.
  if (after > 0 && !cluster_.serves_writes(after)) return wait_for_writes(request, after, std::move(respond));
  if (!cluster_.ready())
    return reply(
        {503, "application/json", error(503, "no leaf serves the index yet; retry").body, {{"Retry-After", "1"}}});
  if (fan_out_.in_flight() >= options_.max_in_flight) {
    return reply(refuse("in_flight", "overloaded: " + std::to_string(options_.max_in_flight) +
                                         " queries in flight (--max-in-flight); retry"));
  }
  // Asked of every partition: a document's partition follows from how the generation was built.
  auto plan = std::make_shared<DocumentsPlan>();
  plan->ids = {id};
  plan->source = true;
  FanOutRequest fetch{{}, QueryMode::kOr, 0, options_.timeout, std::move(plan)};
  fan_out_.submit(std::move(fetch), [reply, id](FanOutResult result) {
    std::string silent;
    for (const PartitionOutcome& outcome : result.partitions) {
      if (outcome.status != "ok") silent += (silent.empty() ? "" : ", ") + std::to_string(outcome.partition);
      for (const FetchedHit& hit : outcome.fetched) {
        if (!hit.found) continue;
        if (hit.source.empty()) {
          return reply({200, "application/json",
                        nlohmann::json{{"id", id}, {"stored", false}}.dump(-1, ' ', false,
                                                                           nlohmann::json::error_handler_t::replace)});
        }
        return reply({200, "application/json", std::string(hit.source)});
      }
    }
    if (!silent.empty()) {
      return reply({503,
                    "application/json",
                    error(503, "partitions " + silent + " did not answer: the document may be there; retry").body,
                    {{"Retry-After", "1"}}});
    }
    reply(error(404, "no document with id \"" + id + "\""));
  });
}

}  // namespace warp
