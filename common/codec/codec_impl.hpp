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

// Patched frame of reference (pfor-block, parapfor): the slot width b of least total size for a
// block of n values, n*b bits of slots plus, per value wider than b, `per_exception_bits` of
// position and its bits above b. Also gives the widest value's width.
struct PatchWidth {
  unsigned b = 0;
  unsigned max_width = 0;
};
PatchWidth cheapest_patch_width(const uint32_t* block, size_t n, unsigned per_exception_bits);

inline void end_sequence(EncodedSequence& out) { out.words.resize(out.words.size() + kReadPaddingWords, 0); }

}  // namespace warp
