// The parsers' side of the GPU analysis (gpu_analyzer.hpp): a document's stems from its chunk's tokens.
#include <string>
#include <vector>

#include "common/analysis/analyzer.hpp"
#include "indexer/gpu/gpu_analyzer.hpp"
#include "indexer/pipeline/run_file.hpp"

namespace warp::pipeline {

namespace {

// A token the GPU's table missed, folded and looked up (or stemmed) on the CPU; the table learns
// it where its id is the shared cache's.
uint32_t resolve_miss(GpuAnalyzer& gpu, uint32_t token, Analyzer& analyzer, std::string& folded, uint64_t& misses) {
  folded.clear();
  for (const char* c = gpu.text() + gpu.token_starts()[token];; ++c) {
    const char ch = *c;
    if (ch >= 'A' && ch <= 'Z') {
      folded.push_back(static_cast<char>(ch + 32));
    } else if ((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9')) {
      folded.push_back(ch);
    } else {
      break;  // the document's text ends with a separator
    }
  }
  const uint32_t id = analyzer.folded_stem_id(folded);
  if (id < analyzer.stable_stems()) {
    gpu.note_stem(id, term_prefix(analyzer.stem(id)));
    gpu.learn(folded, id);
  }
  ++misses;
  return id;
}

// Past document `doc`'s tokens, for a document the CPU analyzes: false.
bool skip_document(const GpuAnalyzer& gpu, size_t doc, uint32_t& next) {
  const uint32_t end = gpu.doc_begin(doc + 1);
  while (next < gpu.tokens() && gpu.token_starts()[next] < end) ++next;
  return false;
}

}  // namespace

bool take_document_stems(GpuAnalyzer& gpu, size_t doc, uint32_t& next, Analyzer& analyzer, std::vector<uint32_t>& stems,
                         std::string& folded, uint64_t& misses) {
  if (gpu.non_ascii(doc)) return skip_document(gpu, doc, next);
  const uint32_t end = gpu.doc_begin(doc + 1);
  const uint32_t* starts = gpu.token_starts();
  const uint32_t* values = gpu.token_values();
  for (const uint32_t tokens = gpu.tokens(); next < tokens && starts[next] < end; ++next) {
    uint32_t value = values[next];
    if (value == GpuAnalyzer::kDropped) continue;
    if (value == GpuAnalyzer::kMiss) value = resolve_miss(gpu, next, analyzer, folded, misses);
    stems.push_back(value);
  }
  return true;
}

bool take_document_tokens(GpuAnalyzer& gpu, size_t doc, uint32_t& next, Analyzer& analyzer,
                          std::vector<uint32_t>& own_stems, uint32_t& length, std::string& folded, uint64_t& misses) {
  if (gpu.non_ascii(doc)) return skip_document(gpu, doc, next);
  const uint32_t end = gpu.doc_begin(doc + 1);
  const uint32_t* starts = gpu.token_starts();
  const uint32_t* values = gpu.token_values();
  length = 0;
  for (const uint32_t tokens = gpu.tokens(); next < tokens && starts[next] < end; ++next) {
    const uint32_t value = values[next];
    if (value == GpuAnalyzer::kDropped) continue;
    ++length;
    if (value != GpuAnalyzer::kMiss) continue;  // a shared stem: the device inverts it
    const uint32_t id = resolve_miss(gpu, next, analyzer, folded, misses);
    if (id < analyzer.stable_stems()) {
      gpu.patch(next, id);
    } else {
      own_stems.push_back(id);
    }
  }
  return true;
}

}  // namespace warp::pipeline
