// libFuzzer: a partition on disk corrupted by the input, then opened and, if it opens, searched.
// The input is a list of edits, 6 bytes each: which file of the partition (by sorted name), an
// offset in it, a byte to write there, and whether to truncate the file at that offset instead.
// open_partition must refuse a damaged partition with an Error (checksums, format checks) or open
// one it can serve; never crash, hang or read out of bounds.
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "common/index/index_files.hpp"
#include "common/index/partition_store.hpp"
#include "leaf/query/cpu_query_processor.hpp"

namespace fs = std::filesystem;

namespace {

fs::path make_template(const fs::path& base) {
  fs::remove_all(base);
  static const fs::path remove_at_exit = base;
  std::atexit([] {
    std::error_code ignored;
    fs::remove_all(remove_at_exit, ignored);
  });
  warp::IndexBuilder builder(warp::BuildOptions{});
  for (int i = 0; i < 300; ++i) {
    builder.add_document({"d" + std::to_string(i), "t", "alpha beta gamma " + std::to_string(i % 17), ""});
  }
  warp::write_index(builder.build(), (base / "index").string());
  return base / "index" / "part-0000";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // In memory where /dev/shm exists: every input copies and damages a partition on disk.
  static const fs::path base = (fs::is_directory("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path()) /
                               ("warp-fuzz-partition-" + std::to_string(::getpid()));
  static const fs::path pristine = make_template(base);
  // Held open for the whole run: RocksDB starts its periodic-task thread with the first open DB and
  // stops it with the last, which would otherwise cost a thread per input.
  static const auto keep_open = warp::open_partition(pristine.string());
  static std::vector<std::string> names = [] {
    std::vector<std::string> files;
    for (const auto& entry : fs::directory_iterator(pristine)) files.push_back(entry.path().filename().string());
    std::sort(files.begin(), files.end());
    return files;
  }();
  const fs::path work = base / "work";
  fs::remove_all(work);
  fs::copy(pristine, work, fs::copy_options::recursive);
  for (size_t at = 0; at + 6 <= size; at += 6) {
    const fs::path file = work / names[data[at] % names.size()];
    const uint64_t length = fs::file_size(file);
    if (length == 0) continue;
    const uint64_t offset = (static_cast<uint64_t>(data[at + 1]) << 16 | data[at + 2] << 8 | data[at + 3]) % length;
    if (data[at + 5] & 1) {
      fs::resize_file(file, offset);
    } else {
      std::fstream stream(file, std::ios::in | std::ios::out | std::ios::binary);
      stream.seekp(static_cast<std::streamoff>(offset));
      stream.put(static_cast<char>(data[at + 4]));
    }
  }
  try {
    const auto partition = warp::open_partition(work.string());
    warp::CpuQueryProcessor processor(partition->view());
    (void)processor.search({{"alpha", "gamma", "3"}, warp::QueryMode::kOr, 10});
    (void)processor.search({{"beta", "alpha"}, warp::QueryMode::kAnd, 10});
  } catch (const std::exception&) {
    // refused with a reason: the expected outcome for most damage
  }
  return 0;
}
