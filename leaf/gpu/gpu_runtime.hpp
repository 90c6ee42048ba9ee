// Whether a CUDA GPU is usable here, and CUDA error checking. Host-only header: callers need no
// CUDA toolkit headers to ask.
#pragma once
#include <memory>
#include <string>

#include "leaf/query/query_processor.hpp"

namespace warp::gpu {

// True when this build has CUDA and a device is present; otherwise false, with the reason
// ("built without CUDA", "no CUDA-capable device", "CUDA driver too old"...) in `why`.
bool gpu_available(std::string* why = nullptr);

// A GPU query processor over `index` with `lanes` concurrent queries; throws Error naming the
// reason when this build or machine has no usable GPU.
std::unique_ptr<QueryProcessor> make_gpu_processor(const IndexView& index, size_t lanes);

// Name and memory of device 0, e.g. "NVIDIA H100 80GB HBM3, 79.1 GiB, 132 SMs".
std::string gpu_description();

}  // namespace warp::gpu
