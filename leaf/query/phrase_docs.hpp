// Phrase matching on word positions (common/index/word_positions.hpp): the documents of a
// partition where a phrase's words stand one after another. Per chunk of the partition, the rarest
// word's documents propose and the others skip to them through their blocks' table, decoding a
// block only where a proposal lands in it; in a document holding every word, the positions of the
// word it holds least often, less that word's place in the phrase, are the candidate starts, and
// each other word keeps those where it stands at its own place after them.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "common/index/index_view.hpp"

namespace warp {

struct PhraseStats {
  uint64_t blocks_decoded = 0;  // blocks of positions decoded
  uint64_t docs_checked = 0;    // documents holding every word, their positions compared
};

// The documents of `index` holding `phrase` (analyzed terms in order, repeats allowed, at least
// one) as consecutive words, docIDs ascending. Throws Error when the index keeps no word positions
// or a row of them is damaged.
std::vector<DocId> phrase_docs(const std::vector<std::string>& phrase, const IndexView& index,
                               PhraseStats* stats = nullptr);

}  // namespace warp
