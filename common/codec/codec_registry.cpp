#include <array>

#include "common/codec/codec_impl.hpp"
#include "common/util/status.hpp"

namespace warp {
namespace {

const std::vector<std::unique_ptr<Codec>>& registry() {
  static const auto* codecs = [] {
    auto* list = new std::vector<std::unique_ptr<Codec>>();
    list->push_back(make_bp128());
    list->push_back(make_bp256());
    list->push_back(make_vbyte());
    list->push_back(make_pfor_ding());
    list->push_back(make_pfor_block());
    list->push_back(make_rice());
    list->push_back(make_parapfor());
    for (CodecId id : {CodecId::kLrc, CodecId::kLrcSeg, CodecId::kSegLrc, CodecId::kHsLrc})
      list->push_back(make_lrc(id));
    return list;
  }();
  return *codecs;
}

}  // namespace

void Codec::decode_all(const EncodedView& seq, uint32_t* out) const {
  auto blocks = decoder(seq);
  for (size_t block = 0; block < block_count(seq.size); ++block) {
    blocks->decode_block(block, out + block * block_size());
  }
}

const Codec& codec_by_id(CodecId id) {
  for (const auto& codec : registry()) {
    if (codec->id() == id) return *codec;
  }
  throw Error("unknown codec id " + std::to_string(static_cast<int>(id)));
}

const Codec& codec_by_name(std::string_view name) {
  std::string known;
  for (const auto& codec : registry()) {
    if (codec->name() == name) return *codec;
    known += (known.empty() ? "" : ", ") + std::string(codec->name());
  }
  throw Error("unknown codec '" + std::string(name) + "' (known: " + known + ")");
}

std::vector<const Codec*> all_codecs() {
  std::vector<const Codec*> codecs;
  for (const auto& codec : registry()) codecs.push_back(codec.get());
  return codecs;
}

}  // namespace warp
