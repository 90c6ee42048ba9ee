#include "leaf/query/phrase_docs.hpp"

#include <algorithm>
#include <limits>

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
  // The distinct words, rarest first (by their document frequencies): a chunk without the
  // rarest is passed over after one lookup.
  std::vector<std::pair<uint32_t, std::string_view>> distinct;
  for (const std::string& term : phrase) {
    if (std::any_of(distinct.begin(), distinct.end(), [&](const auto& d) { return d.second == term; })) continue;
    const TermInfo* info = index.find(term);
    if (info == nullptr) return docs;  // a word no document of the partition holds
    distinct.emplace_back(info->df, term);
  }
  std::sort(distinct.begin(), distinct.end());
  std::vector<size_t> word_of;  // the phrase's words' places in `distinct`
  for (const std::string& term : phrase) {
    word_of.push_back(static_cast<size_t>(
        std::find_if(distinct.begin(), distinct.end(), [&](const auto& d) { return d.second == term; }) -
        distinct.begin()));
  }
  std::vector<uint32_t> starts;
  std::vector<std::unique_ptr<PositionCursor>> cursors;
  std::vector<PositionCursor*> words(phrase.size()), all;
  for (DocId chunk : index.positions->chunks()) {
    cursors.clear();
    for (const auto& [df, term] : distinct) {
      PositionRow row;
      if (!index.positions->row(chunk, term, row)) break;
      cursors.push_back(std::make_unique<PositionCursor>(std::move(row), chunk, counts));
    }
    if (cursors.size() != distinct.size()) continue;  // a word the chunk lacks
    all.clear();
    for (const auto& cursor : cursors) all.push_back(cursor.get());
    for (size_t i = 0; i < phrase.size(); ++i) words[i] = cursors[word_of[i]].get();
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
