// codec_bench: bits per integer and decode speed (million integers/s, one core) of every codec on
// docID gaps of uniform and clustered synthetic lists (Anh & Moffat's models, values below 2^29)
// of 2^10..2^24 integers, and on the real posting lists of an index (docID gaps and frequencies).
// usage: codec_bench [--index DIR] [--max-log2 24]
#include <cstdio>
#include <random>
#include <string>

#include "common/codec/codec.hpp"
#include "common/index/index_files.hpp"
#include "common/util/flags.hpp"
#include "tests/bench/bench_util.hpp"

namespace warp {
namespace {

// n distinct sorted values in [lo, hi), clustered: recursive random splits of the range.
void clustered(std::vector<uint32_t>& out, size_t n, uint64_t lo, uint64_t hi, std::mt19937_64& rng) {
  if (n == 0) return;
  if (hi - lo == n) {
    for (uint64_t v = lo; v < hi; ++v) out.push_back(static_cast<uint32_t>(v));
    return;
  }
  if (n < 16 || hi - lo < 4 * n) {
    std::vector<uint32_t> picked;
    while (picked.size() < n) {
      picked.push_back(static_cast<uint32_t>(lo + rng() % (hi - lo)));
      if (picked.size() == n) {
        std::sort(picked.begin(), picked.end());
        picked.erase(std::unique(picked.begin(), picked.end()), picked.end());
      }
    }
    out.insert(out.end(), picked.begin(), picked.end());
    return;
  }
  const size_t left = std::uniform_int_distribution<size_t>(0, n)(rng);
  const uint64_t cut = lo + left + rng() % (hi - lo - n + 1);
  clustered(out, left, lo, cut, rng);
  clustered(out, n - left, cut, hi, rng);
}

std::vector<uint32_t> uniform(size_t n, uint64_t range, std::mt19937_64& rng) {
  std::vector<uint32_t> picked;
  while (picked.size() < n) {
    while (picked.size() < n) picked.push_back(static_cast<uint32_t>(rng() % range));
    std::sort(picked.begin(), picked.end());
    picked.erase(std::unique(picked.begin(), picked.end()), picked.end());
  }
  return picked;
}

std::vector<uint32_t> to_gaps(const std::vector<uint32_t>& sorted) {
  std::vector<uint32_t> gaps(sorted.size());
  uint32_t previous = ~0u;
  for (size_t i = 0; i < sorted.size(); ++i) gaps[i] = sorted[i] - previous - 1, previous = sorted[i];
  return gaps;
}

struct Measurement {
  double bits_per_int;
  double million_ints_per_s;
};

Measurement measure(const Codec& codec, const std::vector<uint32_t>& values) {
  EncodedSequence seq;
  codec.encode(values, seq);
  std::vector<uint32_t> out(values.size() + codec.block_size());
  const EncodedView view = EncodedView::of(seq);
  const double seconds = bench::median_seconds_per_call([&] { codec.decode_all(view, out.data()); });
  if (!std::equal(values.begin(), values.end(), out.begin()))
    std::fprintf(stderr, "DECODE MISMATCH in %s\n", codec.name().data());
  const double bits =
      (seq.words.size() - kReadPaddingWords + seq.endpoints.size()) * 32.0 / std::max<size_t>(1, values.size());
  return {bits, values.size() / seconds / 1e6};
}

void synthetic_table(int max_log2) {
  std::mt19937_64 rng(42);
  const auto codecs = all_codecs();
  for (const char* model : {"uniform", "clustered"}) {
    std::printf("\n### %s docID gaps, values < 2^29 — bits/int (incl. endpoints) | M ints/s decoded\n\n| n |", model);
    for (const Codec* c : codecs) std::printf(" %s |", c->name().data());
    std::printf("\n|---|");
    for (size_t i = 0; i < codecs.size(); ++i) std::printf("---|");
    std::printf("\n");
    for (int log2 = 10; log2 <= max_log2; log2 += 2) {
      const size_t n = size_t{1} << log2;
      std::vector<uint32_t> sorted;
      if (std::string(model) == "uniform") {
        sorted = uniform(n, 1u << 29, rng);
      } else {
        clustered(sorted, n, 0, 1u << 29, rng);
      }
      const std::vector<uint32_t> gaps = to_gaps(sorted);
      std::printf("| 2^%d |", log2);
      for (const Codec* codec : codecs) {
        const Measurement m = measure(*codec, gaps);
        std::printf(" %.2f \\| %.0f |", m.bits_per_int, m.million_ints_per_s);
      }
      std::printf("\n");
      std::fflush(stdout);
    }
  }
}

// Every posting list of the index re-encoded with each codec: docID gaps and frequencies.
void real_lists_table(const std::string& index_path) {
  auto partitions = open_index(index_path);
  std::vector<std::vector<uint32_t>> doc_gaps, freqs;
  size_t postings = 0;
  for (const auto& partition : partitions) {
    const IndexView& view = partition->view();
    for (const auto& [term, info] : view.lexicon) {
      const std::vector<Posting> list = decode_posting_list(view.list(term, info));
      std::vector<uint32_t> gaps, fs;
      DocId previous = kEndDoc;
      for (const Posting& p : list) gaps.push_back(p.doc - previous - 1), fs.push_back(p.freq - 1), previous = p.doc;
      postings += list.size();
      doc_gaps.push_back(std::move(gaps));
      freqs.push_back(std::move(fs));
    }
  }
  std::printf("\n### real posting lists of %s (%zu lists, %zu postings)\n\n", index_path.c_str(), doc_gaps.size(),
              postings);
  std::printf(
      "| codec | docID bits/posting | freq bits/posting | docIDs M ints/s | freqs M ints/s |\n|---|---|---|---|---|\n");
  for (const Codec* codec : all_codecs()) {
    double rates[2], bits[2];
    int column = 0;
    for (auto* lists : {&doc_gaps, &freqs}) {
      std::vector<EncodedSequence> encoded(lists->size());
      size_t words = 0;
      for (size_t i = 0; i < lists->size(); ++i) {
        codec->encode((*lists)[i], encoded[i]);
        words += encoded[i].words.size() - kReadPaddingWords + encoded[i].endpoints.size();
      }
      std::vector<uint32_t> out(1 << 20);
      const double seconds = bench::median_seconds_per_call(
          [&] {
            for (size_t i = 0; i < encoded.size(); ++i) {
              if (out.size() < encoded[i].size + 256) out.resize(encoded[i].size + 256);
              codec->decode_all(EncodedView::of(encoded[i]), out.data());
            }
          },
          3, 0.2);
      rates[column] = postings / seconds / 1e6;
      bits[column] = words * 32.0 / postings;
      ++column;
    }
    std::printf("| %s | %.2f | %.2f | %.0f | %.0f |\n", codec->name().data(), bits[0], bits[1], rates[0], rates[1]);
  }
}

}  // namespace
}  // namespace warp

int main(int argc, char** argv) {
  warp::Flags flags("usage: codec_bench [--index DIR] [--max-log2 N]");
  flags.value("index", "", "also measure the real lists of this index").value("max-log2", "24", "largest list, log2");
  try {
    flags.parse(argc, argv);
    if (flags.help_requested()) return std::printf("%s", flags.help_text().c_str()), 0;
    warp::synthetic_table(static_cast<int>(flags.count("max-log2")));
    if (!flags.get("index").empty()) warp::real_lists_table(flags.get("index"));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "codec_bench: %s\n", e.what());
    return 1;
  }
}
