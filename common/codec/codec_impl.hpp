// Private to common/codec: constructors of the registered codecs and shared encoder steps.
#pragma once
#include <algorithm>

#include "common/codec/codec.hpp"

namespace warp {

std::unique_ptr<Codec> make_bp128();
std::unique_ptr<Codec> make_bp256();
std::unique_ptr<Codec> make_vbyte();
std::unique_ptr<Codec> make_pfor_ding();
std::unique_ptr<Codec> make_pfor_block();
std::unique_ptr<Codec> make_rice();
std::unique_ptr<Codec> make_parapfor();
std::unique_ptr<Codec> make_lrc(CodecId id);

inline void begin_sequence(std::span<const uint32_t> values, EncodedSequence& out) {
  out.size = static_cast<uint32_t>(values.size());
  out.words.clear();
  out.endpoints.assign(1, 0);
}

inline void end_sequence(EncodedSequence& out) { out.words.resize(out.words.size() + kReadPaddingWords, 0); }

}  // namespace warp
