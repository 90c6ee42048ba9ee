// Memory for large tables read at random (stem caches, dictionaries, posting arenas): allocations
// of 2 MiB and more are 2 MiB-aligned and advised as transparent huge pages (madvise, the default
// THP mode of Debian and Ubuntu), so a lookup costs a cache miss without a TLB miss as well. On a
// virtual machine a TLB miss walks two levels of page tables.
#pragma once
#include <cstddef>
#include <utility>
#include <vector>

namespace warp {

inline constexpr size_t kHugePageBytes = size_t{2} << 20;

// `bytes` of memory (huge-page backed where at least kHugePageBytes); throws std::bad_alloc.
void* allocate_huge(size_t bytes);
void free_huge(void* p) noexcept;
// `bytes` of zeroed memory straight from the kernel, 2 MiB-aligned and advised as huge pages: no
// page is touched (or zeroed) before it is used. Freed with unmap_zeroed(p, bytes).
void* map_zeroed(size_t bytes);
void unmap_zeroed(void* p, size_t bytes) noexcept;

// A fixed array of `count` zeroed T from map_zeroed (T trivially constructible from zero bytes).
template <class T>
class ZeroedTable {
 public:
  ZeroedTable() = default;
  explicit ZeroedTable(size_t count)
      : data_(static_cast<T*>(map_zeroed(count * sizeof(T)))), bytes_(count * sizeof(T)) {}
  ~ZeroedTable() { unmap_zeroed(data_, bytes_); }
  ZeroedTable(ZeroedTable&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  ZeroedTable& operator=(ZeroedTable&& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(bytes_, other.bytes_);
    return *this;
  }
  T* get() const { return data_; }
  T& operator[](size_t i) const { return data_[i]; }

 private:
  T* data_ = nullptr;
  size_t bytes_ = 0;
};

template <class T>
struct HugePageAllocator {
  using value_type = T;
  HugePageAllocator() = default;
  template <class U>
  HugePageAllocator(const HugePageAllocator<U>&) noexcept {}
  T* allocate(size_t n) { return static_cast<T*>(allocate_huge(n * sizeof(T))); }
  void deallocate(T* p, size_t) noexcept { free_huge(p); }
  template <class U>
  bool operator==(const HugePageAllocator<U>&) const noexcept {
    return true;
  }
};

template <class T>
using HugeVector = std::vector<T, HugePageAllocator<T>>;

}  // namespace warp
