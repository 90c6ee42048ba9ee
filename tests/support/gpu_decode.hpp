// Whole-list GPU decoding for tests and benchmarks: decode a list of a DeviceIndex on the GPU and
// bring it back, time decoding with CUDA events, and measure the device-to-device copy ceiling.
#pragma once
#include <string>
#include <vector>

#include "leaf/gpu/index/device_index.hpp"

namespace warp::gpu {

// DocIDs (with the localized prefix sum) and frequencies of a whole list.
std::vector<Posting> decode_list_on_gpu(const DeviceIndex& index, const std::string& term);
// The raw decoded values, gaps instead of docIDs: the docID sequence (gaps minus one) or the
// frequency sequence (frequencies minus one).
std::vector<uint32_t> decode_values_on_gpu(const DeviceIndex& index, const std::string& term, bool frequencies);

// Median milliseconds to decode the whole list (docIDs and frequencies) over `repetitions` runs
// after a warm-up, output kept in device memory.
double time_list_decode_ms(const DeviceIndex& index, const std::string& term, int repetitions);

// Device-to-device copy bandwidth in GB/s counting bytes read plus written, median of runs.
double device_copy_gbps(size_t bytes);

}  // namespace warp::gpu
