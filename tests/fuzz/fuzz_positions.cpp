// libFuzzer: any bytes as a partition's word positions row (common/index/word_positions.hpp), the
// first four the chunk's first docID. A row is refused with an Error, or every block of it decodes
// (documents ascending from the chunk, within the table's last docIDs, positions ascending within a
// document), and encoding what was decoded gives a row that decodes to the same.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/index/word_positions.hpp"
#include "common/util/status.hpp"

namespace {

struct Decoded {
  std::vector<warp::DocId> docs;
  std::vector<uint32_t> starts{0};
  std::vector<uint32_t> positions;
};

bool decode(std::string_view bytes, warp::DocId chunk, Decoded& out) {
  try {
    const warp::TermPositionsRow row = warp::TermPositionsRow::parse(bytes, chunk);
    warp::PositionBlock block;
    for (size_t b = 0; b < row.blocks(); ++b) {
      row.decode(b, block);
      for (size_t i = 0; i < block.docs.size(); ++i) {
        const warp::DocId doc = block.docs[i];
        if (doc < chunk || (!out.docs.empty() && doc <= out.docs.back()) || doc > row.last_doc(b)) std::abort();
        out.docs.push_back(doc);
        const std::span<const uint32_t> at = block.of(i);
        for (size_t p = 0; p < at.size(); ++p) {
          if (p > 0 && at[p] <= at[p - 1]) std::abort();
          out.positions.push_back(at[p]);
        }
        out.starts.push_back(static_cast<uint32_t>(out.positions.size()));
      }
    }
    return true;
  } catch (const warp::Error&) {
    return false;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  const warp::DocId chunk = static_cast<warp::DocId>(data[0]) << 24 | data[1] << 16 | data[2] << 8 | data[3];
  const std::string bytes(reinterpret_cast<const char*>(data) + 4, size - 4);
  Decoded first;
  if (!decode(bytes, chunk, first)) return 0;
  const std::string again = warp::encode_term_positions(chunk, first.docs, first.starts, first.positions);
  Decoded second;
  if (!decode(again, chunk, second) || second.docs != first.docs || second.starts != first.starts ||
      second.positions != first.positions)
    std::abort();
  return 0;
}
