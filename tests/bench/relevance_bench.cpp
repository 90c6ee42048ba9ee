// relevance_bench: nDCG@10, P@10 and MAP of BM25 variants on the judged collections of
// tests/data (Cranfield, CISI), OR of the query's words, top 1000, title and body together,
// Porter2 on every term. The variants (query-term saturation k3, query-time stop words, k1/b, the
// idf form) are scored by a brute-force BM25 over the analyzed documents, so a form the engine
// does not implement can be measured before it is adopted; the engine's own run (CPU processor,
// the index's and the query analysis' defaults) is printed beside the brute force of the same
// settings.
//
//   relevance_bench [--data tests/data] [--collections cranfield,cisi]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <unordered_map>

#include "common/analysis/analyzer.hpp"
#include "common/index/index_builder.hpp"
#include "common/util/flags.hpp"
#include "common/util/service.hpp"
#include "common/util/status.hpp"
#include "indexer/reader/document_reader.hpp"
#include "leaf/query/cpu_query_processor.hpp"
#include "leaf/query/query_log.hpp"
#include "tests/relevance/trec_eval.hpp"

namespace {

using warp::relevance::Scores;

enum class IdfForm { kLucene, kRobertson, kPlain };
const char* name(IdfForm form) {
  return form == IdfForm::kLucene      ? "log(1+(N-df+.5)/(df+.5))"
         : form == IdfForm::kRobertson ? "max(0,log((N-df+.5)/(df+.5)))"
                                       : "log(N/df)";
}

struct Variant {
  float k1 = 0.9f, b = 0.4f, k3 = 1.0f;  // the defaults before the measurement
  IdfForm idf = IdfForm::kLucene;
  bool query_stopwords = false;  // drop English stop words from queries (documents keep them)
};

struct Collection {
  std::string name;
  std::vector<std::string> ids;
  std::vector<uint32_t> lengths;
  std::unordered_map<std::string, std::vector<std::pair<uint32_t, uint32_t>>> postings;  // term → (doc, tf)
  std::vector<warp::SourceDocument> documents;
  std::vector<warp::QueryLine> queries;
  warp::relevance::Qrels qrels;
  double average_length = 0;
};

Collection load(const std::string& dir, const std::string& name) {
  Collection c;
  c.name = name;
  warp::ReadReport report;
  c.documents = warp::read_documents({dir + "/docs.jsonl"}, report);
  warp::Analyzer analyzer;
  uint64_t total = 0;
  for (const warp::SourceDocument& doc : c.documents) {
    std::vector<std::string> terms = analyzer.analyze(doc.title);
    analyzer.analyze(doc.body, terms);
    std::map<std::string, uint32_t> counts;
    for (const std::string& t : terms) ++counts[t];
    const uint32_t d = static_cast<uint32_t>(c.ids.size());
    for (const auto& [term, tf] : counts) c.postings[term].push_back({d, tf});
    c.ids.push_back(doc.external_id);
    c.lengths.push_back(static_cast<uint32_t>(terms.size()));
    total += terms.size();
  }
  c.average_length = c.ids.empty() ? 1 : static_cast<double>(total) / c.ids.size();
  std::vector<std::string> errors;
  c.queries = warp::read_query_file(dir + "/queries.tsv", errors);
  c.qrels = warp::relevance::read_qrels(dir + "/qrels.txt");
  return c;
}

double idf(IdfForm form, double n, double df) {
  switch (form) {
    case IdfForm::kLucene:
      return std::log(1 + (n - df + 0.5) / (df + 0.5));
    case IdfForm::kRobertson:
      return std::max(0.0, std::log((n - df + 0.5) / (df + 0.5)));
    case IdfForm::kPlain:
      return std::log(n / df);
  }
  return 0;
}

Scores brute_force(const Collection& c, const Variant& v) {
  warp::AnalyzerConfig no_stopwords;
  no_stopwords.remove_stopwords = true;
  warp::Analyzer analyzer, without_stopwords(no_stopwords);
  warp::relevance::Run run;
  const double n = static_cast<double>(c.ids.size());
  std::vector<double> scores(c.ids.size());
  for (const warp::QueryLine& query : c.queries) {
    std::vector<std::string> terms;
    if (v.query_stopwords) terms = without_stopwords.analyze(query.text);
    if (terms.empty()) terms = analyzer.analyze(query.text);  // a query of stop words only keeps them
    std::map<std::string, uint32_t> qtf;
    for (const std::string& t : terms) ++qtf[t];
    std::fill(scores.begin(), scores.end(), 0.0);
    for (const auto& [term, count] : qtf) {
      auto it = c.postings.find(term);
      if (it == c.postings.end()) continue;
      const double factor = std::isinf(v.k3) ? count : (v.k3 + 1.0) * count / (v.k3 + count);
      const double weight = idf(v.idf, n, static_cast<double>(it->second.size())) * (v.k1 + 1.0) * factor;
      for (const auto& [doc, tf] : it->second) {
        const double norm = v.k1 * (1 - v.b + v.b * c.lengths[doc] / c.average_length);
        scores[doc] += weight * tf / (tf + norm);
      }
    }
    std::vector<uint32_t> order;
    for (uint32_t d = 0; d < scores.size(); ++d) {
      if (scores[d] > 0) order.push_back(d);
    }
    const size_t keep = std::min<size_t>(1000, order.size());
    std::partial_sort(order.begin(), order.begin() + keep, order.end(), [&](uint32_t a, uint32_t b) {
      return scores[a] > scores[b] || (scores[a] == scores[b] && a < b);
    });
    for (size_t i = 0; i < keep; ++i) run[query.id].push_back(c.ids[order[i]]);
  }
  return warp::relevance::evaluate(c.qrels, run);
}

// The engine itself: an index built with the defaults, queries analyzed as the broker and
// warp-search analyze them, the CPU processor, OR top 1000.
Scores engine(const Collection& c) {
  warp::IndexBuilder builder(warp::BuildOptions{});
  for (const warp::SourceDocument& doc : c.documents) builder.add_document(doc);
  const std::vector<warp::BuiltPartition> built = builder.build();
  warp::CpuQueryProcessor processor(built[0].view);
  warp::Analyzer analyzer;
  warp::relevance::Run run;
  for (const warp::QueryLine& query : c.queries) {
    const warp::Query q(analyzer.analyze_query(query.text), warp::QueryMode::kOr, 1000);
    for (const warp::Hit& hit : processor.search(q).hits) run[query.id].push_back(built[0].view.external_ids[hit.doc]);
  }
  return warp::relevance::evaluate(c.qrels, run);
}

std::string k3_text(float k3) { return std::isinf(k3) ? "inf" : std::to_string(k3).substr(0, 4); }

void row(const std::string& what, const Scores& a, const Scores& b) {
  std::printf("| %-55s | %.4f | %.4f | %.4f | %.4f | %.4f | %.4f |\n", what.c_str(), a.ndcg_at_10, a.precision_at_10,
              a.map, b.ndcg_at_10, b.precision_at_10, b.map);
}

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> parts;
  for (size_t start = 0, end; start <= text.size(); start = end + 1) {
    end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    parts.push_back(text.substr(start, end - start));
  }
  return parts;
}

int run(int argc, char** argv) {
  warp::Flags flags("usage: relevance_bench [--data DIR] [--collections cranfield,cisi]");
  flags.value("data", "tests/data", "the judged test collections (Cranfield, CISI)")
      .value("collections", "cranfield,cisi", "two collections, side by side");
  flags.parse(argc, argv);
  if (flags.help_requested()) {
    std::printf("%s", flags.help_text().c_str());
    return 0;
  }
  const std::vector<std::string> names = split(flags.get("collections"));
  if (names.size() != 2) throw warp::Error("--collections names two collections");
  const Collection a = load(flags.get("data") + "/" + names[0], names[0]);
  const Collection b = load(flags.get("data") + "/" + names[1], names[1]);
  std::printf("| variant (brute-force BM25 unless said) | %s nDCG@10 | P@10 | MAP | %s nDCG@10 | P@10 | MAP |\n",
              a.name.c_str(), b.name.c_str());
  std::printf("|---|---|---|---|---|---|---|\n");
  const warp::Bm25Params defaults;
  row("engine: CPU processor, the defaults", engine(a), engine(b));
  Variant same;
  same.k1 = defaults.k1, same.b = defaults.b, same.k3 = defaults.k3, same.query_stopwords = true;
  row("brute force, the same settings", brute_force(a, same), brute_force(b, same));
  for (bool stopwords : {false, true}) {
    for (float k3 : {0.0f, 0.5f, 1.0f, 2.0f, 4.0f, 8.0f, INFINITY}) {
      Variant q;
      q.k3 = k3;
      q.query_stopwords = stopwords;
      row("k3 " + k3_text(k3) +
              (k3 == 0          ? " (repeats once)"
               : std::isinf(k3) ? " (linear)"
                                : "") +
              (stopwords ? ", stop words dropped from queries" : ""),
          brute_force(a, q), brute_force(b, q));
    }
  }
  Variant best;  // linear query-term frequency and query-time stop words: better on both
  best.k3 = INFINITY;
  best.query_stopwords = true;
  for (float k1 : {0.9f, 1.2f, 1.5f}) {
    for (float bb : {0.3f, 0.4f, 0.6f, 0.75f}) {
      Variant q = best;
      q.k1 = k1, q.b = bb;
      row("k3 inf, stop words, k1 " + std::to_string(k1).substr(0, 3) + ", b " + std::to_string(bb).substr(0, 4),
          brute_force(a, q), brute_force(b, q));
    }
  }
  for (IdfForm form : {IdfForm::kLucene, IdfForm::kRobertson, IdfForm::kPlain}) {
    Variant q = best;
    q.idf = form;
    row(std::string("k3 inf, stop words, idf ") + name(form), brute_force(a, q), brute_force(b, q));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return warp::run_main("relevance_bench", [&] { return run(argc, argv); });
}
