#include "leaf/query/phrase_docs.hpp"

#include <algorithm>
#include <limits>
#include <map>

#include "common/util/status.hpp"

namespace warp {
namespace {

// One word's row in a chunk, read block by block as the phrase moves on.
class PositionCursor {
 public:
  PositionCursor(PositionRow row, DocId chunk, PhraseStats& stats)
      : row_(std::move(row)), parsed_(TermPositionsRow::parse(row_.bytes, chunk)), stats_(stats) {}
  PositionCursor(const PositionCursor&) = delete;
  PositionCursor& operator=(const PositionCursor&) = delete;
  uint32_t size() const { return parsed_.doc_count(); }
  bool done() const { return block_ >= parsed_.blocks(); }
  DocId doc() const { return decoded_.docs[at_]; }
  uint32_t frequency() const { return decoded_.starts[at_ + 1] - decoded_.starts[at_]; }
  std::span<const uint32_t> positions() { return decoded_.of(at_); }

  // To the first document at or after `target`; false when none is left.
  bool seek(DocId target) {
    if (done()) return false;
    if (loaded_ == block_ && decoded_.docs[at_] >= target) return true;
    while (block_ < parsed_.blocks() && parsed_.last_doc(block_) < target) ++block_;
    if (done()) return false;
    if (loaded_ != block_) {
      parsed_.decode(block_, decoded_);
      loaded_ = block_;
      at_ = 0;
      ++stats_.blocks_decoded;
    }
    at_ = static_cast<size_t>(
        std::lower_bound(decoded_.docs.begin() + static_cast<std::ptrdiff_t>(at_), decoded_.docs.end(), target) -
        decoded_.docs.begin());
    return true;  // the block's last document is at or past the target
  }
  // Past the current document.
  bool next() {
    const DocId current = doc();
    return current != std::numeric_limits<DocId>::max() && seek(current + 1);
  }

 private:
  PositionRow row_;  // held: parsed_ reads it in place
  TermPositionsRow parsed_;
  PhraseStats& stats_;
  PositionBlock decoded_;
  size_t block_ = 0;
  size_t loaded_ = std::numeric_limits<size_t>::max();
  size_t at_ = 0;
};

// Whether the words stand one after another in the current document of every cursor: `words[i]`
// the cursor of the phrase's i-th word.
bool phrase_in_doc(const std::vector<PositionCursor*>& words, std::vector<uint32_t>& starts) {
  size_t rarest = 0;
  for (size_t i = 1; i < words.size(); ++i)
    if (words[i]->frequency() < words[rarest]->frequency()) rarest = i;
  starts.clear();
  for (uint32_t p : words[rarest]->positions())
    if (p >= rarest) starts.push_back(p - static_cast<uint32_t>(rarest));
  for (size_t i = 0; i < words.size() && !starts.empty(); ++i) {
    if (i == rarest) continue;
    const std::span<const uint32_t> at = words[i]->positions();
    std::erase_if(starts, [&](uint32_t start) {
      const uint64_t want = uint64_t{start} + i;
      return !std::binary_search(at.begin(), at.end(), want);
    });
  }
  return !starts.empty();
}

}  // namespace

std::vector<DocId> phrase_docs(const std::vector<std::string>& phrase, const IndexView& index, PhraseStats* stats) {
  if (!index.positions)
    throw Error("this index keeps no word positions: phrases need them (build it without --no-positions)");
  PhraseStats unused;
  PhraseStats& counts = stats != nullptr ? *stats : unused;
  std::vector<DocId> docs;
  if (phrase.empty()) return docs;
  std::vector<std::string> distinct(phrase);
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  for (const std::string& term : distinct)
    if (index.find(term) == nullptr) return docs;  // a word no document of the partition holds
  std::vector<uint32_t> starts;
  for (DocId chunk : index.positions->chunks()) {
    std::map<std::string_view, std::unique_ptr<PositionCursor>> cursors;
    for (const std::string& term : distinct) {
      PositionRow row;
      if (!index.positions->row(chunk, term, row)) break;
      cursors.emplace(term, std::make_unique<PositionCursor>(std::move(row), chunk, counts));
    }
    if (cursors.size() != distinct.size()) continue;  // a word the chunk lacks
    std::vector<PositionCursor*> words, all;
    for (const std::string& term : phrase) words.push_back(cursors.at(term).get());
    for (auto& [term, cursor] : cursors) all.push_back(cursor.get());
    std::sort(all.begin(), all.end(), [](const auto* a, const auto* b) { return a->size() < b->size(); });
    PositionCursor& driver = *all.front();
    for (bool more = driver.seek(0); more;) {
      const DocId candidate = driver.doc();
      bool every = true;
      for (size_t i = 1; i < all.size() && every; ++i) {
        if (!all[i]->seek(candidate)) {
          more = false, every = false;
        } else if (all[i]->doc() != candidate) {
          every = false;
          more = driver.seek(all[i]->doc());
        }
      }
      if (!every) continue;
      ++counts.docs_checked;
      if (phrase_in_doc(words, starts)) docs.push_back(candidate);
      more = driver.next();
    }
  }
  return docs;
}

}  // namespace warp
