#include "common/util/huge_pages.hpp"

#include <sys/mman.h>

#include <cstdlib>
#include <new>

namespace warp {

void* allocate_huge(size_t bytes) {
  if (bytes < kHugePageBytes) {
    void* p = std::malloc(bytes == 0 ? 1 : bytes);
    if (p == nullptr) throw std::bad_alloc();
    return p;
  }
  const size_t rounded = (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  void* p = std::aligned_alloc(kHugePageBytes, rounded);
  if (p == nullptr) throw std::bad_alloc();
  madvise(p, rounded, MADV_HUGEPAGE);  // advice only: without THP the pages are small, nothing fails
  return p;
}

void free_huge(void* p) noexcept { std::free(p); }

}  // namespace warp
