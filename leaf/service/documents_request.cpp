#include "leaf/service/documents_request.hpp"

#include <capnp/message.h>
#include <capnp/serialize.h>

#include <cmath>

#include "common/index/bm25.hpp"
#include "common/index/stored_source.hpp"
#include "common/protocol/search.capnp.h"

namespace warp {
namespace {

// One analyzer per thread and analyzer version (libstemmer state is not shared).
Analyzer& analyzer_for(const std::string& version) {
  thread_local std::string current;
  thread_local std::unique_ptr<Analyzer> analyzer;
  if (!analyzer || current != version) {
    analyzer = std::make_unique<Analyzer>(version.empty() ? AnalyzerConfig{} : AnalyzerConfig::from_version(version));
    analyzer->limit_stem_cache(size_t{1} << 15);
    current = version;
  }
  return *analyzer;
}

struct Found {
  bool found = false;
  std::optional<std::string> source;
};

// The document `id` as partition `slot` serves it now: the last write of it the leaf serves, else
// the generation's copy.
Found by_id(const LoadedIndex& index, size_t slot, const std::string& id,
            const std::function<LeafServer::WrittenCopy(std::string_view)>& written) {
  const Partition& partition = *index.partitions[slot];
  if (written) {
    const LeafServer::WrittenCopy copy = written(id);
    if (copy.written) {
      if (!copy.put || copy.partition != partition.view().meta.partition_id) return {};
      return {true, copy.source.empty() ? std::nullopt : std::optional<std::string>(copy.source)};
    }
  }
  const std::optional<DocId> doc = partition.find(id);
  if (!doc) return {};
  return {true, partition.source(*doc)};
}

}  // namespace

std::string documents_reply(const LoadedIndex& index, size_t slot, uint64_t query_id, uint32_t partition_id,
                            const DocumentsAsk& ask,
                            const std::function<LeafServer::WrittenCopy(std::string_view)>& written) {
  const Partition& partition = *index.partitions[slot];
  const IndexView& view = partition.view();
  // The query's terms weighted by their idf in the partition (a term it lacks weighs as a rare one).
  SnippetTerms terms;
  for (const std::string& term : ask.terms) {
    auto it = view.lexicon.find(term);
    terms[term] =
        bm25_idf(it == view.lexicon.end() ? 1 : it->second.df, std::max<uint64_t>(view.meta.stats.doc_count, 1));
  }
  capnp::MallocMessageBuilder builder(1024);
  auto reply = builder.initRoot<protocol::LeafReply>().initDocuments();
  reply.setQueryId(query_id);
  reply.setPartition(partition_id);
  reply.setGeneration(index.generation);
  reply.setWriteSequence(index.write_sequence);
  const size_t count = ask.docs.empty() ? ask.ids.size() : ask.docs.size();
  auto documents = reply.initDocuments(static_cast<unsigned>(count));
  for (size_t i = 0; i < count; ++i) {
    auto out = documents[static_cast<unsigned>(i)];
    const std::string id = i < ask.ids.size() ? ask.ids[i] : std::string();
    Found found;
    if (!ask.docs.empty()) {
      const DocId doc = ask.docs[i];
      out.setDoc(doc);
      const std::optional<DocumentRecord> record = index.document(slot, doc);
      const Partition& partition = *index.partitions[slot];
      const bool in_generation = doc >= partition.view().meta.doc_begin && doc < partition.view().meta.doc_end;
      if (record && in_generation && (id.empty() || record->external_id == id)) {
        found = {true, partition.source(doc)};
        out.setId(capnp::Text::Reader(record->external_id.data(), record->external_id.size()));
      } else if (record && (id.empty() || record->external_id == id)) {
        // Written since the generation: its stored form is its write's.
        found = by_id(index, slot, record->external_id, written);
        out.setId(capnp::Text::Reader(record->external_id.data(), record->external_id.size()));
      } else if (!id.empty()) {
        found = by_id(index, slot, id, written);
      }
    } else if (!id.empty()) {
      found = by_id(index, slot, id, written);
    }
    out.setFound(found.found);
    if (!found.found) continue;
    if (!id.empty()) out.setId(capnp::Text::Reader(id.data(), id.size()));
    if (!found.source) continue;
    if (ask.source) out.setSource(capnp::Text::Reader(found.source->data(), found.source->size()));
    if (!ask.terms.empty()) {
      const std::optional<std::string> field = source_field(*found.source, ask.field);
      out.setHasSnippet(field.has_value());
      if (field) {
        const std::string snippet = build_snippet(*field, terms, analyzer_for(index.analyzer), ask.snippet);
        out.setSnippet(capnp::Text::Reader(snippet.data(), snippet.size()));
      }
    }
  }
  const auto words = capnp::messageToFlatArray(builder);
  return std::string(reinterpret_cast<const char*>(words.asBytes().begin()), words.asBytes().size());
}

}  // namespace warp
