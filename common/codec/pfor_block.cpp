// Classic PForDelta with one bit width per block (Zukowski et al. 2006, Zhang et al. 2008 as
// NewPFD): per block of 128, a header word (b, width of the exceptions' high bits, exception
// count), the b-bit slots, the exception positions as bytes, and the high bits packed.
// endpoints[j] is the word offset of block j.
#include <array>
#include <cstring>

#include "common/codec/bit_packing.hpp"
#include "common/codec/codec_impl.hpp"

namespace warp {
namespace {

constexpr uint32_t kBlock = 128;

class PforBlockDecoder final : public BlockDecoder {
 public:
  explicit PforBlockDecoder(const EncodedView& seq) : seq_(seq) {}
  void decode_block(size_t block, uint32_t* out) override {
    const uint32_t* at = seq_.words + seq_.endpoints[block];
    const size_t n = std::min<size_t>(kBlock, seq_.size - block * kBlock);
    const uint32_t header = at[0];
    const unsigned b = header & 63, high_width = (header >> 6) & 63, exceptions = header >> 12;
    unpack_bits(at + 1, n, b, out);
    if (exceptions == 0) return;
    const uint32_t* after_slots = at + 1 + packed_words(n, b);
    const auto* positions = reinterpret_cast<const uint8_t*>(after_slots);
    const uint32_t* high = after_slots + (exceptions + 3) / 4;
    for (unsigned e = 0; e < exceptions; ++e) out[positions[e]] |= extract_bits(high, e, high_width) << b;
  }

 private:
  EncodedView seq_;
};

class PforBlockCodec final : public Codec {
 public:
  CodecId id() const override { return CodecId::kPforBlock; }
  std::string_view name() const override { return "pfor-block"; }
  uint32_t block_size() const override { return kBlock; }

  void encode(std::span<const uint32_t> values, EncodedSequence& out) const override {
    begin_sequence(values, out);
    std::vector<uint8_t> positions;
    std::vector<uint32_t> high_bits;
    for (size_t first = 0; first < values.size(); first += kBlock) {
      const size_t n = std::min<size_t>(kBlock, values.size() - first);
      const uint32_t* block = values.data() + first;
      // Per exception a position byte and its high bits.
      const auto [b, max_width] = cheapest_patch_width(block, n, 8);
      positions.clear();
      high_bits.clear();
      for (size_t i = 0; i < n; ++i) {
        if (b < 32 && (block[i] >> b) != 0) {
          positions.push_back(static_cast<uint8_t>(i));
          high_bits.push_back(block[i] >> b);
        }
      }
      const unsigned high_width = max_width - b;
      out.words.push_back(b | (high_width << 6) | (static_cast<uint32_t>(positions.size()) << 12));
      pack_bits(block, n, b, out.words);
      if (!positions.empty()) {
        const size_t at = out.words.size();
        out.words.resize(at + (positions.size() + 3) / 4, 0);
        std::memcpy(out.words.data() + at, positions.data(), positions.size());
        pack_bits(high_bits.data(), high_bits.size(), high_width, out.words);
      }
      out.endpoints.push_back(static_cast<uint32_t>(out.words.size()));
    }
    end_sequence(out);
  }

  std::unique_ptr<BlockDecoder> decoder(const EncodedView& seq) const override {
    return std::make_unique<PforBlockDecoder>(seq);
  }
};

}  // namespace

std::unique_ptr<Codec> make_pfor_block() { return std::make_unique<PforBlockCodec>(); }

}  // namespace warp
