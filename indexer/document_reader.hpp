// Reads source documents from JSONL files (one {"id","title","body","url"?} object per line).
// A malformed line is skipped, counted and reported with its file and line number: never fatal,
// never silently lost. Duplicate ids: the last one wins and the replaced document is counted.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "common/index/index_builder.hpp"

namespace warp {

struct ReadReport {
  uint64_t documents = 0;     // accepted (after replacing duplicates)
  uint64_t rejected = 0;      // malformed records skipped
  uint64_t replaced = 0;      // earlier documents replaced by a later one with the same id
  uint64_t bytes = 0;         // input bytes read
  std::vector<std::string> errors;  // "file:line: reason", the first 100
};

// Calls `on_progress(report)` every few thousand documents.
std::vector<SourceDocument> read_jsonl_documents(const std::vector<std::string>& paths, ReadReport& report,
                                                 const std::function<void(const ReadReport&)>& on_progress = {});

// Expands directories (recursively, *.jsonl files in name order) into files.
std::vector<std::string> expand_input_paths(const std::vector<std::string>& paths);

}  // namespace warp
