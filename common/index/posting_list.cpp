#include "common/index/posting_list.hpp"

#include <algorithm>
#include <bit>
#include <cstring>

#include "common/util/status.hpp"

namespace warp {
namespace {
constexpr size_t kHeaderWords = 6;
}

std::vector<uint32_t> encode_posting_list(std::span<const Posting> postings, std::span<const Score> scores,
                                          const Codec& codec) {
  std::vector<uint32_t> words;
  encode_posting_list(postings, scores, codec, words);
  return words;
}

void encode_posting_list(std::span<const Posting> postings, std::span<const Score> scores, const Codec& codec,
                         std::vector<uint32_t>& words) {
  const uint32_t block_size = codec.block_size();
  const size_t count = postings.size();
  const size_t blocks = (count + block_size - 1) / block_size;
  // Scratch kept per thread: a partition build encodes millions of mostly short lists, and eight
  // allocations and frees a list were 3% of a one-thread build.
  thread_local std::vector<uint32_t> gaps, freqs, block_last, block_max;
  thread_local EncodedSequence doc_seq, freq_seq;
  gaps.resize(count), freqs.resize(count), block_last.resize(blocks), block_max.resize(blocks);
  DocId previous = kEndDoc;  // -1: the first gap is doc itself
  Score list_max = 0;
  // Block by block: a division and a remainder by the (run-time) block size for every posting had
  // been three fifths of this function's time in a 16-thread build's profile.
  for (size_t block = 0, first = 0; first < count; ++block, first += block_size) {
    const size_t end = std::min<size_t>(count, first + block_size);
    Score best = scores[first];
    for (size_t i = first; i < end; ++i) {
      gaps[i] = postings[i].doc - previous - 1;
      previous = postings[i].doc;
      freqs[i] = postings[i].freq - 1;
      best = std::max(best, scores[i]);
    }
    block_last[block] = postings[end - 1].doc;
    block_max[block] = std::bit_cast<uint32_t>(best);
    list_max = std::max(list_max, best);
  }
  codec.encode(gaps, doc_seq);
  codec.frequency_codec().encode(freqs, freq_seq);

  // The sequences' read padding is dropped: the arena holding the lists pads its end instead.
  const size_t doc_words = doc_seq.words.size() - kReadPaddingWords;
  const size_t freq_words = freq_seq.words.size() - kReadPaddingWords;
  words.clear();
  words.reserve(kHeaderWords + 4 * blocks + 2 + doc_words + freq_words);
  words.insert(words.end(), {static_cast<uint32_t>(count), static_cast<uint32_t>(codec.id()),
                             static_cast<uint32_t>(blocks), static_cast<uint32_t>(doc_words),
                             static_cast<uint32_t>(freq_words), std::bit_cast<uint32_t>(list_max)});
  words.insert(words.end(), block_last.begin(), block_last.end());
  words.insert(words.end(), block_max.begin(), block_max.end());
  words.insert(words.end(), doc_seq.endpoints.begin(), doc_seq.endpoints.end());
  words.insert(words.end(), freq_seq.endpoints.begin(), freq_seq.endpoints.end());
  words.insert(words.end(), doc_seq.words.begin(), doc_seq.words.begin() + static_cast<std::ptrdiff_t>(doc_words));
  words.insert(words.end(), freq_seq.words.begin(), freq_seq.words.begin() + static_cast<std::ptrdiff_t>(freq_words));
}

PostingListView PostingListView::parse(const uint32_t* words, size_t word_count, const std::string& term) {
  const auto fail = [&](const std::string& why) -> PostingListView {
    throw Error("posting list of term '" + term + "' is malformed: " + why);
  };
  if (word_count < kHeaderWords) return fail("shorter than its header");
  PostingListView view;
  view.count = words[0];
  view.codec = &codec_by_id(static_cast<CodecId>(words[1]));
  view.freq_codec = &view.codec->frequency_codec();
  view.block_count = words[2];
  const uint64_t doc_words = words[3], freq_words = words[4];
  view.max_score = std::bit_cast<Score>(words[5]);
  if (view.block_count != view.codec->block_count(view.count)) return fail("block count does not match size");
  const uint64_t needed = kHeaderWords + 4ull * view.block_count + 2 + doc_words + freq_words;
  if (needed != word_count)
    return fail("size " + std::to_string(word_count) + " words, expected " + std::to_string(needed));
  const uint32_t* at = words + kHeaderWords;
  view.block_last_docid = at;
  view.block_max_score = reinterpret_cast<const Score*>(at + view.block_count);
  at += 2 * view.block_count;
  const uint32_t* doc_endpoints = at;
  const uint32_t* freq_endpoints = at + view.block_count + 1;
  at += 2 * (view.block_count + 1);
  view.docs = {view.count, doc_endpoints, at, doc_words};
  view.freqs = {view.count, freq_endpoints, at + doc_words, freq_words};
  return view;
}

void rewrite_block_maxima(uint32_t* words, std::span<const Score> block_max) {
  Score list_max = 0;
  for (size_t block = 0; block < block_max.size(); ++block) {
    words[kHeaderWords + block_max.size() + block] = std::bit_cast<uint32_t>(block_max[block]);
    list_max = std::max(list_max, block_max[block]);
  }
  words[5] = std::bit_cast<uint32_t>(list_max);
}

std::vector<Posting> decode_posting_list(const PostingListView& list) {
  std::vector<uint32_t> gaps(list.count + list.codec->block_size()), freqs(gaps.size());
  list.codec->decode_all(list.docs, gaps.data());
  list.freq_codec->decode_all(list.freqs, freqs.data());
  std::vector<Posting> postings(list.count);
  DocId previous = kEndDoc;
  for (size_t i = 0; i < list.count; ++i) {
    previous = previous + gaps[i] + 1;
    postings[i] = {previous, freqs[i] + 1};
  }
  return postings;
}

}  // namespace warp
