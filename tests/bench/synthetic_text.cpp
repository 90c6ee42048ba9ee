// synthetic_text: writes a JSONL corpus of synthetic English-like text for indexing benchmarks:
// a vocabulary of pronounceable words (lengths like English, 2–14 letters), Zipfian word
// frequencies (s = 1.0), gamma-distributed document lengths (mean 400 words), titles of 3–8 words.
// usage: synthetic_text --out FILE.jsonl --megabytes N [--vocabulary 500000] [--seed 1]
#include <cstdio>
#include <fstream>
#include <random>
#include <string>

#include "common/util/flags.hpp"
#include "tests/bench/synthetic_collection.hpp"

int main(int argc, char** argv) {
  warp::Flags flags("usage: synthetic_text --out FILE.jsonl --megabytes N");
  flags.value("out", "", "output JSONL file")
      .value("megabytes", "1000", "approximate output size")
      .value("vocabulary", "500000", "distinct words")
      .value("seed", "1", "random seed");
  try {
    flags.parse(argc, argv);
    if (flags.help_requested() || flags.get("out").empty()) return std::printf("%s", flags.help_text().c_str()), 0;
    std::mt19937_64 rng(flags.count("seed"));
    const uint32_t vocabulary = static_cast<uint32_t>(flags.count("vocabulary"));
    // Pronounceable words: alternating consonant and vowel groups; frequent ranks get short words.
    const char* consonants[] = {"b", "c", "d", "f", "g", "h",  "l",  "m",  "n",  "p",
                                "r", "s", "t", "v", "w", "st", "th", "ch", "tr", "pl"};
    const char* vowels[] = {"a", "e", "i", "o", "u", "ea", "ou", "io"};
    std::vector<std::string> words(vocabulary);
    for (uint32_t r = 0; r < vocabulary; ++r) {
      const int syllables = 1 + static_cast<int>(std::log10(r + 10.0) * 0.8) + static_cast<int>(rng() % 2);
      std::string w;
      for (int s = 0; s < syllables; ++s) w += std::string(consonants[rng() % 20]) + vowels[rng() % 8];
      if (rng() % 3 == 0) w += consonants[rng() % 15];
      words[r] = w;
    }
    warp::synthetic::ZipfSampler zipf(vocabulary, 1.0);
    std::gamma_distribution<double> length(2.0, 200.0);
    std::ofstream out(flags.get("out"));
    const uint64_t target = flags.count("megabytes") << 20;
    uint64_t written = 0, documents = 0;
    std::string line;
    while (written < target) {
      line = "{\"id\":\"s" + std::to_string(documents) + "\",\"title\":\"";
      for (int i = 3 + static_cast<int>(rng() % 6); i > 0; --i) line += words[zipf(rng)] + (i > 1 ? " " : "");
      line += "\",\"body\":\"";
      for (int i = std::max(5, static_cast<int>(length(rng))); i > 0; --i) {
        line += words[zipf(rng)];
        line += (rng() % 12 == 0) ? ". " : " ";
      }
      line += "\"}\n";
      out << line;
      written += line.size();
      ++documents;
    }
    std::fprintf(stderr, "wrote %llu documents, %.1f MB to %s\n", static_cast<unsigned long long>(documents),
                 written / 1e6, flags.get("out").c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "synthetic_text: %s\n", e.what());
    return 1;
  }
}
