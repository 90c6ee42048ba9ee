// Integer-sequence codecs. Every codec cuts a sequence into fixed-size blocks that can be decoded
// independently, and describes them with an endpoints array of nblocks+1 entries, as GPU-BP does
// (Mallia et al. 2019 §3): a GPU thread block decodes block j from endpoints[j] alone (plus a small
// list-wide part for Ding et al.'s PForDelta). What an endpoint counts is up to each codec.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace warp {

enum class CodecId : uint8_t {
  kBp128 = 1,
  kBp256 = 2,
  kVByte = 3,      // GPU-VByte, 2-bit length selectors ahead of the data bytes
  kPforDing = 4,   // Ding et al. 2009 §6.2: one b per list, recursive exception arrays
  kPforBlock = 5,  // classic PForDelta, one b per block, exceptions in the block
  kRice = 6,       // Ding et al. 2009 §6.1: unary and binary parts in two bit arrays
  kParaPfor = 7,   // Ao et al. 2011 §4.1: PFor with exception indices, patched in parallel
  kLrc = 8,        // Ao et al. 2011 §4.2: linear regression of docID on position, one line per list
  kLrcSeg = 9,     //   the global line, fluctuation ranges per segment
  kSegLrc = 10,    //   a line per segment
  kHsLrc = 11,     //   a line per hash segment (§4.3: segments are the docIDs' high bits)
};

// Decoders may read up to this many words past the end of a sequence's data (64-bit windows,
// 4-byte loads). Whoever holds encoded data guarantees they exist: EncodedSequence::words ends
// with them, and an arena of posting lists ends with them once (lists inside it are unpadded).
inline constexpr size_t kReadPaddingWords = 2;

// A compressed sequence of 32-bit integers (any value, 2^32-1 included).
struct EncodedSequence {
  uint32_t size = 0;                // number of integers
  std::vector<uint32_t> endpoints;  // nblocks + 1 entries
  std::vector<uint32_t> words;      // payload, then kReadPaddingWords zero words
};

// A non-owning view of an EncodedSequence, e.g. into a posting-list blob held in memory.
struct EncodedView {
  uint32_t size = 0;
  const uint32_t* endpoints = nullptr;
  const uint32_t* words = nullptr;
  size_t word_count = 0;

  static EncodedView of(const EncodedSequence& seq) {
    return {seq.size, seq.endpoints.data(), seq.words.data(), seq.words.size()};
  }
};

// Decodes blocks of one sequence; holds what the codec prepares once per sequence.
class BlockDecoder {
 public:
  virtual ~BlockDecoder() = default;
  // Writes the values of block `block` (block_size of them, fewer in the last block) to `out`.
  virtual void decode_block(size_t block, uint32_t* out) = 0;
};

class Codec {
 public:
  virtual ~Codec() = default;
  virtual CodecId id() const = 0;
  virtual std::string_view name() const = 0;
  virtual uint32_t block_size() const = 0;
  virtual void encode(std::span<const uint32_t> values, EncodedSequence& out) const = 0;
  virtual std::unique_ptr<BlockDecoder> decoder(const EncodedView& seq) const = 0;

  // Codecs of docID sequences only (the LRC family): the values are docID gaps minus one whose
  // running docID stays below 2^32; encode throws Error otherwise.
  virtual bool docids_only() const { return false; }
  // The codec of a posting list's frequencies when this codec encodes its docIDs (same block size).
  virtual const Codec& frequency_codec() const { return *this; }

  size_t block_count(uint32_t size) const { return (size + block_size() - 1) / block_size(); }
  // Decodes a whole sequence (tests, benchmarks, list-wide GPU uploads).
  void decode_all(const EncodedView& seq, uint32_t* out) const;
};

// The list-wide exception arrays of a pfor-ding sequence, decoded: absolute positions and the high
// bits to add at each (above the list's bit width `width`). The GPU decoders patch from these.
struct PforDingExceptions {
  uint32_t width = 0;
  std::vector<uint32_t> positions;
  std::vector<uint32_t> high_bits;
};
PforDingExceptions pfor_ding_exceptions(const EncodedView& seq);

// The codec registry: the one place that maps names and ids to codecs.
const Codec& codec_by_id(CodecId id);               // throws Error on an unknown id
const Codec& codec_by_name(std::string_view name);  // throws Error listing the known names
std::vector<const Codec*> all_codecs();

}  // namespace warp
