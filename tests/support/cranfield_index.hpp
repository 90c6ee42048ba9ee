// Cranfield's documents (tests/data) built by the in-memory builder into an index directory:
// the index the leaf and transfer tests serve and move.
#pragma once
#include <cstdint>
#include <string>

#include "common/index/index_builder.hpp"
#include "common/index/index_files.hpp"
#include "indexer/reader/document_reader.hpp"
#include "tests/support/test_data.hpp"

namespace warp::testing {

inline void write_cranfield_index(const std::string& dir, uint32_t partitions, uint64_t generation) {
  ReadReport report;
  BuildOptions options;
  options.partitions = partitions;
  options.generation = generation;
  IndexBuilder builder(options);
  for (const auto& doc : read_documents({test_data_dir() + "/cranfield/docs.jsonl"}, report)) builder.add_document(doc);
  write_index(builder.build(), dir);
}

}  // namespace warp::testing
