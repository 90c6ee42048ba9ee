// Round trip of every codec on random and adversarial sequences, through whole-sequence and
// block-by-block decoding.
#include <gtest/gtest.h>

#include <random>

#include "common/codec/bit_packing.hpp"
#include "common/codec/codec.hpp"
#include "common/codec/lrc_format.hpp"
#include "common/codec/parapfor_format.hpp"
#include "common/util/status.hpp"
#include "tests/support/test_seed.hpp"

namespace warp {
namespace {

// Whether values are docID gaps minus one whose docIDs stay below 2^32 (what docids_only codecs take).
bool docid_gaps(const std::vector<uint32_t>& values) {
  int64_t doc = -1;
  for (uint32_t v : values) {
    doc += int64_t{v} + 1;
    if (doc > 0xFFFFFFFFll) return false;
  }
  return true;
}

std::vector<uint32_t> round_trip(const Codec& codec, const std::vector<uint32_t>& values) {
  EncodedSequence seq;
  if (codec.docids_only() && !docid_gaps(values)) {
    EXPECT_THROW(codec.encode(values, seq), Error) << codec.name() << " must refuse a sequence past 2^32";
    return values;
  }
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
  if (codec.docids_only() && !docid_gaps(values)) return;  // round_trip checked the refusal
  EncodedSequence seq;
  codec.encode(values, seq);
  auto decoder = codec.decoder(EncodedView::of(seq));
  std::vector<uint32_t> block(codec.block_size());
  const size_t blocks = codec.block_count(seq.size);
  for (int trial = 0; trial < 20 && blocks > 0; ++trial) {
    const size_t j = std::uniform_int_distribution<size_t>(0, blocks - 1)(rng);
    decoder->decode_block(j, block.data());
    const size_t n = std::min<size_t>(codec.block_size(), values.size() - j * codec.block_size());
    for (size_t i = 0; i < n; ++i)
      ASSERT_EQ(block[i], values[j * codec.block_size() + i]) << "block " << j << " value " << i;
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
      std::vector<uint32_t>(1000, 1),  // all gaps 1 (stored minus one: also zeros above)
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
    // docids_only codecs get widths whose docIDs mostly stay below 2^32.
    const unsigned width = std::uniform_int_distribution<unsigned>(0, codec.docids_only() ? 19 : 32)(rng);
    const double exception_rate = std::uniform_real_distribution<double>(0, 0.2)(rng);
    std::vector<uint32_t> values(length);
    for (auto& v : values) {
      const unsigned w = std::bernoulli_distribution(exception_rate)(rng) ? (codec.docids_only() ? 20 : 32) : width;
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

INSTANTIATE_TEST_SUITE_P(AllCodecs, CodecTest, ::testing::ValuesIn(all_codecs()), [](const auto& info) {
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

// Sorted distinct docID lists of the shapes the LRC lines must survive.
std::vector<std::vector<uint32_t>> docid_lists(std::mt19937_64& rng) {
  std::vector<std::vector<uint32_t>> lists = {
      {0}, {0xFFFFFFFFu}, {0, 0xFFFFFFFFu}, {5, 6, 7, 0xFFFFFFF0u, 0xFFFFFFFFu}};
  std::vector<uint32_t> dense(3000);
  for (uint32_t i = 0; i < dense.size(); ++i) dense[i] = i;
  lists.push_back(dense);
  for (int trial = 0; trial < 12; ++trial) {
    const size_t n = std::uniform_int_distribution<size_t>(1, 6000)(rng);
    std::vector<uint32_t> docs;
    uint64_t doc = std::uniform_int_distribution<uint32_t>(0, 1000)(rng);
    const int shape = trial % 3;
    for (size_t i = 0; i < n && doc <= 0xFFFFFFFFull; ++i) {
      docs.push_back(static_cast<uint32_t>(doc));
      if (shape == 0) {
        doc += 1 + std::geometric_distribution<uint32_t>(0.01)(rng);  // uniform-ish
      } else if (shape == 1) {
        doc += 1 + (i % 500 == 499 ? 50'000'000 : rng() % 4);  // bursts and jumps
      } else {
        doc += 1 + static_cast<uint32_t>(rng() % (1u << std::uniform_int_distribution<int>(0, 24)(rng)));  // wild
      }
    }
    lists.push_back(docs);
  }
  return lists;
}

TEST(LrcFamily, ElementWiseAccessAndSearchOnCompressedLists) {
  std::mt19937_64 rng(testing::test_seed());
  for (const Codec* codec : all_codecs()) {
    if (!codec->docids_only()) continue;
    for (const auto& docs : docid_lists(rng)) {
      std::vector<uint32_t> gaps(docs.size()), block_last;
      for (size_t i = 0; i < docs.size(); ++i) {
        gaps[i] = docs[i] - (i == 0 ? 0xFFFFFFFFu : docs[i - 1]) - 1;
        if (i % codec->block_size() == codec->block_size() - 1 || i + 1 == docs.size()) block_last.push_back(docs[i]);
      }
      EncodedSequence seq;
      codec->encode(gaps, seq);
      const uint32_t n = static_cast<uint32_t>(docs.size());
      const uint32_t bs = codec->block_size();
      for (uint32_t i = 0; i < n; ++i) {
        ASSERT_EQ(lrc::value_at(seq.words.data(), seq.endpoints.data(), bs, i), docs[i])
            << codec->name() << " position " << i << " of " << n;
        uint32_t at = ~0u;
        ASSERT_TRUE(lrc::find(seq.words.data(), seq.endpoints.data(), block_last.data(), n, bs, docs[i], at))
            << codec->name() << " docID " << docs[i];
        ASSERT_EQ(at, i);
      }
      for (int probe = 0; probe < 2000; ++probe) {
        const uint32_t x = probe % 2 == 0 ? static_cast<uint32_t>(rng()) : docs[rng() % n] + (probe % 4 == 1 ? 1 : -1);
        uint32_t at = 0;
        const bool member = std::binary_search(docs.begin(), docs.end(), x);
        ASSERT_EQ(lrc::find(seq.words.data(), seq.endpoints.data(), block_last.data(), n, bs, x, at), member)
            << codec->name() << " docID " << x;
        if (member) {
          ASSERT_EQ(docs[at], x);
        }
      }
    }
  }
}

TEST(ParaPfor, ValueAtReadsOneValueWithItsException) {
  std::mt19937_64 rng(testing::test_seed());
  const Codec& codec = codec_by_name("parapfor");
  for (int trial = 0; trial < 40; ++trial) {
    std::vector<uint32_t> values(std::uniform_int_distribution<size_t>(1, 1000)(rng));
    for (auto& v : values) v = std::bernoulli_distribution(0.1)(rng) ? static_cast<uint32_t>(rng()) : rng() % 16;
    EncodedSequence seq;
    codec.encode(values, seq);
    for (size_t i = 0; i < values.size(); ++i) {
      const size_t block = i / codec.block_size();
      const uint32_t n =
          static_cast<uint32_t>(std::min<size_t>(codec.block_size(), values.size() - block * codec.block_size()));
      ASSERT_EQ(parapfor::value_at(seq.words.data() + seq.endpoints[block], n, i % codec.block_size()), values[i]) << i;
    }
  }
}

TEST(BitPacking, PackAndExtractEveryWidth) {
  std::mt19937_64 rng(testing::test_seed());
  for (unsigned b = 0; b <= 32; ++b) {
    // Whole groups of 32 and a tail; bits above the width ignored; appended after what is there.
    std::vector<uint32_t> raw(301), values(raw.size());
    for (size_t i = 0; i < raw.size(); ++i) raw[i] = static_cast<uint32_t>(rng()), values[i] = raw[i] & low_mask(b);
    std::vector<uint32_t> words = {0xDEADBEEFu, 0x01234567u};
    pack_bits(raw.data(), raw.size(), b, words);
    ASSERT_EQ(words.size(), 2 + packed_words(values.size(), b));
    ASSERT_EQ(words[0], 0xDEADBEEFu);
    ASSERT_EQ(words[1], 0x01234567u);
    words.erase(words.begin(), words.begin() + 2);
    words.push_back(0);
    std::vector<uint32_t> out(values.size());
    unpack_bits(words.data(), values.size(), b, out.data());
    ASSERT_EQ(out, values) << "width " << b;
    for (size_t i = 0; i < values.size(); ++i)
      ASSERT_EQ(extract_bits(words.data(), i, b), values[i]) << "width " << b << ", value " << i;
  }
}

}  // namespace
}  // namespace warp
