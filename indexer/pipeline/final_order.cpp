#include "indexer/pipeline/final_order.hpp"

#include <algorithm>

namespace warp::pipeline {

SplitTaker::SplitTaker(const std::vector<uint64_t>& split_bytes, size_t threads)
    : bytes_before_(split_bytes.size() + 1, 0),
      front_(std::max<size_t>(threads, 1)),
      back_(front_.size()),
      taken_(front_.size(), 0),
      reader_(split_bytes.size(), kNotRead),
      order_(split_bytes.size(), 0) {
  const size_t splits = split_bytes.size();
  for (size_t s = 0; s < splits; ++s) bytes_before_[s + 1] = bytes_before_[s] + std::max<uint64_t>(split_bytes[s], 1);
  // Thread t's range: the splits whose middle byte lies in its share [t, t+1) × total / threads.
  const uint64_t total = bytes_before_.back();
  const size_t n = front_.size();
  size_t s = 0;
  for (size_t t = 0; t < n; ++t) {
    front_[t] = s;
    const uint64_t until = t + 1 == n ? total : total / n * (t + 1);
    while (s < splits && bytes_before_[s] + (bytes_before_[s + 1] - bytes_before_[s]) / 2 < until) ++s;
    back_[t] = t + 1 == n ? splits : s;
  }
}

std::optional<size_t> SplitTaker::next(size_t thread) {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t from = thread;
  if (front_[thread] == back_[thread]) {
    uint64_t most = 0;
    for (size_t t = 0; t < front_.size(); ++t) {
      const uint64_t left = bytes_before_[back_[t]] - bytes_before_[front_[t]];
      if (left > most) most = left, from = t;
    }
    if (most == 0) return std::nullopt;
  }
  const size_t split = from == thread ? front_[thread]++ : --back_[from];
  reader_[split] = static_cast<uint32_t>(thread);
  order_[split] = taken_[thread]++;
  return split;
}

std::vector<DocId> SplitTaker::span_starts(const std::vector<DocId>& split_starts) const {
  std::vector<DocId> starts;
  for (size_t s = 0; s < reader_.size() && s < split_starts.size(); ++s) {
    if (s == 0 || reader_[s] == kNotRead || reader_[s] != reader_[s - 1] || order_[s] != order_[s - 1] + 1) {
      starts.push_back(split_starts[s]);
    }
  }
  return starts;
}

bool to_final_doc_order(std::vector<Posting>& list, std::vector<size_t>& segments, std::span<const DocId> final_of,
                        const std::vector<DocId>& span_starts, std::vector<Posting>& scratch,
                        std::vector<ListPiece>& pieces) {
  segments.push_back(list.size());
  pieces.clear();
  size_t kept = 0;
  bool in_order = true;  // the pieces as found are already in docID order
  // The current piece's first and last docIDs and start in locals, written to `pieces` when the
  // next one starts: kept in the piece itself, they were stored and loaded again for every posting
  // (the list's stores may alias them).
  DocId first = 0, last = 0;
  size_t begin = 0;
  bool open = false;
  // The first span start above `doc`, searched from the last one found: a part's pieces mostly
  // enter the next span or one a few further on (a routed run's list holds each parser's postings
  // in turn), where a binary search over every span had been a sixth of the pass at 16 threads.
  const size_t spans = span_starts.size();
  size_t finger = 0;
  const auto next_span_start = [&](DocId doc) -> DocId {
    if (finger > 0 && span_starts[finger - 1] > doc) {
      finger = static_cast<size_t>(
          std::upper_bound(span_starts.begin(), span_starts.begin() + static_cast<std::ptrdiff_t>(finger), doc) -
          span_starts.begin());
    } else {
      for (int step = 0; step < 4 && finger < spans && span_starts[finger] <= doc; ++step) ++finger;
      if (finger < spans && span_starts[finger] <= doc) {
        finger = static_cast<size_t>(
            std::upper_bound(span_starts.begin() + static_cast<std::ptrdiff_t>(finger), span_starts.end(), doc) -
            span_starts.begin());
      }
    }
    return finger == spans ? kEndDoc : span_starts[finger];
  };
  for (size_t s = 0; s + 1 < segments.size(); ++s) {
    DocId limit = 0;  // where the current piece's span ends; 0: the part's first posting starts a piece
    const size_t part_end = segments[s + 1];
    for (size_t i = segments[s]; i < part_end; ++i) {
      const DocId doc = final_of[list[i].doc];
      if (doc == kEndDoc) continue;
      if (doc >= limit || doc <= last) {
        if (open) {
          in_order = in_order && doc > last;
          pieces.push_back({first, last, begin, kept});
        }
        // The span's end matters only to the part's later postings: a part of one posting (most
        // parts of rare terms, one per run and term) skips the search.
        limit = i + 1 == part_end ? kEndDoc : next_span_start(doc);
        first = doc, begin = kept, open = true;
      }
      list[kept] = {doc, list[i].freq};
      ++kept;
      last = doc;
    }
  }
  if (open) pieces.push_back({first, last, begin, kept});
  list.resize(kept);
  if (in_order) return true;
  std::sort(pieces.begin(), pieces.end(), [](const ListPiece& a, const ListPiece& b) { return a.first < b.first; });
  bool disjoint = true;
  for (size_t k = 1; k < pieces.size() && disjoint; ++k) disjoint = pieces[k].first > pieces[k - 1].last;
  if (!disjoint) {
    std::sort(list.begin(), list.end(), [](const Posting& a, const Posting& b) { return a.doc < b.doc; });
    return false;
  }
  scratch.resize(kept);
  auto out = scratch.begin();
  for (const ListPiece& piece : pieces) {
    out = std::copy(list.begin() + static_cast<std::ptrdiff_t>(piece.begin),
                    list.begin() + static_cast<std::ptrdiff_t>(piece.end), out);
  }
  list.swap(scratch);
  return true;
}

}  // namespace warp::pipeline
