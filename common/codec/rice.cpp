// Rice coding laid out for GPUs as in Ding et al. 2009 §6.1: one parameter b per list; each value
// v is q = v >> b in unary (q ones, then a zero) and r = v mod 2^b in b bits, with all binary parts
// in one bit array and all unary parts in another, so both can be decoded by prefix sums.
// endpoints[j] is the bit offset of block j's first unary code (Ding's per-block base sum).
//
// words: [b][word offset of the unary array][binary parts, n*b bits][unary array]
#include <cmath>

#include "common/codec/bit_packing.hpp"
#include "common/codec/codec_impl.hpp"

namespace warp {
namespace {

constexpr uint32_t kBlock = 128;
// The unary part of one value never exceeds 2^16 bits: b is raised for lists with huge outliers.
constexpr unsigned kMaxUnaryWidth = 16;

unsigned choose_parameter(std::span<const uint32_t> values) {
  if (values.empty()) return 0;
  double sum = 0;
  uint32_t max_value = 0;
  for (uint32_t v : values) sum += v, max_value = std::max(max_value, v);
  const double mean = sum / static_cast<double>(values.size());
  // Optimal Golomb/Rice parameter for geometric gaps: 2^b ≈ 0.69 * mean.
  int b = mean * 0.69 >= 1 ? static_cast<int>(std::floor(std::log2(mean * 0.69))) : 0;
  b = std::max<int>(b, static_cast<int>(bit_width32(max_value)) - static_cast<int>(kMaxUnaryWidth));
  return static_cast<unsigned>(std::clamp(b, 0, 32));
}

class RiceDecoder final : public BlockDecoder {
 public:
  explicit RiceDecoder(const EncodedView& seq) : seq_(seq), b_(seq.words[0]), unary_(seq.words + seq.words[1]) {}

  void decode_block(size_t block, uint32_t* out) override {
    const size_t first = block * kBlock;
    const size_t n = std::min<size_t>(kBlock, seq_.size - first);
    unpack_bits(seq_.words + 2 + first / 32 * b_, n, b_, out);
    uint64_t bit = seq_.endpoints[block];
    for (size_t i = 0; i < n; ++i) {
      uint64_t q = 0;
      for (;;) {  // count the ones before the next zero, 32 bits at a time
        const uint32_t word = unary_[bit >> 5] >> (bit & 31);
        const unsigned available = 32 - (bit & 31);
        // Bits past `available` are zeros shifted in, so the count stops there at the latest.
        const unsigned ones = __builtin_ctzll(~static_cast<uint64_t>(word));
        q += ones;
        bit += ones;
        if (ones < available) break;
      }
      ++bit;  // the terminating zero
      out[i] |= static_cast<uint32_t>(q << b_);
    }
  }

 private:
  EncodedView seq_;
  unsigned b_;
  const uint32_t* unary_;
};

class RiceCodec final : public Codec {
 public:
  CodecId id() const override { return CodecId::kRice; }
  std::string_view name() const override { return "rice"; }
  uint32_t block_size() const override { return kBlock; }

  void encode(std::span<const uint32_t> values, EncodedSequence& out) const override {
    begin_sequence(values, out);
    const unsigned b = choose_parameter(values);
    out.words = {b, 0};
    pack_bits(values.data(), values.size(), b, out.words);
    const size_t unary_base = out.words.size();
    out.words[1] = static_cast<uint32_t>(unary_base);
    uint64_t bit = 0;
    for (size_t i = 0; i < values.size(); ++i) {
      const uint64_t q = b >= 32 ? 0 : values[i] >> b;
      const uint64_t end_bit = bit + q + 1;
      out.words.resize(unary_base + (end_bit + 31) / 32, 0);
      for (uint64_t k = bit; k < bit + q; ++k) out.words[unary_base + (k >> 5)] |= 1u << (k & 31);
      bit = end_bit;
      if ((i + 1) % kBlock == 0 || i + 1 == values.size()) out.endpoints.push_back(static_cast<uint32_t>(bit));
    }
    end_sequence(out);
  }

  std::unique_ptr<BlockDecoder> decoder(const EncodedView& seq) const override {
    return std::make_unique<RiceDecoder>(seq);
  }
};

}  // namespace

std::unique_ptr<Codec> make_rice() { return std::make_unique<RiceCodec>(); }

}  // namespace warp
