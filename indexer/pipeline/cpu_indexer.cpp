#include <algorithm>
#include <bit>
#include <memory>

#include "common/util/status.hpp"
#include "indexer/pipeline/indexers.hpp"
#include "indexer/pipeline/posting_arena.hpp"
#include "indexer/pipeline/term_btree.hpp"

namespace warp::pipeline {

std::string Indexer::next_run_path() {
  return context_.spill_dir + "/run-" + std::to_string(context_.index) + "-" + std::to_string(run_names_++);
}

void Indexer::add_run(RunInfo run) {
  runs_.push_back(std::move(run));
  if (context_.runs_written != nullptr) ++*context_.runs_written;
}

namespace {

// A CPU indexer: postings in an arena, sorted run files. Fed pieces (an indexer thread's, a GPU
// indexer's fallback, a test's), it finds terms in dictionary B-trees of its collections; owned by
// a parser and fed stem ids, it keeps shared stems' lists by id and only its own-cache stems in
// the B-trees.
class CpuIndexer final : public ParserIndexer {
 public:
  using ParserIndexer::ParserIndexer;

  void consume(const Piece& piece) override {
    for (const PieceEntry& e : piece.entries) {
      const std::string_view suffix = std::string_view(piece.suffixes).substr(e.suffix_offset, e.suffix_size);
      arena_.append(lists_[term_id(e.collection, suffix)], {e.doc, e.freq});
    }
    end_chunk();
  }

  // In three passes over the document's terms, each prefetching what the next one reads: the lists
  // (and term ids), then the lists' tail slices, then the appends. One posting at a time, every
  // append waited for two cache misses (the list, then its tail): a tenth of a one-thread build.
  // A stem of the shared stem cache (every parser's, ids that never change) has its list at its id:
  // no dictionary. Only stems of the analyzer's own cache (once the shared one is full; their ids
  // change with each epoch) go through the B-tree. A dictionary per parser had cost a B-tree insert
  // of every word in every parser (16 times the inserts at 16 threads, 5% of the build) and a third
  // of each parser's share of the memory budget.
  void add_document(const Analyzer& analyzer, DocId doc, std::span<const uint32_t> stems,
                    std::span<const uint32_t> freqs) override {
    if (analyzer.stem_cache_epoch() != epoch_) {  // the own cache was emptied: its ids name other stems now
      term_of_own_.clear();
      epoch_ = analyzer.stem_cache_epoch();
    }
    feed_from(analyzer);
    const size_t stable = analyzer.stable_stems();
    refs_.resize(stems.size());
    for (size_t i = 0; i < stems.size(); ++i) {
      const uint32_t stem = stems[i];
      if (stem < stable) {
        refs_[i] = stem;
        __builtin_prefetch(&shared_lists_[slot(stem, self_)]);
        continue;
      }
      const size_t own = stem - stable;
      if (term_of_own_.size() <= own) term_of_own_.resize(own + 1, kNoTerm);
      uint32_t& id = term_of_own_[own];
      if (id == kNoTerm) {
        const std::string_view term = analyzer.stem(stem);
        const uint32_t collection = trie_collection(term);
        id = term_id(collection, trie_suffix(term, collection));
      }
      refs_[i] = kInForest | id;
      __builtin_prefetch(&lists_[id]);
    }
    for (const uint32_t ref : refs_) arena_.prefetch_tail(list_of(ref));
    for (size_t i = 0; i < stems.size(); ++i) {
      PostingArena::List& list = list_of(refs_[i]);
      if (list.empty() && (refs_[i] & kInForest) == 0) touch_shared(refs_[i]);
      arena_.append(list, {doc, freqs[i]});
    }
  }

  void add_sorted_postings(const Analyzer& analyzer, DocId base, const uint64_t* keys, const uint32_t* freqs,
                           size_t n) override {
    feed_from(analyzer);
    for (size_t i = 0; i < n; ++i) {
      if (i + kAhead < n) arena_.prefetch_tail(shared_lists_[keys[i + kAhead] >> 32]);
      const uint32_t stem = static_cast<uint32_t>(keys[i] >> 32);
      PostingArena::List& list = shared_lists_[stem];
      if (list.empty()) shared_touched_.push_back(stem);
      arena_.append(list, {base + static_cast<DocId>(keys[i] & 0xFFFFFFFFu), freqs[i]});
    }
  }

  void set_routing(size_t parsers, size_t self) override {
    if (parsers < 2) return;
    row_width_ = static_cast<uint32_t>(parsers);
    by_width_ = DivideBy(row_width_);
    self_ = static_cast<uint32_t>(self);
  }

  void add_routed(const Analyzer& analyzer, size_t from, std::span<const RoutedPosting> postings) override {
    feed_from(analyzer);
    const uint32_t producer = static_cast<uint32_t>(from);
    // In blocks, as add_document's passes: the lists, then their tail slices, then the appends.
    constexpr size_t kBlock = 32;
    size_t slots[kBlock];
    for (size_t first = 0; first < postings.size(); first += kBlock) {
      const size_t n = std::min(postings.size() - first, kBlock);
      for (size_t i = 0; i < n; ++i) {
        slots[i] = slot(postings[first + i].stem, producer);
        __builtin_prefetch(&shared_lists_[slots[i]]);
      }
      for (size_t i = 0; i < n; ++i) arena_.prefetch_tail(shared_lists_[slots[i]]);
      for (size_t i = 0; i < n; ++i) {
        PostingArena::List& list = shared_lists_[slots[i]];
        if (list.empty()) touch_shared(postings[first + i].stem);
        arena_.append(list, {postings[first + i].doc, postings[first + i].freq});
      }
    }
  }

  void add_device_postings(const Analyzer& analyzer, DocId base, const uint64_t* keys, const uint32_t* freqs,
                           size_t n) override {
    if (device_ == nullptr) {  // failed at a spill: the parser has not dropped it yet
      add_sorted_postings(analyzer, base, keys, freqs, n);
      return;
    }
    feed_from(analyzer);
    on_device_ += n;
    // The run's distinct stems on the device: the spill's arrays hold ~kSpillBytesPerDeviceStem each.
    if (device_stem_seen_.empty()) device_stem_seen_.assign((analyzer.shared_stem_capacity() + 63) / 64, 0);
    for (size_t i = 0; i < n; ++i) {
      const uint32_t stem = static_cast<uint32_t>(keys[i] >> 32);
      if (i > 0 && stem == static_cast<uint32_t>(keys[i - 1] >> 32)) continue;  // a chunk's keys come by stem
      uint64_t& word = device_stem_seen_[stem / 64];
      const uint64_t bit = uint64_t{1} << (stem % 64);
      if ((word & bit) == 0) word |= bit, ++device_stems_;
    }
  }

  void set_run_on_device(RunOnDevice* run) override {
    if (run == nullptr && device_ != nullptr && on_device_ > 0) replay_device();
    device_ = run;
  }
  const std::string& device_failure() const override { return device_failure_; }
  uint64_t device_postings_written() const override { return device_postings_written_; }

  void end_chunk() override {
    if (held() > context_.share()) spill();
  }

  // The arena's blocks, the dictionary and per-term entries. Not the lists by shared stem id: their
  // size follows the shared stem cache's ids, not this indexer's terms, and the build counts them
  // with the parsers' other arrays by stem id (ParserIndexer::kBytesPerSharedStem).
  uint64_t held() const {
    return arena_.reserved_bytes() + dictionary_bytes() + device_stems_ * kSpillBytesPerDeviceStem;
  }
  uint64_t dictionary_bytes() const {
    return forest_.memory_bytes() + lists_.size() * (sizeof(PostingArena::List) + sizeof(uint32_t)) +
           (term_of_own_.capacity() + shared_touched_.capacity()) * sizeof(uint32_t) + row_touched_.capacity();
  }

  // Everything held, as one run sorted by term, each list by docID; then a fresh start.
  // The dictionary (and the own stem → term map) outlive the run while they take at most half the
  // share: a word seen again in the next run is not inserted into the B-tree again.
  // Postings the device holds come back from it in term order (its segments below); where it
  // fails, its replay files them into the lists instead, for the terms not written yet.
  void spill() override {
    if (arena_.postings() == 0 && on_device_ == 0) return;
    std::vector<uint32_t> device_stems, device_begins, by_prefix;
    std::vector<uint64_t> prefixes;
    if (on_device_ > 0 && device_ != nullptr) {
      try {
        device_->sort(device_stems, device_begins, by_prefix, prefixes);
        if (device_begins.size() != device_stems.size() + 1 || device_begins.back() != on_device_) {
          throw Error("GPU analysis: the device's run does not hold the postings it was given");
        }
        if (!by_prefix.empty() && (by_prefix.size() != device_stems.size() || prefixes.size() != by_prefix.size())) {
          throw Error("GPU analysis: the device ordered another count of stems than it found");
        }
      } catch (const std::exception& e) {
        fall_back(e.what());
        device_stems.clear();
      }
    }
    if (device_stems.empty()) by_prefix.clear(), prefixes.clear();
    const std::vector<Ordered> order = term_order(device_stems, by_prefix, prefixes);
    DeviceCursor from_device;
    if (!device_stems.empty()) {
      std::vector<uint32_t> out_begins(device_stems.size());
      uint32_t next = 0;
      for (const Ordered& o : order) {
        if (o.segment != kNoSegment) {
          out_begins[o.segment] = next;
          next += device_begins[o.segment + 1] - device_begins[o.segment];
        }
      }
      try {
        device_->order(out_begins);
        from_device.total = next;
      } catch (const std::exception& e) {
        fall_back(e.what());
      }
    }
    RunWriter writer(next_run_path());
    std::vector<Posting> list;
    std::string term;
    // Term order visits the lists, their slices and their stems' entries and texts at random: a
    // list's entry and its stem's entry are prefetched 2 × kAhead terms ahead, its first slice and
    // its stem's text kAhead (in a profile, 90% of the spill's time had been the lists' two cache
    // misses; at 16 parsers, whose runs each hold most of the vocabulary, the stems' two were then
    // a third of it).
    const auto by_doc = [](const Posting& a, const Posting& b) { return a.doc < b.doc; };
    // A term whose postings are the device's alone has no host list to look at (unless the device
    // failed: its postings were then replayed into the lists), and is written from the fetched
    // slice where it lies within one (sorted by document on the device).
    const auto in_lists = [&](size_t i) { return order[i].in_lists || device_ == nullptr; };
    if (row_width_ > 1) write_routed(order, writer);
    const size_t terms = row_width_ > 1 ? 0 : order.size();  // without routing, written here
    for (size_t i = 0; i < terms; ++i) {
      if (i + 2 * kAhead < order.size()) {
        if (in_lists(i + 2 * kAhead)) __builtin_prefetch(&list_of(order[i + 2 * kAhead].ref));
        prefetch_stem_entry(order[i + 2 * kAhead].ref);
      }
      if (i + kAhead < order.size()) {
        if (in_lists(i + kAhead)) arena_.prefetch_head(list_of(order[i + kAhead].ref));
        prefetch_stem_text(order[i + kAhead].ref);
      }
      const bool device_part = order[i].segment != kNoSegment && device_ != nullptr;
      const size_t count = device_part ? device_begins[order[i].segment + 1] - device_begins[order[i].segment] : 0;
      if (device_part && !in_lists(i)) {
        try {
          const std::span<const Posting> slice = from_device.view(*device_, count);
          if (!slice.empty()) {
            writer.add(term_of(order[i].ref, term), slice);
            continue;
          }
        } catch (const std::exception& e) {
          fall_back_after(e.what(), order, i);
        }
      }
      PostingArena::List* entry = in_lists(i) ? &list_of(order[i].ref) : nullptr;
      list.clear();
      if (entry != nullptr && !entry->empty()) arena_.gather(*entry, list);
      if (order[i].segment != kNoSegment && device_ != nullptr) {
        try {
          from_device.take(*device_, count, list);
        } catch (const std::exception& e) {  // the terms before this one are written: the replay files the rest
          fall_back_after(e.what(), order, i);
          entry = &list_of(order[i].ref);
          list.clear();
          if (!entry->empty()) arena_.gather(*entry, list);
        }
      }
      if (list.empty()) continue;  // a B-tree term of an earlier run of this dictionary
      // A parser's documents come in docID order, so lists are nearly always sorted already.
      if (!std::is_sorted(list.begin(), list.end(), by_doc)) std::sort(list.begin(), list.end(), by_doc);
      writer.add(term_of(order[i].ref, term), list);
      if (entry != nullptr) *entry = PostingArena::List{};
    }
    add_run(writer.finish());
    if (device_ != nullptr) device_postings_written_ += from_device.total;
    shared_touched_.clear();
    if (device_ != nullptr) device_->clear();
    on_device_ = 0;
    forget_device_stems();
    const uint64_t share = context_.share();
    uint64_t dictionary = dictionary_bytes();
    if (dictionary > share / 2) {  // the dictionary too: term ids start again from 0
      forest_.clear();
      lists_.clear();
      collection_of_.clear();
      term_of_own_.clear();
      dictionary = dictionary_bytes();
    }
    // A parser whose postings go to a device keeps none of the arena's blocks: after its first run
    // (the documents it analyzed before its device was ready) its lists take only the words the
    // device missed. Blocks kept up to its share were counted as held, so it spilled again each
    // time its device run reached a few hundred thousand stems (4 GiB of text at 16 threads: 17-33
    // spills and 33-49 runs before, 2-17 and 18-33 after; tests/bench/results/indexing.md).
    arena_.clear(device_ != nullptr ? 0 : share > dictionary ? share - dictionary : 0);
  }

 private:
  static constexpr uint32_t kNoTerm = 0xFFFFFFFFu;

  // A list: of a shared stem id, or (kInForest set) of a term of the B-tree.
  static constexpr uint32_t kInForest = 0x80000000u;
  // How far ahead a walk in term order prefetches what it reads at random: an entry (a list's, a
  // stem's) twice this far, what the entry points to (a first slice, a stem's text) this far.
  static constexpr size_t kAhead = 8;
  PostingArena::List& list_of(uint32_t ref) {
    return ref & kInForest ? lists_[ref & ~kInForest] : shared_lists_[slot(ref, self_)];
  }
  // The feeding parser's analyzer (the stems' text); on first use, the lists by shared stem id
  // (and with routing, a byte a row) for every id the shared cache may ever hand out.
  void feed_from(const Analyzer& analyzer) {
    analyzer_ = &analyzer;
    if (shared_lists_.get() != nullptr || analyzer.shared_stem_capacity() == 0) return;
    const size_t rows = (analyzer.shared_stem_capacity() + row_width_ - 1) / row_width_;
    shared_lists_ = ZeroedTable<PostingArena::List>(rows * row_width_);
    if (row_width_ > 1) row_touched_.assign(rows, 0);
  }
  // With routing, a shared stem's lists (one per parser that read its documents) are row
  // stem / parsers of the table; without, one list a stem, at its id.
  size_t row(uint32_t stem) const { return row_width_ == 1 ? stem : by_width_.quotient(stem); }
  // A shared stem's list of the postings parser `producer` read (with routing; else its only one).
  size_t slot(uint32_t stem, uint32_t producer) const {
    return row_width_ == 1 ? stem : row(stem) * row_width_ + producer;
  }
  // A shared stem's first posting of this run: the run writes its list(s).
  void touch_shared(uint32_t stem) {
    if (row_width_ > 1 && std::exchange(row_touched_[row(stem)], 1) != 0) return;
    shared_touched_.push_back(stem);
  }
  // term_of(ref) soon: a shared stem's entry, then its text (B-tree terms: nothing).
  void prefetch_stem_entry(uint32_t ref) const {
    if ((ref & kInForest) == 0) analyzer_->prefetch_stable_entry(ref);
  }
  void prefetch_stem_text(uint32_t ref) const {
    if ((ref & kInForest) == 0) analyzer_->prefetch_stable_text(ref);
  }

  // The term a list belongs to, spelled out in `out`.
  const std::string& term_of(uint32_t ref, std::string& out) const {
    if (ref & kInForest) {
      const uint32_t id = ref & ~kInForest;
      out = collection_prefix(collection_of_[id]);
      out += forest_.suffix(id);
    } else {
      out = analyzer_->stem(ref);
    }
    return out;
  }

  // The lists of this run in the byte order of their terms: the shared stems with postings sorted
  // by their text (its first 8 bytes as one integer, the rest on a tie), merged with the B-tree's
  // terms in its own order (their text built only where there are any: once the shared cache froze).
  // `device_stems[i]` has segment i of the device's run; a stem with postings in both is one entry.
  struct Ordered {
    uint32_t ref;
    uint32_t segment;  // of the device's run, or kNoSegment
    bool in_lists;     // postings in the host's lists too
  };
  static constexpr uint32_t kNoSegment = 0xFFFFFFFFu;
  struct Keyed {
    uint64_t prefix;  // term_prefix of the stem's text
    uint32_t stem, segment;
  };
  std::vector<Ordered> term_order(const std::vector<uint32_t>& device_stems, const std::vector<uint32_t>& by_prefix,
                                  const std::vector<uint64_t>& prefixes) const {
    std::vector<Keyed> keyed;
    keyed.reserve(shared_touched_.size() + (by_prefix.empty() ? device_stems.size() : 0));
    const auto add = [&](const std::vector<uint32_t>& stems, bool device) {
      for (size_t i = 0; i < stems.size(); ++i) {
        if (i + 2 * kAhead < stems.size()) analyzer_->prefetch_stable_entry(stems[i + 2 * kAhead]);
        if (i + kAhead < stems.size()) analyzer_->prefetch_stable_text(stems[i + kAhead]);
        keyed.push_back(
            {term_prefix(analyzer_->stem(stems[i])), stems[i], device ? static_cast<uint32_t>(i) : kNoSegment});
      }
    };
    add(shared_touched_, false);
    if (by_prefix.empty()) add(device_stems, true);
    const auto before = [this](const Keyed& a, const Keyed& b) {
      if (a.prefix != b.prefix) return a.prefix < b.prefix;
      if (a.stem == b.stem) return false;
      return analyzer_->stem(a.stem) < analyzer_->stem(b.stem);
    };
    std::sort(keyed.begin(), keyed.end(), before);
    std::vector<Ordered> shared;
    shared.reserve(keyed.size() + by_prefix.size());
    const auto append = [&](const Keyed& k) {  // a stem twice (host lists and device segment): equal, so adjacent
      if (!shared.empty() && shared.back().ref == k.stem) {
        if (k.segment != kNoSegment) shared.back().segment = k.segment;
        shared.back().in_lists = true;
        return;
      }
      shared.push_back({k.stem, k.segment, k.segment == kNoSegment});
    };
    if (by_prefix.empty()) {
      for (const Keyed& k : keyed) append(k);
    } else {  // the device's stems come ordered by prefix: ties broken here, merged with the host's
      const auto device = [&](size_t k) { return Keyed{prefixes[k], device_stems[by_prefix[k]], by_prefix[k]}; };
      std::vector<Keyed> tie;
      size_t h = 0;
      for (size_t k = 0; k < by_prefix.size();) {
        size_t end = k + 1;
        while (end < by_prefix.size() && prefixes[end] == prefixes[k]) ++end;
        tie.clear();
        for (size_t t = k; t < end; ++t) tie.push_back(device(t));
        if (tie.size() > 1) std::sort(tie.begin(), tie.end(), before);
        for (const Keyed& d : tie) {
          while (h < keyed.size() && !before(d, keyed[h])) append(keyed[h++]);  // the host's first on equal stems
          append(d);
        }
        k = end;
      }
      while (h < keyed.size()) append(keyed[h++]);
    }
    if (lists_.empty()) return shared;
    std::vector<Ordered> order;
    order.reserve(shared.size() + lists_.size());
    std::vector<uint32_t> forest_order;
    forest_.in_term_order(forest_order);
    std::string a, b;
    size_t i = 0, j = 0;
    while (i < shared.size() || j < forest_order.size()) {
      if (j < forest_order.size() && lists_[forest_order[j]].empty()) {
        ++j;
        continue;
      }
      const bool shared_first =
          j == forest_order.size() ||
          (i < shared.size() && term_of(shared[i].ref, a) < term_of(kInForest | forest_order[j], b));
      order.push_back(shared_first ? shared[i++] : Ordered{kInForest | forest_order[j++], kNoSegment, true});
    }
    return order;
  }

  // A run's lists in term order with routing (no device): a shared stem's lists, one per parser
  // that read its documents, one after another in parser order. Its postings are then in final
  // docID order as one parser's are (a parser's own documents in order, the parsers' ranges
  // consecutive); sorted by the provisional docIDs, which interleave the parsers' documents, they
  // would not be. The B-tree's terms (the own stem cache's) are this parser's alone.
  void write_routed(const std::vector<Ordered>& order, RunWriter& writer) {
    std::vector<Posting> list;
    std::string term;
    const size_t row_bytes = row_width_ * sizeof(PostingArena::List);
    const auto row_of = [&](uint32_t ref) { return &shared_lists_[slot(ref, 0)]; };
    for (size_t i = 0; i < order.size(); ++i) {
      if (i + 2 * kAhead < order.size()) {
        const uint32_t ref = order[i + 2 * kAhead].ref;
        if (ref & kInForest) {
          __builtin_prefetch(&list_of(ref));
        } else {
          const char* bytes = reinterpret_cast<const char*>(row_of(ref));
          for (size_t b = 0; b < row_bytes; b += 64) __builtin_prefetch(bytes + b);
        }
        prefetch_stem_entry(ref);
      }
      if (i + kAhead < order.size()) {
        const uint32_t ref = order[i + kAhead].ref;
        if (ref & kInForest) {
          arena_.prefetch_head(list_of(ref));
        } else {
          const PostingArena::List* lists = row_of(ref);
          for (uint32_t p = 0; p < row_width_; ++p) arena_.prefetch_head(lists[p]);
        }
        prefetch_stem_text(ref);
      }
      const uint32_t ref = order[i].ref;
      list.clear();
      if (ref & kInForest) {
        PostingArena::List& entry = list_of(ref);
        if (entry.empty()) continue;  // a B-tree term of an earlier run of this dictionary
        arena_.gather(entry, list);
        entry = PostingArena::List{};
      } else {
        PostingArena::List* lists = row_of(ref);
        arena_.gather_lists(lists, row_width_, list);
        std::fill(lists, lists + row_width_, PostingArena::List{});
        row_touched_[row(ref)] = 0;
      }
      writer.add(term_of(ref, term), list);
    }
  }

  // Where the spill stands in the device's ordered postings, fetched a slice at a time.
  struct DeviceCursor {
    size_t total = 0, next = 0;     // postings in all, the next one to take
    size_t from = 0, buffered = 0;  // the slice fetched: its first posting and how many
    const Posting* slice = nullptr;
    void take(RunOnDevice& device, size_t count, std::vector<Posting>& out) {
      if (next + count > total) throw Error("GPU analysis: the device's run holds fewer postings than its segments");
      while (count > 0) {
        if (next >= from + buffered) {
          from = next, buffered = std::min(device.fetch_max(), total - next);
          slice = device.fetch(from, buffered);
        }
        const size_t n = std::min(count, from + buffered - next);
        out.insert(out.end(), slice + (next - from), slice + (next - from) + n);
        next += n, count -= n;
      }
    }
    // The next `count` postings where they lie within one fetched slice (fetching the next one if
    // this one is used up), else none taken and an empty span: take() them instead.
    std::span<const Posting> view(RunOnDevice& device, size_t count) {
      if (next + count > total) throw Error("GPU analysis: the device's run holds fewer postings than its segments");
      if (next >= from + buffered) {
        from = next, buffered = std::min(device.fetch_max(), total - next);
        slice = device.fetch(from, buffered);
      }
      if (next + count > from + buffered) return {};
      const std::span<const Posting> view(slice + (next - from), count);
      next += count;
      return view;
    }
  };

  // The device failed: the postings of its run that the spill has not written (`order` from
  // position `at` on; all of them, by default) are replayed into the host's lists.
  void fall_back(const char* why) {
    fall_back_where(why, [](uint32_t) { return true; });
  }
  void fall_back_after(const char* why, const std::vector<Ordered>& order, size_t at) {
    std::vector<uint8_t> pending(analyzer_->shared_stem_capacity(), 0);
    for (size_t i = at; i < order.size(); ++i) {
      if (order[i].segment != kNoSegment) pending[order[i].ref] = 1;
    }
    fall_back_where(why, [&](uint32_t stem) { return pending[stem] != 0; });
  }
  template <typename Keep>
  void fall_back_where(const char* why, Keep keep) {
    if (device_failure_.empty()) device_failure_ = why;
    RunOnDevice* device = std::exchange(device_, nullptr);
    replay_device(*device, keep);
  }
  void replay_device() {
    RunOnDevice* device = std::exchange(device_, nullptr);
    replay_device(*device, [](uint32_t) { return true; });
  }
  template <typename Keep>
  void replay_device(RunOnDevice& device, Keep keep) {
    device.replay([&](uint32_t stem, DocId doc, TermFreq freq) {
      if (!keep(stem)) return;
      PostingArena::List& list = shared_lists_[stem];
      if (list.empty()) shared_touched_.push_back(stem);
      arena_.append(list, {doc, freq});
    });
    device.clear();
    on_device_ = 0;
    forget_device_stems();
  }
  void forget_device_stems() {
    std::fill(device_stem_seen_.begin(), device_stem_seen_.end(), 0);
    device_stems_ = 0;
  }

  // The term's id, a new one (with an empty list) if the dictionary lacks it.
  uint32_t term_id(uint32_t collection, std::string_view suffix) {
    const uint32_t id = forest_.find_or_insert(collection, suffix);
    if (id == lists_.size()) {
      lists_.emplace_back();
      collection_of_.push_back(collection);
    }
    return id;
  }

  TermForest forest_;
  PostingArena arena_{context_.share()};  // blocks sized from the share at the start
  HugeVector<PostingArena::List> lists_;  // by term id
  std::vector<uint32_t> collection_of_;
  // Parser-fed: lists by shared stem id, those with postings in this run, own stem id (less the
  // shared count) → B-tree term id (kNoTerm until looked up), add_document's lists.
  const Analyzer* analyzer_ = nullptr;            // the feeding parser's: the stems' text
  ZeroedTable<PostingArena::List> shared_lists_;  // the shared cache's capacity, pages touched as ids come
  std::vector<uint32_t> shared_touched_;
  HugeVector<uint32_t> term_of_own_;
  std::vector<uint32_t> refs_;
  uint64_t epoch_ = 0;  // of the own stem cache that term_of_own_ follows
  // Routing (set_routing): a shared stem's lists, one per parser that read its documents, side by
  // side from slot stem / parsers × parsers (each parser owns the stems of its residue), and
  // whether this run has any of them yet; without routing, one list a stem, at its id.
  uint32_t row_width_ = 1, self_ = 0;
  DivideBy by_width_{2};  // by row_width_, once routing is set
  std::vector<uint8_t> row_touched_;
  // The run on the device and the postings it holds (add_device_postings); its distinct stems, for
  // which the spill's arrays take host memory (the device's stems, segments and order, 20 bytes;
  // their places and the term order, 16): counted in held(), as the postings on the device are not.
  static constexpr uint64_t kSpillBytesPerDeviceStem = 36;
  RunOnDevice* device_ = nullptr;
  uint64_t on_device_ = 0;
  std::vector<uint64_t> device_stem_seen_;  // a bit by stem id
  uint64_t device_stems_ = 0;
  std::string device_failure_;
  uint64_t device_postings_written_ = 0;
};

}  // namespace

std::unique_ptr<Indexer> make_cpu_indexer(IndexerContext context) {
  return std::make_unique<CpuIndexer>(std::move(context));
}

std::unique_ptr<ParserIndexer> make_parser_indexer(IndexerContext context) {
  return std::make_unique<CpuIndexer>(std::move(context));
}

}  // namespace warp::pipeline
