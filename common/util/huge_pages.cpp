#include "common/util/huge_pages.hpp"

#include <sys/mman.h>

#include <cstdint>
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

namespace {
size_t huge_rounded(size_t bytes) { return (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes; }
}  // namespace

void* map_zeroed(size_t bytes) {
  const size_t rounded = huge_rounded(bytes == 0 ? 1 : bytes);
  // Mapped a huge page longer, then trimmed to a 2 MiB-aligned start.
  void* mapped = mmap(nullptr, rounded + kHugePageBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapped == MAP_FAILED) throw std::bad_alloc();
  const auto start = reinterpret_cast<uintptr_t>(mapped);
  const uintptr_t aligned = (start + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  if (aligned > start) munmap(mapped, aligned - start);
  const size_t tail = start + rounded + kHugePageBytes - (aligned + rounded);
  if (tail > 0) munmap(reinterpret_cast<void*>(aligned + rounded), tail);
  madvise(reinterpret_cast<void*>(aligned), rounded, MADV_HUGEPAGE);
  return reinterpret_cast<void*>(aligned);
}

void unmap_zeroed(void* p, size_t bytes) noexcept {
  if (p != nullptr) munmap(p, huge_rounded(bytes == 0 ? 1 : bytes));
}

}  // namespace warp
