// Binary packing with an endpoints array instead of per-block selectors (GPU-BP128/BP256,
// Mallia et al. 2019 §3.1). endpoints[j] is the word offset of block j; for a full block the bit
// width is (endpoints[j+1]-endpoints[j])*32/block_size. A partial last block cannot be told apart
// by length alone, so it starts with one word holding its bit width.
#include "common/codec/bit_packing.hpp"
#include "common/codec/codec_impl.hpp"

namespace warp {
namespace {

class BpDecoder final : public BlockDecoder {
 public:
  BpDecoder(const EncodedView& seq, uint32_t block_size) : seq_(seq), block_size_(block_size) {}
  void decode_block(size_t block, uint32_t* out) override {
    const uint32_t begin = seq_.endpoints[block];
    const uint32_t end = seq_.endpoints[block + 1];
    const size_t first = block * block_size_;
    const size_t n = std::min<size_t>(block_size_, seq_.size - first);
    if (n == block_size_) {
      unpack_bits(seq_.words + begin, n, (end - begin) * 32 / block_size_, out);
    } else {
      unpack_bits(seq_.words + begin + 1, n, seq_.words[begin], out);
    }
  }

 private:
  EncodedView seq_;
  uint32_t block_size_;
};

class BpCodec final : public Codec {
 public:
  BpCodec(CodecId id, std::string_view name, uint32_t block_size) : id_(id), name_(name), block_size_(block_size) {}
  CodecId id() const override { return id_; }
  std::string_view name() const override { return name_; }
  uint32_t block_size() const override { return block_size_; }

  void encode(std::span<const uint32_t> values, EncodedSequence& out) const override {
    begin_sequence(values, out);
    for (size_t first = 0; first < values.size(); first += block_size_) {
      const size_t n = std::min<size_t>(block_size_, values.size() - first);
      uint32_t max_value = 0;
      for (size_t i = 0; i < n; ++i) max_value |= values[first + i];
      const unsigned bits = bit_width32(max_value);
      if (n < block_size_) out.words.push_back(bits);
      pack_bits(values.data() + first, n, bits, out.words);
      out.endpoints.push_back(static_cast<uint32_t>(out.words.size()));
    }
    end_sequence(out);
  }

  std::unique_ptr<BlockDecoder> decoder(const EncodedView& seq) const override {
    return std::make_unique<BpDecoder>(seq, block_size_);
  }

 private:
  CodecId id_;
  std::string_view name_;
  uint32_t block_size_;
};

}  // namespace

std::unique_ptr<Codec> make_bp128() { return std::make_unique<BpCodec>(CodecId::kBp128, "bp128", 128); }
std::unique_ptr<Codec> make_bp256() { return std::make_unique<BpCodec>(CodecId::kBp256, "bp256", 256); }

}  // namespace warp
