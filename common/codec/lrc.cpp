// The LRC codecs (Ao et al. 2011 §4.2–4.3); the format is in lrc_format.hpp.
#include <algorithm>
#include <bit>
#include <cmath>

#include "common/codec/bit_packing.hpp"
#include "common/codec/codec_impl.hpp"
#include "common/codec/lrc_format.hpp"
#include "common/util/status.hpp"

namespace warp {
namespace {

constexpr uint32_t kBlock = 128;
constexpr uint32_t kHashSegment = 128;  // HS_LRC: about this many docIDs per hash segment on average

struct Line {
  float alpha = 0;
  int64_t base = 0;
  uint64_t range = 0;  // largest deviation
};

// Least-squares slope of S over positions [first, first+n), then the base that makes every
// deviation >= 0. A line whose deviations would not fit 32 bits falls back to slope 0.
Line fit_line(const std::vector<uint32_t>& s, uint32_t first, uint32_t n, bool regress, float given_alpha) {
  Line line;
  if (regress && n > 1) {
    const double mean_l = (n - 1) / 2.0;
    double mean_s = 0;
    for (uint32_t l = 0; l < n; ++l) mean_s += s[first + l];
    mean_s /= n;
    double cov = 0, var = 0;
    for (uint32_t l = 0; l < n; ++l) {
      cov += (l - mean_l) * (s[first + l] - mean_s);
      var += (l - mean_l) * (l - mean_l);
    }
    const double alpha = cov / var;
    line.alpha = std::isfinite(alpha) && alpha > 0 ? static_cast<float>(alpha) : 0.0f;
  } else if (!regress) {
    line.alpha = given_alpha;
  }
  for (int attempt = 0; attempt < 2; ++attempt) {
    int64_t low = INT64_MAX, high = INT64_MIN;
    for (uint32_t l = 0; l < n; ++l) {
      const int64_t d = static_cast<int64_t>(s[first + l]) - lrc::predict(line.alpha, 0, l);
      low = std::min(low, d);
      high = std::max(high, d);
    }
    line.base = n == 0 ? 0 : low;
    line.range = n == 0 ? 0 : static_cast<uint64_t>(high - low);
    if (line.range <= 0xFFFFFFFFull) break;
    line.alpha = 0;  // S itself is below 2^32, so slope 0 always fits
  }
  return line;
}

unsigned bit_width64(uint64_t v) { return v == 0 ? 0 : 64 - std::countl_zero(v); }

void put_i64(uint32_t* at, int64_t v) {
  at[0] = static_cast<uint32_t>(static_cast<uint64_t>(v));
  at[1] = static_cast<uint32_t>(static_cast<uint64_t>(v) >> 32);
}

class LrcDecoder final : public BlockDecoder {
 public:
  explicit LrcDecoder(const EncodedView& seq) : seq_(seq) {}
  // Gaps minus one, like every codec; the docIDs themselves decode one by one.
  void decode_block(size_t block, uint32_t* out) override {
    const uint32_t first = static_cast<uint32_t>(block * kBlock);
    const uint32_t n = std::min<uint32_t>(kBlock, seq_.size - first);
    uint32_t previous = block == 0 ? 0xFFFFFFFFu : lrc::value_at(seq_.words, seq_.endpoints, kBlock, first - 1);
    uint32_t r = seq_.endpoints[block];
    const uint32_t last_record = seq_.endpoints[block + 1];
    for (uint32_t i = 0; i < n; ++i) {
      while (r < last_record && lrc::record(seq_.words, r + 1)[lrc::kFirst] <= first + i) ++r;
      const uint32_t doc = lrc::value_in_record(seq_.words, r, first + i);
      out[i] = doc - previous - 1;
      previous = doc;
    }
  }

 private:
  EncodedView seq_;
};

class LrcCodec final : public Codec {
 public:
  LrcCodec(CodecId id, std::string_view name, lrc::Variant variant) : id_(id), name_(name), variant_(variant) {}
  CodecId id() const override { return id_; }
  std::string_view name() const override { return name_; }
  uint32_t block_size() const override { return kBlock; }
  bool docids_only() const override { return true; }
  const Codec& frequency_codec() const override { return codec_by_id(CodecId::kParaPfor); }

  void encode(std::span<const uint32_t> values, EncodedSequence& out) const override {
    begin_sequence(values, out);
    const uint32_t n = static_cast<uint32_t>(values.size());
    std::vector<uint32_t> s(n);
    int64_t running = -1;
    for (uint32_t i = 0; i < n; ++i) {
      running += int64_t{values[i]} + 1;
      if (running > 0xFFFFFFFFll)
        throw Error(std::string(name_) + " encodes docID sequences: the running docID passes 2^32 at value " +
                    std::to_string(i));
      s[i] = static_cast<uint32_t>(running);
    }
    out.words.assign(lrc::kHeaderWords, 0);
    out.words[lrc::kVariant] = variant_;
    if (n == 0) {
      end_sequence(out);
      return;
    }
    const Line global = fit_line(s, 0, n, true, 0);
    out.words[lrc::kGlobalAlpha] = std::bit_cast<uint32_t>(global.alpha);
    put_i64(&out.words[lrc::kGlobalBase], global.base);
    out.words[lrc::kGlobalRange] = static_cast<uint32_t>(global.range);

    // Segments as (first position, length).
    std::vector<std::pair<uint32_t, uint32_t>> segments;
    uint32_t shift = 0;
    if (variant_ == lrc::kLrc) {
      segments.push_back({0, n});
    } else if (variant_ == lrc::kHsLrc) {
      const unsigned k = bit_width32(s.back());
      const unsigned m = bit_width32((n + kHashSegment - 1) / kHashSegment - 1);  // smallest m: n/128 <= 2^m
      shift = std::min(k > m ? k - m : 0u, 31u);                                  // a 32-bit shift would be undefined
      for (uint32_t i = 0; i < n;) {
        uint32_t j = i + 1;
        while (j < n && (s[j] >> shift) == (s[i] >> shift)) ++j;
        segments.push_back({i, j - i});
        i = j;
      }
    } else {
      for (uint32_t first = 0; first < n; first += kBlock) segments.push_back({first, std::min(kBlock, n - first)});
    }

    const size_t records_at = out.words.size();
    out.words.resize(records_at + segments.size() * lrc::kRecordWords, 0);
    std::vector<uint32_t> deviations;
    for (size_t r = 0; r < segments.size(); ++r) {
      const auto [first, length] = segments[r];
      const Line line =
          variant_ == lrc::kLrc ? global : fit_line(s, first, length, variant_ != lrc::kLrcSeg, global.alpha);
      const unsigned bits = bit_width64(line.range);
      deviations.resize(length);
      for (uint32_t l = 0; l < length; ++l)
        deviations[l] = static_cast<uint32_t>(s[first + l] - lrc::predict(line.alpha, line.base, l));
      uint32_t* rec = &out.words[records_at + r * lrc::kRecordWords];
      rec[lrc::kFirst] = first;
      rec[lrc::kData] = static_cast<uint32_t>(out.words.size());
      rec[lrc::kBits] = bits;
      rec[lrc::kAlpha] = std::bit_cast<uint32_t>(line.alpha);
      put_i64(rec + lrc::kBase, line.base);
      pack_bits(deviations.data(), length, bits, out.words);  // may reallocate: rec is not used after
    }
    out.words[lrc::kSegments] = static_cast<uint32_t>(segments.size());
    if (variant_ == lrc::kHsLrc) {
      const uint32_t buckets = (s.back() >> shift) + 1;
      out.words[lrc::kHashShift] = shift;
      out.words[lrc::kBuckets] = buckets;
      out.words[lrc::kHashTable] = static_cast<uint32_t>(out.words.size());
      uint32_t r = 0;
      for (uint32_t h = 0; h <= buckets; ++h) {
        while (r < segments.size() && (s[segments[r].first] >> shift) < h) ++r;
        out.words.push_back(r);
      }
    }
    out.endpoints.clear();
    uint32_t r = 0;
    for (uint32_t first = 0; first < n; first += kBlock) {
      while (r + 1 < segments.size() && segments[r + 1].first <= first) ++r;
      out.endpoints.push_back(r);
    }
    out.endpoints.push_back(static_cast<uint32_t>(segments.size() - 1));
    end_sequence(out);
  }

  std::unique_ptr<BlockDecoder> decoder(const EncodedView& seq) const override {
    return std::make_unique<LrcDecoder>(seq);
  }

 private:
  CodecId id_;
  std::string_view name_;
  lrc::Variant variant_;
};

}  // namespace

std::unique_ptr<Codec> make_lrc(CodecId id) {
  switch (id) {
    case CodecId::kLrc:
      return std::make_unique<LrcCodec>(id, "lrc", lrc::kLrc);
    case CodecId::kLrcSeg:
      return std::make_unique<LrcCodec>(id, "lrc-seg", lrc::kLrcSeg);
    case CodecId::kSegLrc:
      return std::make_unique<LrcCodec>(id, "seg-lrc", lrc::kSegLrc);
    default:
      return std::make_unique<LrcCodec>(CodecId::kHsLrc, "hs-lrc", lrc::kHsLrc);
  }
}

}  // namespace warp
