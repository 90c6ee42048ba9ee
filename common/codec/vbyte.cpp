// GPU-VByte (Mallia et al. 2019 §3.2): per block of 128 integers, 2-bit selectors (byte length
// minus one) for all values first, then the value bytes, little-endian. endpoints[j] is the word
// offset of block j; a thread finds its value by a prefix sum of the lengths before it.
#include <cstring>

#include "common/codec/codec_impl.hpp"

namespace warp {
namespace {

constexpr uint32_t kBlock = 128;

unsigned byte_length(uint32_t v) { return v < (1u << 8) ? 1 : v < (1u << 16) ? 2 : v < (1u << 24) ? 3 : 4; }

class VByteDecoder final : public BlockDecoder {
 public:
  explicit VByteDecoder(const EncodedView& seq) : seq_(seq) {}
  void decode_block(size_t block, uint32_t* out) override {
    const uint32_t* base = seq_.words + seq_.endpoints[block];
    const size_t n = std::min<size_t>(kBlock, seq_.size - block * kBlock);
    const size_t selector_words = (n * 2 + 31) / 32;
    const auto* data = reinterpret_cast<const uint8_t*>(base + selector_words);
    for (size_t i = 0; i < n; ++i) {
      const unsigned length = ((base[i / 16] >> ((i % 16) * 2)) & 3) + 1;
      uint32_t v = 0;
      std::memcpy(&v, data, 4);  // padded: reading 4 bytes is always in bounds
      out[i] = length == 4 ? v : v & ((1u << (8 * length)) - 1);
      data += length;
    }
  }

 private:
  EncodedView seq_;
};

class VByteCodec final : public Codec {
 public:
  CodecId id() const override { return CodecId::kVByte; }
  std::string_view name() const override { return "vbyte"; }
  uint32_t block_size() const override { return kBlock; }

  void encode(std::span<const uint32_t> values, EncodedSequence& out) const override {
    begin_sequence(values, out);
    std::vector<uint8_t> bytes;
    for (size_t first = 0; first < values.size(); first += kBlock) {
      const size_t n = std::min<size_t>(kBlock, values.size() - first);
      const size_t selector_base = out.words.size();
      out.words.resize(selector_base + (n * 2 + 31) / 32, 0);
      bytes.clear();
      for (size_t i = 0; i < n; ++i) {
        const uint32_t v = values[first + i];
        const unsigned length = byte_length(v);
        out.words[selector_base + i / 16] |= (length - 1) << ((i % 16) * 2);
        for (unsigned k = 0; k < length; ++k) bytes.push_back(static_cast<uint8_t>(v >> (8 * k)));
      }
      const size_t data_base = out.words.size();
      out.words.resize(data_base + (bytes.size() + 3) / 4, 0);
      std::memcpy(out.words.data() + data_base, bytes.data(), bytes.size());
      out.endpoints.push_back(static_cast<uint32_t>(out.words.size()));
    }
    end_sequence(out);
  }

  std::unique_ptr<BlockDecoder> decoder(const EncodedView& seq) const override {
    return std::make_unique<VByteDecoder>(seq);
  }
};

}  // namespace

std::unique_ptr<Codec> make_vbyte() { return std::make_unique<VByteCodec>(); }

}  // namespace warp
