// ParaPFor (Ao et al. 2011 §4.1, Appendix G); the format is in parapfor_format.hpp.
#include <array>

#include "common/codec/bit_packing.hpp"
#include "common/codec/codec_impl.hpp"
#include "common/codec/parapfor_format.hpp"

namespace warp {
namespace {

constexpr uint32_t kBlock = 128;

class ParaPforDecoder final : public BlockDecoder {
 public:
  explicit ParaPforDecoder(const EncodedView& seq) : seq_(seq) {}
  void decode_block(size_t block, uint32_t* out) override {
    const uint32_t* at = seq_.words + seq_.endpoints[block];
    const uint32_t n = static_cast<uint32_t>(std::min<size_t>(kBlock, seq_.size - block * kBlock));
    const parapfor::BlockHeader h = parapfor::header(at[0]);
    unpack_bits(at + 1, n, h.b, out);
    const uint32_t* indices = at + 1 + parapfor::packed(n, h.b);
    const uint32_t* overflow = indices + parapfor::packed(h.en, h.ib);
    for (uint32_t e = 0; e < h.en; ++e) out[extract_bits(indices, e, h.ib)] |= extract_bits(overflow, e, h.hb) << h.b;
  }

 private:
  EncodedView seq_;
};

class ParaPforCodec final : public Codec {
 public:
  CodecId id() const override { return CodecId::kParaPfor; }
  std::string_view name() const override { return "parapfor"; }
  uint32_t block_size() const override { return kBlock; }

  void encode(std::span<const uint32_t> values, EncodedSequence& out) const override {
    begin_sequence(values, out);
    std::vector<uint32_t> indices, overflow;
    for (size_t first = 0; first < values.size(); first += kBlock) {
      const uint32_t n = static_cast<uint32_t>(std::min<size_t>(kBlock, values.size() - first));
      const uint32_t* block = values.data() + first;
      // Per exception an index of up to bit_width(n - 1) bits and its overflow.
      const auto [b, max_width] = cheapest_patch_width(block, n, bit_width32(n - 1));
      indices.clear();
      overflow.clear();
      for (uint32_t i = 0; i < n; ++i) {
        if (b < 32 && (block[i] >> b) != 0) {
          indices.push_back(i);
          overflow.push_back(block[i] >> b);
        }
      }
      const unsigned ib = indices.empty() ? 0 : bit_width32(indices.back());
      const unsigned hb = max_width - b;
      out.words.push_back(parapfor::header_word(b, hb, ib, static_cast<uint32_t>(indices.size())));
      pack_bits(block, n, b, out.words);
      pack_bits(indices.data(), indices.size(), ib, out.words);
      pack_bits(overflow.data(), overflow.size(), hb, out.words);
      out.endpoints.push_back(static_cast<uint32_t>(out.words.size()));
    }
    end_sequence(out);
  }

  std::unique_ptr<BlockDecoder> decoder(const EncodedView& seq) const override {
    return std::make_unique<ParaPforDecoder>(seq);
  }
};

}  // namespace

std::unique_ptr<Codec> make_parapfor() { return std::make_unique<ParaPforCodec>(); }

}  // namespace warp
