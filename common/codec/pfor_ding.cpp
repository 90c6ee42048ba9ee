// PForDelta in the variant of Ding et al. 2009 §6.2: one bit width b for the whole list; every
// value keeps its low b bits in a b-bit slot; exceptions (values >= 2^b) store their high bits and
// their position in two separate arrays, which are compressed again with this same scheme
// (recursively, positions as gaps). A uniform slot width keeps block decoding a plain unpack.
//
// words: [b][exception count][offset of high-bits seq][offset of position seq][slots...][seqs...]
// endpoints[j] = index of the first exception of block j, so block j patches exceptions
// endpoints[j]..endpoints[j+1]-1 after unpacking its slots.
#include <array>
#include <cmath>

#include "common/codec/bit_packing.hpp"
#include "common/codec/codec_impl.hpp"

namespace warp {
namespace {

constexpr uint32_t kBlock = 128;
constexpr int kMaxDepth = 3;  // recursion levels for the exception arrays
constexpr size_t kMinRecursiveSize = 32;
constexpr size_t kHeaderWords = 4;

unsigned choose_width(std::span<const uint32_t> values, int depth) {
  std::array<size_t, 33> count_by_width{};
  unsigned max_width = 0;
  for (uint32_t v : values) {
    unsigned w = bit_width32(v);
    ++count_by_width[w];
    max_width = std::max(max_width, w);
  }
  if (depth >= kMaxDepth || values.size() < kMinRecursiveSize) return max_width;
  const double n = static_cast<double>(values.size());
  double best_cost = n * max_width;
  unsigned best = max_width;
  size_t exceptions = 0;
  for (int b = static_cast<int>(max_width) - 1; b >= 0; --b) {
    exceptions += count_by_width[b + 1];
    const double position_bits = std::log2(n / static_cast<double>(exceptions)) + 2;
    const double cost = n * b + static_cast<double>(exceptions) * ((max_width - b) + position_bits);
    if (cost < best_cost) best_cost = cost, best = static_cast<unsigned>(b);
  }
  return best;
}

void serialize(const EncodedSequence& seq, std::vector<uint32_t>& out) {
  out.push_back(seq.size);
  out.push_back(static_cast<uint32_t>(seq.endpoints.size()));
  out.insert(out.end(), seq.endpoints.begin(), seq.endpoints.end());
  out.push_back(static_cast<uint32_t>(seq.words.size()));
  out.insert(out.end(), seq.words.begin(), seq.words.end());
}

EncodedView deserialize(const uint32_t* at) {
  EncodedView view;
  view.size = at[0];
  const uint32_t endpoint_count = at[1];
  view.endpoints = at + 2;
  view.word_count = at[2 + endpoint_count];
  view.words = at + 3 + endpoint_count;
  return view;
}

void encode_level(std::span<const uint32_t> values, EncodedSequence& out, int depth) {
  begin_sequence(values, out);
  const unsigned b = choose_width(values, depth);
  std::vector<uint32_t> high_bits, position_gaps;
  out.words.resize(kHeaderWords, 0);
  out.words[0] = b;
  pack_bits(values.data(), values.size(), b, out.words);
  int64_t last_position = -1;
  for (size_t first = 0; first < values.size(); first += kBlock) {
    const size_t end = std::min<size_t>(values.size(), first + kBlock);
    for (size_t i = first; i < end; ++i) {
      if (b < 32 && (values[i] >> b) != 0) {
        high_bits.push_back(values[i] >> b);
        position_gaps.push_back(static_cast<uint32_t>(static_cast<int64_t>(i) - last_position - 1));
        last_position = static_cast<int64_t>(i);
      }
    }
    out.endpoints.push_back(static_cast<uint32_t>(high_bits.size()));
  }
  out.words[1] = static_cast<uint32_t>(high_bits.size());
  if (high_bits.empty()) {  // no exception arrays to recurse into
    end_sequence(out);
    return;
  }
  EncodedSequence nested;
  out.words[2] = static_cast<uint32_t>(out.words.size());
  encode_level(high_bits, nested, depth + 1);
  serialize(nested, out.words);
  out.words[3] = static_cast<uint32_t>(out.words.size());
  encode_level(position_gaps, nested, depth + 1);
  serialize(nested, out.words);
  end_sequence(out);
}

// Decodes a whole nested sequence (the exception arrays are small next to the list).
std::vector<uint32_t> decode_level(const EncodedView& seq);

class PforDingDecoder final : public BlockDecoder {
 public:
  explicit PforDingDecoder(const EncodedView& seq) : seq_(seq), width_(seq.words[0]) {
    if (seq.size == 0 || seq.words[1] == 0) return;
    high_bits_ = decode_level(deserialize(seq.words + seq.words[2]));
    positions_ = decode_level(deserialize(seq.words + seq.words[3]));
    uint32_t position = ~0u;  // gaps are stored minus one, starting before position 0
    for (auto& p : positions_) p = position += p + 1;
  }
  PforDingExceptions exceptions() const { return {width_, positions_, high_bits_}; }

  void decode_block(size_t block, uint32_t* out) override {
    const size_t first = block * kBlock;
    const size_t n = std::min<size_t>(kBlock, seq_.size - first);
    const uint32_t* slots = seq_.words + kHeaderWords;
    unpack_bits(slots + first / 32 * width_, n, width_, out);  // blocks start on 32-value groups
    for (uint32_t e = seq_.endpoints[block]; e < seq_.endpoints[block + 1]; ++e) {
      out[positions_[e] - first] |= high_bits_[e] << width_;
    }
  }

 private:
  EncodedView seq_;
  uint32_t width_;
  std::vector<uint32_t> high_bits_;
  std::vector<uint32_t> positions_;
};

std::vector<uint32_t> decode_level(const EncodedView& seq) {
  std::vector<uint32_t> values(seq.size);
  PforDingDecoder decoder(seq);
  for (size_t block = 0; block * kBlock < seq.size; ++block)
    decoder.decode_block(block, values.data() + block * kBlock);
  return values;
}

class PforDingCodec final : public Codec {
 public:
  CodecId id() const override { return CodecId::kPforDing; }
  std::string_view name() const override { return "pfor-ding"; }
  uint32_t block_size() const override { return kBlock; }
  void encode(std::span<const uint32_t> values, EncodedSequence& out) const override { encode_level(values, out, 0); }
  std::unique_ptr<BlockDecoder> decoder(const EncodedView& seq) const override {
    return std::make_unique<PforDingDecoder>(seq);
  }
};

}  // namespace

PforDingExceptions pfor_ding_exceptions(const EncodedView& seq) { return PforDingDecoder(seq).exceptions(); }

std::unique_ptr<Codec> make_pfor_ding() { return std::make_unique<PforDingCodec>(); }

}  // namespace warp
