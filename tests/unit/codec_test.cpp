// Round trip of every codec on random and adversarial sequences, through whole-sequence and
// block-by-block decoding.
#include <gtest/gtest.h>

#include <random>

#include "common/codec/bit_packing.hpp"
#include "common/codec/codec.hpp"
#include "common/util/status.hpp"
#include "tests/support/test_seed.hpp"

namespace warp {
namespace {

std::vector<uint32_t> round_trip(const Codec& codec, const std::vector<uint32_t>& values) {
  EncodedSequence seq;
  codec.encode(values, seq);
  EXPECT_EQ(seq.size, values.size());
  EXPECT_EQ(seq.endpoints.size(), codec.block_count(seq.size) + 1);
  std::vector<uint32_t> decoded(values.size() + codec.block_size());
  codec.decode_all(EncodedView::of(seq), decoded.data());
  decoded.resize(values.size());
  return decoded;
}

// Decodes blocks in a random order, as a query skipping around would.
void expect_random_block_access(const Codec& codec, const std::vector<uint32_t>& values, std::mt19937_64& rng) {
  EncodedSequence seq;
  codec.encode(values, seq);
  auto decoder = codec.decoder(EncodedView::of(seq));
  std::vector<uint32_t> block(codec.block_size());
  const size_t blocks = codec.block_count(seq.size);
  for (int trial = 0; trial < 20 && blocks > 0; ++trial) {
    const size_t j = std::uniform_int_distribution<size_t>(0, blocks - 1)(rng);
    decoder->decode_block(j, block.data());
    const size_t n = std::min<size_t>(codec.block_size(), values.size() - j * codec.block_size());
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(block[i], values[j * codec.block_size() + i]) << "block " << j << " value " << i;
  }
}

class CodecTest : public ::testing::TestWithParam<const Codec*> {};

TEST_P(CodecTest, AdversarialSequences) {
  const Codec& codec = *GetParam();
  const uint32_t max = 0xFFFFFFFFu;
  std::vector<std::vector<uint32_t>> cases = {
      {},
      {0},
      {1},
      {max},
      {max, 0, max},
      std::vector<uint32_t>(1000, 0),
      std::vector<uint32_t>(1000, 1),          // all gaps 1 (stored minus one: also zeros above)
      std::vector<uint32_t>(257, max),
      std::vector<uint32_t>(codec.block_size(), 7),
      std::vector<uint32_t>(codec.block_size() + 1, 7),
      std::vector<uint32_t>(codec.block_size() - 1, 7),
  };
  std::vector<uint32_t> outliers(5000, 3);  // exceptions: mostly small, a few huge
  for (size_t i = 0; i < outliers.size(); i += 97) outliers[i] = max - static_cast<uint32_t>(i);
  cases.push_back(outliers);
  std::vector<uint32_t> powers;
  for (int rep = 0; rep < 9; ++rep) {
    for (unsigned b = 0; b <= 32; ++b) powers.push_back(b == 32 ? max : (1u << b) - (rep & 1));
  }
  cases.push_back(powers);
  for (const auto& values : cases) EXPECT_EQ(round_trip(codec, values), values) << "length " << values.size();
}

TEST_P(CodecTest, RandomSequences) {
  const Codec& codec = *GetParam();
  std::mt19937_64 rng(testing::test_seed());
  for (int trial = 0; trial < 60; ++trial) {
    const size_t length = std::uniform_int_distribution<size_t>(0, 5000)(rng);
    const unsigned width = std::uniform_int_distribution<unsigned>(0, 32)(rng);
    const double exception_rate = std::uniform_real_distribution<double>(0, 0.2)(rng);
    std::vector<uint32_t> values(length);
    for (auto& v : values) {
      const unsigned w = std::bernoulli_distribution(exception_rate)(rng) ? 32 : width;
      v = static_cast<uint32_t>(rng()) & low_mask(w);
    }
    ASSERT_EQ(round_trip(codec, values), values) << "trial " << trial << " length " << length << " width " << width;
    expect_random_block_access(codec, values, rng);
  }
}

TEST_P(CodecTest, GeometricGapsLikePostings) {
  const Codec& codec = *GetParam();
  std::mt19937_64 rng(testing::test_seed() + 1);
  for (double p : {0.9, 0.1, 0.001}) {
    std::geometric_distribution<uint32_t> gap(p);
    std::vector<uint32_t> values(20000);
    for (auto& v : values) v = gap(rng);
    ASSERT_EQ(round_trip(codec, values), values) << "p " << p;
  }
}

INSTANTIATE_TEST_SUITE_P(AllCodecs, CodecTest, ::testing::ValuesIn(all_codecs()),
                         [](const auto& info) {
                           std::string name(info.param->name());
                           for (char& c : name) c = c == '-' ? '_' : c;
                           return name;
                         });

TEST(CodecRegistry, NamesAndIdsResolve) {
  for (const Codec* codec : all_codecs()) {
    EXPECT_EQ(&codec_by_name(codec->name()), codec);
    EXPECT_EQ(&codec_by_id(codec->id()), codec);
  }
  EXPECT_THROW(codec_by_name("gzip"), Error);
  EXPECT_THROW(codec_by_id(static_cast<CodecId>(99)), Error);
}

TEST(BitPacking, PackAndExtractEveryWidth) {
  std::mt19937_64 rng(testing::test_seed());
  for (unsigned b = 0; b <= 32; ++b) {
    std::vector<uint32_t> values(301);
    for (auto& v : values) v = static_cast<uint32_t>(rng()) & low_mask(b);
    std::vector<uint32_t> words;
    pack_bits(values.data(), values.size(), b, words);
    ASSERT_EQ(words.size(), packed_words(values.size(), b));
    words.push_back(0);
    std::vector<uint32_t> out(values.size());
    unpack_bits(words.data(), values.size(), b, out.data());
    ASSERT_EQ(out, values) << "width " << b;
    for (size_t i = 0; i < values.size(); i += 7) ASSERT_EQ(extract_bits(words.data(), i, b), values[i]);
  }
}

}  // namespace
}  // namespace warp
