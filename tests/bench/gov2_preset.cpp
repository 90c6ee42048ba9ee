#include "tests/bench/gov2_preset.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <map>
#include <random>
#include <thread>

#include "common/codec/codec.hpp"
#include "common/index/index_builder.hpp"

namespace warp::synthetic {
namespace {

struct TermPlan {
  uint32_t rank = 0;
  uint64_t df = 0;
};

uint64_t zipf_df(double scale, uint32_t rank, uint32_t documents) {
  return std::max<uint64_t>(1, std::min<uint64_t>(static_cast<uint64_t>(scale / rank), documents * 4ull / 5));
}

}  // namespace

Gov2Collection make_gov2_like(const Gov2Params& params) {
  std::mt19937_64 rng(params.seed);
  // The log: 1–5 terms per query (mean 2.9), ranks log-uniform in [2, max_rank].
  std::discrete_distribution<int> length_of({0, 10, 30, 30, 20, 10});
  std::uniform_real_distribution<double> log_rank(std::log(2.0), std::log(static_cast<double>(params.max_rank)));
  std::vector<std::vector<uint32_t>> rank_queries(params.queries);
  for (auto& q : rank_queries) {
    const int n = length_of(rng);
    while (static_cast<int>(q.size()) < n) {
      const auto r = static_cast<uint32_t>(std::exp(log_rank(rng)));
      if (std::find(q.begin(), q.end(), r) == q.end()) q.push_back(r);
    }
  }
  // Calibrate the Zipf scale (df of rank r = scale / r) to the target postings per query.
  auto mean_postings = [&](double scale) {
    double total = 0;
    for (const auto& q : rank_queries) {
      for (uint32_t r : q) total += static_cast<double>(zipf_df(scale, r, params.documents));
    }
    return total / params.queries;
  };
  double low = 1, high = 1e12;
  for (int i = 0; i < 100; ++i) {
    const double mid = std::sqrt(low * high);
    (mean_postings(mid) < params.postings_per_query ? low : high) = mid;
  }
  const double scale = high;
  std::map<uint32_t, uint64_t> plan;
  for (const auto& q : rank_queries) {
    for (uint32_t r : q) plan[r] = zipf_df(scale, r, params.documents);
  }
  std::vector<TermPlan> terms;
  for (const auto& [rank, df] : plan) terms.push_back({rank, df});

  Gov2Collection out;
  IndexView& view = out.view;
  view.meta.doc_begin = 0;
  view.meta.doc_end = params.documents;
  view.meta.codec = params.codec;
  view.doc_lengths.resize(params.documents);
  std::gamma_distribution<double> length(2.0, params.mean_length / 2.0);
  uint64_t total_length = 0;
  for (uint32_t& len : view.doc_lengths) total_length += len = static_cast<uint32_t>(std::max(1.0, length(rng)));
  view.meta.stats = {params.documents, total_length};
  view.compute_length_norms();

  // Lists in parallel, one term at a time per thread: docIDs by geometric gaps (each document holds
  // the term with probability df/N), frequencies 1 + geometric (mean about 2.9, GOV2's tokens per posting).
  const Codec& codec = codec_by_name(params.codec);
  std::vector<std::vector<uint32_t>> encoded(terms.size());
  std::vector<TermBests> bests(terms.size());  // best postings and rank floors, as PartitionEncoder keeps them
  std::vector<uint32_t> actual_df(terms.size());
  std::atomic<size_t> next{0};
  const unsigned threads = params.threads ? params.threads : std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> workers;
  for (unsigned t = 0; t < threads; ++t) {
    workers.emplace_back([&] {
      std::vector<Posting> postings;
      std::vector<Score> scores;
      for (size_t i = next++; i < terms.size(); i = next++) {
        std::mt19937_64 term_rng(params.seed * 1000003 + terms[i].rank);
        const double p = static_cast<double>(terms[i].df) / params.documents;
        std::geometric_distribution<uint32_t> gap(p);
        std::geometric_distribution<uint32_t> freq(0.35);
        postings.clear();
        for (uint64_t doc = gap(term_rng); doc < params.documents; doc += 1 + static_cast<uint64_t>(gap(term_rng))) {
          postings.push_back({static_cast<DocId>(doc), 1 + freq(term_rng)});
        }
        if (postings.empty()) postings.push_back({static_cast<DocId>(terms[i].rank % params.documents), 1});
        actual_df[i] = static_cast<uint32_t>(postings.size());
        const float weight = bm25_term_weight(bm25_idf(postings.size(), params.documents), view.meta.bm25);
        scores.resize(postings.size());
        for (size_t j = 0; j < postings.size(); ++j)
          scores[j] = bm25_score(weight, postings[j].freq, view.length_norms[postings[j].doc]);
        encoded[i] = encode_posting_list(postings, scores, codec);
        select_term_bests(postings, scores, encoded[i], bests[i]);
      }
    });
  }
  for (auto& w : workers) w.join();
  for (size_t i = 0; i < terms.size(); ++i) {
    TermInfo info{actual_df[i], 0, view.postings.size(), static_cast<uint32_t>(encoded[i].size())};
    keep_term_bests(view, info, bests[i]);
    bests[i] = {};
    view.lexicon["t" + std::to_string(terms[i].rank)] = info;
    view.postings.insert(view.postings.end(), encoded[i].begin(), encoded[i].end());
    std::vector<uint32_t>().swap(encoded[i]);
    out.postings += actual_df[i];
    view.meta.posting_count += actual_df[i];
  }
  view.postings.resize(view.postings.size() + kReadPaddingWords, 0);
  double total = 0;
  for (const auto& q : rank_queries) {
    std::vector<std::string> names;
    for (uint32_t r : q) {
      names.push_back("t" + std::to_string(r));
      total += view.lexicon.at(names.back()).df;
    }
    out.queries.push_back(std::move(names));
  }
  out.postings_per_query = total / params.queries;
  return out;
}

}  // namespace warp::synthetic
