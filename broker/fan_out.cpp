#include "broker/fan_out.hpp"

#include <utility>  // before Boost.Asio with GCC 12 in C++20

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstdio>
#include <map>
#include <zmq.hpp>

#include "broker/direct_leaf_link.hpp"
#include "broker/zmq_leaf_link.hpp"
#include "common/http/io_pool.hpp"
#include "common/protocol/search.capnp.h"
#include "common/transfer/capnp_frames.hpp"
#include "common/util/status.hpp"

namespace warp {
namespace {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

std::atomic<uint64_t> next_query_id{1};

struct Attempt {
  std::shared_ptr<Replica> replica;  // kept alive even if discovery retires it meanwhile
  Clock::time_point sent;
  const LeafLink* via = nullptr;  // the link it went over (a connection of it lost moves it at once)
};

// One query in flight: its outcome per partition and the attempt each partition waits on.
struct InFlight {
  FanOutRequest request;
  FanOutDone done;
  Clock::time_point start, deadline;
  Clock::duration attempt_timeout;
  FanOutResult result;
  std::map<uint32_t, size_t> slot;  // partition → index in result.partitions
  std::map<uint32_t, std::vector<const Replica*>> tried;
  std::map<uint32_t, Attempt> pending;
};

}  // namespace

// One loop's part of the fan-out: its links to the leaves, its queries in flight and one timer for
// the next attempt timeout or deadline among them. Runs only on its loop.
struct FanOut::Worker {
  Worker(Cluster& cluster, asio::io_context& io, zmq::context_t& context, std::atomic<size_t>& in_flight, bool direct,
         FanOut::Counts& counts)
      : cluster(cluster), io(io), in_flight(in_flight), timer(io), sent_by_path(counts) {
    zmq_link = std::make_unique<ZmqLeafLink>(events_for(), cluster, io, context);
    if (direct) direct_link = std::make_unique<DirectLeafLink>(events_for(), cluster, io);
    follow_membership();
  }

  // Replies from either link go to on_frame; a lost connection moves its link's attempts.
  LeafLink::Events events_for() {
    return {[this](std::string_view reply) { on_frame(reply); },
            [this](const std::string& endpoint) { abandon(endpoint, direct_link.get()); }};
  }

  // Connections to every current replica, so queries find live ones; those of retired replicas
  // closed (an attempt still waiting on one times out and goes to another replica).
  void follow_membership() {
    const uint64_t version = cluster.membership_version();
    if (version == membership_version && followed) return;
    membership_version = version;
    followed = true;
    const std::vector<std::string> endpoints = cluster.endpoints();
    zmq_link->follow(endpoints);
    if (direct_link) direct_link->follow(endpoints);
  }

  // The direct search path where the leaf offers one and its connection is ready, else ZeroMQ.
  LeafLink& link_for(const Replica& replica) {
    if (direct_link && direct_link->ready(replica)) return *direct_link;
    return *zmq_link;
  }

  // Attempts waiting on `via`'s connection to `endpoint` go to another replica at once.
  void abandon(const std::string& endpoint, const LeafLink* via) {
    std::vector<std::pair<uint64_t, uint32_t>> lost;
    for (auto& [id, query] : queries) {
      for (const auto& [partition, attempt] : query.pending) {
        if (attempt.via == via && attempt.replica->endpoint == endpoint) lost.emplace_back(id, partition);
      }
    }
    for (const auto& [id, partition] : lost) {
      auto found = queries.find(id);
      if (found == queries.end()) continue;
      InFlight& query = found->second;
      auto it = query.pending.find(partition);
      // Gone, or already sent elsewhere by a send() above (a nested loss): nothing to move.
      if (it == query.pending.end() || it->second.via != via || it->second.replica->endpoint != endpoint) continue;
      --it->second.replica->outstanding;
      query.pending.erase(it);
      PartitionOutcome& outcome = query.result.partitions[query.slot[partition]];
      outcome.status = "error";
      outcome.error = "connection to " + endpoint + " lost";
      send(id, query, partition);
      if (query.pending.empty()) {
        // Finished on the loop's next turn, not here: this may run inside send() for this very
        // query (a leaf serving several of its partitions), which still holds it.
        asio::post(io, [this, query_id = id] {  // a copy: clang cannot capture a structured binding
          auto found = queries.find(query_id);
          if (found != queries.end() && found->second.pending.empty()) finish(query_id);
        });
      } else {
        schedule(Clock::now() + query.attempt_timeout);
      }
    }
  }

  // A reply from either link: a LeafReply.
  void on_frame(std::string_view body) {
    try {
      auto reader = std::make_shared<transfer::FrameReader>(body.data(), body.size());
      const auto reply = reader->root<protocol::LeafReply>();
      if (reply.isSearch()) {
        on_reply(reply.getSearch(), std::move(reader));
      } else if (reply.isDocuments()) {
        on_documents(reply.getDocuments(), std::move(reader));
      }
    } catch (const std::exception&) {
      // malformed: counts as silence, the attempt times out
    }
  }

  void start(FanOutRequest request, FanOutDone done) {
    follow_membership();
    const uint64_t id = next_query_id++;
    InFlight& query = queries[id];
    query.start = Clock::now();
    query.deadline = query.start + request.timeout;
    // A replica silent for this long is given up for another one, while time remains.
    query.attempt_timeout = std::max<Clock::duration>(request.timeout / 3, std::chrono::milliseconds(50));
    query.request = std::move(request);
    query.result.generation = query.request.generation;
    query.done = std::move(done);
    // A search asks every partition; a fetch only those holding its hits (a read by id: all).
    std::vector<uint32_t> partitions = cluster.partitions();
    if (query.request.documents && !query.request.documents->hits.empty()) {
      partitions.clear();
      for (const auto& [partition, hits] : query.request.documents->hits) partitions.push_back(partition);
    }
    for (uint32_t partition : partitions) {
      query.slot[partition] = query.result.partitions.size();
      query.result.partitions.push_back({});
      query.result.partitions.back().partition = partition;
    }
    for (uint32_t partition : partitions) send(id, query, partition);
    if (query.pending.empty()) {
      finish(id);
    } else {
      schedule(query.start + query.attempt_timeout);
    }
  }

  // The timer fires at `when` if that is before what it waits for now.
  void schedule(Clock::time_point when) {
    if (timer_armed && when >= timer_at) return;
    timer_armed = true;
    timer_at = when;
    timer.expires_at(when);
    timer.async_wait([this](boost::system::error_code ec) {
      if (ec) return;  // re-armed earlier, or the loop stops
      timer_armed = false;
      const Clock::time_point now = Clock::now();
      expire(now);
      // Attempts past their timeout that stay (no other replica) wait for the deadline.
      Clock::time_point next = Clock::time_point::max();
      for (const auto& [id, query] : queries) {
        next = std::min(next, query.deadline);
        for (const auto& [partition, attempt] : query.pending) {
          if (attempt.sent + query.attempt_timeout > now) next = std::min(next, attempt.sent + query.attempt_timeout);
        }
      }
      if (next != Clock::time_point::max()) schedule(next);
    });
  }
  // To the best replica of `partition` not tried yet; none left: the partition is settled.
  void send(uint64_t id, InFlight& query, uint32_t partition) {
    PartitionOutcome& outcome = query.result.partitions[query.slot[partition]];
    for (;;) {
      std::shared_ptr<Replica> replica = cluster.choose(partition, query.tried[partition], query.request.generation);
      if (replica == nullptr) {
        if (outcome.attempts == 0) outcome.status = "unavailable";
        query.pending.erase(partition);
        return;
      }
      query.tried[partition].push_back(replica.get());
      ++outcome.attempts;
      outcome.replica = replica->endpoint;
      if (outcome.attempts > 1) ++query.result.retries;
      capnp::MallocMessageBuilder builder(64);  // a request of a few terms: not capnp's 8 KiB calloc
      const auto left = std::chrono::duration_cast<std::chrono::microseconds>(query.deadline - Clock::now());
      if (query.request.documents) {
        auto documents = builder.initRoot<protocol::LeafRequest>().initDocuments();
        build_documents(documents, *query.request.documents, id, partition, left);
        documents.setGeneration(query.request.generation);
      } else {
        build_search(builder.initRoot<protocol::LeafRequest>().initSearch(), query.request, id, partition, left);
      }
      // Taken before the send: the leaf may read the request before this thread runs again, and its
      // time must lie within the round trip (the stages, search_api.cpp).
      const Clock::time_point sent_at = Clock::now();
      LeafLink& via = link_for(*replica);
      const kj::Array<capnp::word> words = capnp::messageToFlatArray(builder);
      const bool sent = via.send(
          *replica, std::string_view(reinterpret_cast<const char*>(words.asBytes().begin()), words.asBytes().size()));
      ++(&via == direct_link.get() ? sent_by_path.direct : sent_by_path.zmq);
      if (sent) {
        ++replica->outstanding;
        query.pending[partition] = {replica, sent_at, &via};
        return;
      }
      outcome.status = "error";  // no live connection: the next replica at once
      outcome.error = "cannot reach " + replica->endpoint;
    }
  }

  static void build_search(protocol::SearchRequest::Builder search, const FanOutRequest& request, uint64_t id,
                           uint32_t partition, std::chrono::microseconds left) {
    search.setQueryId(id);
    const std::vector<QueryTerm>& terms = request.terms;
    auto list = search.initTerms(static_cast<unsigned>(terms.size()));
    auto counts = search.initTermCounts(static_cast<unsigned>(terms.size()));
    for (size_t i = 0; i < terms.size(); ++i) {
      list.set(static_cast<unsigned>(i), terms[i].text);
      counts.set(static_cast<unsigned>(i), terms[i].count);
    }
    auto required = search.initRequired(static_cast<unsigned>(request.required.size()));
    for (size_t i = 0; i < request.required.size(); ++i) required.set(static_cast<unsigned>(i), request.required[i]);
    auto excluded = search.initExcluded(static_cast<unsigned>(request.excluded.size()));
    for (size_t i = 0; i < request.excluded.size(); ++i) {
      auto group = excluded.init(static_cast<unsigned>(i), static_cast<unsigned>(request.excluded[i].size()));
      for (size_t j = 0; j < request.excluded[i].size(); ++j)
        group.set(static_cast<unsigned>(j), request.excluded[i][j]);
    }
    const auto put_lists = [](auto lists, const std::vector<std::vector<std::string>>& from) {
      for (size_t i = 0; i < from.size(); ++i) {
        auto list = lists.init(static_cast<unsigned>(i), static_cast<unsigned>(from[i].size()));
        for (size_t j = 0; j < from[i].size(); ++j) list.set(static_cast<unsigned>(j), from[i][j]);
      }
    };
    if (!request.phrases.empty())
      put_lists(search.initPhrases(static_cast<unsigned>(request.phrases.size())), request.phrases);
    if (!request.excluded_phrases.empty())
      put_lists(search.initExcludedPhrases(static_cast<unsigned>(request.excluded_phrases.size())),
                request.excluded_phrases);
    if (!request.filter.empty()) search.setFilter(request.filter);
    if (!request.facets.empty()) {
      auto facets = search.initFacets(static_cast<unsigned>(request.facets.size()));
      for (size_t i = 0; i < request.facets.size(); ++i) facets.set(static_cast<unsigned>(i), request.facets[i]);
      search.setFacetValues(request.facet_values);
    }
    const QueryMode mode = request.mode;
    search.setMode(mode == QueryMode::kAnd  ? protocol::Mode::AND
                   : mode == QueryMode::kOr ? protocol::Mode::OR
                                            : protocol::Mode::AND_OR);
    search.setK(static_cast<uint32_t>(request.k));
    search.setPartition(partition);
    search.setDeadlineMicros(static_cast<uint64_t>(std::max<int64_t>(0, left.count())));
    search.setGeneration(request.generation);
    search.setAfter(request.after);
  }

  static void build_documents(protocol::DocumentsRequest::Builder out, const DocumentsPlan& plan, uint64_t id,
                              uint32_t partition, std::chrono::microseconds left) {
    out.setQueryId(id);
    out.setPartition(partition);
    out.setDeadlineMicros(static_cast<uint64_t>(std::max<int64_t>(0, left.count())));
    auto found = plan.hits.find(partition);
    if (found != plan.hits.end()) {
      auto docs = out.initDocs(static_cast<unsigned>(found->second.size()));
      auto ids = out.initIds(static_cast<unsigned>(found->second.size()));
      for (unsigned i = 0; i < found->second.size(); ++i) {
        docs.set(i, found->second[i].first);
        ids.set(i, capnp::Text::Reader(found->second[i].second.data(), found->second[i].second.size()));
      }
    } else {
      auto ids = out.initIds(static_cast<unsigned>(plan.ids.size()));
      for (unsigned i = 0; i < plan.ids.size(); ++i)
        ids.set(i, capnp::Text::Reader(plan.ids[i].data(), plan.ids[i].size()));
    }
    out.setSource(plan.source);
    auto terms = out.initTerms(static_cast<unsigned>(plan.terms.size()));
    for (unsigned i = 0; i < plan.terms.size(); ++i) terms.set(i, plan.terms[i]);
    auto phrases = out.initPhrases(static_cast<unsigned>(plan.phrases.size()));
    for (unsigned i = 0; i < plan.phrases.size(); ++i) {
      auto words = phrases.init(i, static_cast<unsigned>(plan.phrases[i].size()));
      for (unsigned j = 0; j < plan.phrases[i].size(); ++j) words.set(j, plan.phrases[i][j]);
    }
    out.setSnippetField(plan.field);
    out.setSnippetLength(plan.length);
    out.setPreTag(plan.pre_tag);
    out.setPostTag(plan.post_tag);
  }

  // A reply of `partition` to query `id`: its outcome settled ok, for the caller to fill in; null
  // where the reply is late or an error (then sent to another replica while time remains).
  PartitionOutcome* settle(uint64_t id, uint32_t partition, capnp::Text::Reader error, uint64_t leaf_micros) {
    auto found = queries.find(id);
    if (found == queries.end()) return nullptr;  // a late reply to a finished query
    InFlight& query = found->second;
    auto it = query.pending.find(partition);
    if (it == query.pending.end()) return nullptr;
    std::shared_ptr<Replica> replica = it->second.replica;
    --replica->outstanding;
    const Clock::time_point sent = it->second.sent;
    PartitionOutcome& outcome = query.result.partitions[query.slot[partition]];
    query.pending.erase(it);
    if (error.size() > 0) {
      outcome.status = "error";
      outcome.error = error.cStr();
      send(id, query, partition);  // another replica while time remains
      schedule(Clock::now() + query.attempt_timeout);
      return nullptr;
    }
    const Clock::time_point now = Clock::now();
    const double ms = std::chrono::duration<double, std::milli>(now - query.start).count();
    cluster.record_latency(*replica, ms);
    outcome.round_trip_ms = std::chrono::duration<double, std::milli>(now - sent).count();
    outcome.leaf_ms = static_cast<double>(leaf_micros) / 1000;
    outcome.status = "ok";
    outcome.replica = replica->endpoint;
    outcome.error.clear();
    outcome.took_ms = ms;
    return &outcome;
  }

  void finish_if_answered(uint64_t id) {
    auto found = queries.find(id);
    if (found != queries.end() && found->second.pending.empty()) finish(id);
  }

  static std::string_view text(capnp::Text::Reader t) { return std::string_view(t.cStr(), t.size()); }

  void on_reply(protocol::SearchResponse::Reader response, std::shared_ptr<const transfer::FrameReader> reader) {
    const uint64_t id = response.getQueryId();
    const uint32_t partition = response.getPartition();
    if (PartitionOutcome* outcome = settle(id, partition, response.getError(), response.getLeafMicros())) {
      outcome->and_matches = response.getAndMatches();
      outcome->generation = response.getGeneration();
      outcome->facet_matches = response.getFacetMatches();
      outcome->facet_error = text(response.getFacetError());
      for (auto field : response.getFacets()) {
        PartitionOutcome::Facet& facet = outcome->facets.emplace_back();
        facet.field = text(field.getField());
        facet.others = field.getOthers();
        facet.other_values = field.getOtherValues();
        for (auto value : field.getValues()) facet.values.emplace_back(text(value.getValue()), value.getCount());
      }
      outcome->hits.reserve(response.getHits().size());
      for (auto hit : response.getHits()) {
        outcome->hits.push_back({hit.getDoc(), hit.getScore(), text(hit.getExternalId()), text(hit.getTitle()),
                                 text(hit.getUrl()), partition, hit.getWritten()});
      }
      outcome->reply = std::move(reader);  // keeps the hits' strings
    }
    finish_if_answered(id);
  }

  void on_documents(protocol::DocumentsReply::Reader response, std::shared_ptr<const transfer::FrameReader> reader) {
    const uint64_t id = response.getQueryId();
    if (PartitionOutcome* outcome = settle(id, response.getPartition(), response.getError(), 0)) {
      outcome->generation = response.getGeneration();
      outcome->fetched.reserve(response.getDocuments().size());
      for (auto doc : response.getDocuments()) {
        outcome->fetched.push_back({doc.getFound(), doc.getHasSnippet(), doc.getDoc(), text(doc.getId()),
                                    text(doc.getSource()), text(doc.getSnippet())});
      }
      outcome->reply = std::move(reader);  // keeps the documents' strings
    }
    finish_if_answered(id);
  }

  // Attempts silent too long go to another replica; queries past their deadline end partial.
  void expire(Clock::time_point now) {
    std::vector<uint64_t> finished;
    for (auto& [id, query] : queries) {
      if (now >= query.deadline) {
        finished.push_back(id);
        continue;
      }
      std::vector<uint32_t> stale;
      for (const auto& [partition, attempt] : query.pending) {
        if (now - attempt.sent > query.attempt_timeout) stale.push_back(partition);
      }
      for (uint32_t partition : stale) {
        if (!cluster.has_other(partition, query.tried[partition])) continue;  // no other replica: keep waiting
        auto attempt = query.pending.find(partition);
        if (attempt == query.pending.end()) continue;  // moved meanwhile (a direct link lost by a send above)
        --attempt->second.replica->outstanding;
        query.pending.erase(attempt);
        send(id, query, partition);
      }
      if (query.pending.empty()) finished.push_back(id);
    }
    for (uint64_t id : finished) finish(id);
  }

  void release(InFlight& query) {
    for (auto& [partition, attempt] : query.pending) --attempt.replica->outstanding;
    query.pending.clear();
  }

  void finish(uint64_t id) {
    auto found = queries.find(id);
    if (found == queries.end()) return;
    InFlight query = std::move(found->second);
    queries.erase(found);
    release(query);
    for (const PartitionOutcome& outcome : query.result.partitions) {
      query.result.partial = query.result.partial || outcome.status != "ok";
    }
    --in_flight;
    try {
      query.done(std::move(query.result));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "warp-broker: fan-out callback: %s\n", e.what());
    }
  }

  Cluster& cluster;
  asio::io_context& io;
  std::atomic<size_t>& in_flight;
  asio::steady_timer timer;
  FanOut::Counts& sent_by_path;
  bool timer_armed = false;
  Clock::time_point timer_at;
  std::unique_ptr<ZmqLeafLink> zmq_link;
  std::unique_ptr<DirectLeafLink> direct_link;  // null: the direct search path is off
  uint64_t membership_version = 0;
  bool followed = false;
  std::unordered_map<uint64_t, InFlight> queries;
};

// ZeroMQ I/O threads: by default one per eight event loops (at least one). Every message to or
// from a leaf crosses one of them, and each wake-up of one costs more than the message's work, so
// fewer, busier I/O threads carry a query for less CPU than many idle ones.
FanOut::FanOut(Cluster& cluster, http::IoPool& pool, size_t zmq_io_threads, bool direct)
    : cluster_(cluster),
      pool_(pool),
      context_(std::make_unique<zmq::context_t>(
          static_cast<int>(zmq_io_threads > 0 ? zmq_io_threads : std::max<size_t>(1, (pool.size() + 7) / 8)))) {
  for (size_t i = 0; i < pool.size(); ++i) {
    workers_.push_back(std::make_unique<Worker>(cluster, pool.context(i), *context_, in_flight_, direct, counts_));
  }
  // Sockets to discovered replicas are connected as soon as they appear, before the status poll
  // finds them healthy, so the first query sent to one finds a live connection.
  const auto follow = [this] {
    for (auto& worker : workers_) asio::post(worker->io, [w = worker.get()] { w->follow_membership(); });
  };
  cluster.on_membership_change(follow);
  follow();  // and whatever changed before the callback was in place
}

FanOut::~FanOut() {
  cluster_.on_membership_change({});
  for (auto& worker : workers_) {
    for (auto& [id, query] : worker->queries) worker->release(query);
  }
}

void FanOut::submit(FanOutRequest request, FanOutDone done) {
  ++in_flight_;
  const int current = pool_.current();
  if (current >= 0) return workers_[static_cast<size_t>(current)]->start(std::move(request), std::move(done));
  Worker& worker = *workers_[next_worker_++ % workers_.size()];
  asio::post(worker.io, [&worker, request = std::move(request), done = std::move(done)]() mutable {
    worker.start(std::move(request), std::move(done));
  });
}

std::vector<const BrokerHit*> merge_hits(const FanOutResult& result, size_t k) {
  std::vector<const BrokerHit*> all;  // pointers: the hits' strings are not copied
  for (const PartitionOutcome& outcome : result.partitions) {
    for (const BrokerHit& hit : outcome.hits) all.push_back(&hit);
  }
  const auto better = [](const BrokerHit* a, const BrokerHit* b) {
    return a->score > b->score || (a->score == b->score && a->doc < b->doc);
  };
  // Only a written hit can have a second copy: compared with the others (rarely any to compare).
  std::vector<const BrokerHit*> older;
  for (const BrokerHit* hit : all) {
    if (!hit->written || result.partitions.size() < 2) continue;
    for (const BrokerHit* other : all)
      if (other != hit && other->id == hit->id && other->doc < hit->doc) older.push_back(other);
  }
  if (!older.empty())
    std::erase_if(all, [&](const BrokerHit* hit) { return std::find(older.begin(), older.end(), hit) != older.end(); });
  const size_t keep = std::min(k, all.size());
  std::partial_sort(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(keep), all.end(), better);
  all.resize(keep);
  return all;
}

}  // namespace warp
