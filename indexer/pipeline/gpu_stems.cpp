// The parsers' side of the GPU analysis (gpu_analyzer.hpp): a document's stems from its chunk's tokens.
#include <string>
#include <vector>

#include "common/analysis/analyzer.hpp"
#include "indexer/gpu/gpu_analyzer.hpp"

namespace warp::pipeline {

bool take_document_stems(GpuAnalyzer& gpu, size_t doc, uint32_t& next, Analyzer& analyzer, std::vector<uint32_t>& stems,
                         std::string& folded, uint64_t& misses) {
  const uint32_t end = gpu.doc_begin(doc + 1);
  const uint32_t* starts = gpu.token_starts();
  const uint32_t* values = gpu.token_values();
  const uint32_t tokens = gpu.tokens();
  if (gpu.non_ascii(doc)) {
    while (next < tokens && starts[next] < end) ++next;
    return false;
  }
  for (; next < tokens && starts[next] < end; ++next) {
    uint32_t value = values[next];
    if (value == GpuAnalyzer::kDropped) continue;
    if (value == GpuAnalyzer::kMiss) {
      folded.clear();
      for (const char* c = gpu.text() + starts[next];; ++c) {
        const char ch = *c;
        if (ch >= 'A' && ch <= 'Z') {
          folded.push_back(static_cast<char>(ch + 32));
        } else if ((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9')) {
          folded.push_back(ch);
        } else {
          break;  // the document's text ends with a separator
        }
      }
      value = analyzer.folded_stem_id(folded);
      if (value < analyzer.stable_stems()) gpu.learn(folded, value);
      ++misses;
    }
    stems.push_back(value);
  }
  return true;
}

}  // namespace warp::pipeline
