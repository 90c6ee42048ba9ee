// Memory for large tables read at random (stem caches, dictionaries, posting arenas): allocations
// of 2 MiB and more are 2 MiB-aligned and advised as transparent huge pages (madvise, the default
// THP mode of Debian and Ubuntu), so a lookup costs a cache miss without a TLB miss as well. On a
// virtual machine a TLB miss walks two levels of page tables.
#pragma once
#include <cstddef>
#include <vector>

namespace warp {

inline constexpr size_t kHugePageBytes = size_t{2} << 20;

// `bytes` of memory (huge-page backed where at least kHugePageBytes); throws std::bad_alloc.
void* allocate_huge(size_t bytes);
void free_huge(void* p) noexcept;

template <class T>
struct HugePageAllocator {
  using value_type = T;
  HugePageAllocator() = default;
  template <class U>
  HugePageAllocator(const HugePageAllocator<U>&) noexcept {}
  T* allocate(size_t n) { return static_cast<T*>(allocate_huge(n * sizeof(T))); }
  void deallocate(T* p, size_t) noexcept { free_huge(p); }
  template <class U>
  bool operator==(const HugePageAllocator<U>&) const noexcept { return true; }
};

template <class T>
using HugeVector = std::vector<T, HugePageAllocator<T>>;

}  // namespace warp
