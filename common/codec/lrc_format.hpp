// Linear Regression Compression (Ao et al. 2011 §4.2–4.3): docID S_i at position i of a list is
// stored as its vertical deviation from a line, λ_i = S_i - (base + floor(alpha * l)) >= 0 with l the
// position inside the line's segment, so any docID decodes alone from its segment's line and one
// b-bit slot (no exceptions, as in Ao et al. Algorithm 1). The four variants differ in segments:
//   LRC     one line and one width for the list;
//   LRCSeg  the list's line, a base and width per block (local fluctuation ranges);
//   SegLRC  a line per block;
//   HS_LRC  a line per hash segment: the docIDs sharing their high bits (x >> shift), located by
//           hash table, so a search goes straight to the only segment that can hold x.
// Layout of a sequence's words: a header, one record per segment, the packed deviations, and for
// HS_LRC the table. endpoints[j] is the record holding block j's first value (endpoints[nblocks]:
// the last record). Slope alpha is a float and the product alpha*l (l < 2^26) is exact in double, so
// the CPU and the GPU compute the same prediction bit for bit.
#pragma once
#include <cmath>

#include "common/codec/host_device.hpp"

namespace warp::lrc {

enum Variant : uint32_t { kLrc = 1, kLrcSeg = 2, kSegLrc = 3, kHsLrc = 4 };

// Header words.
enum : uint32_t {
  kVariant = 0,
  kSegments = 1,
  kHashShift = 2,    // HS_LRC: segment of docID x is x >> shift
  kHashTable = 3,    // HS_LRC: word offset of buckets+1 entries: first record of hash >= h
  kGlobalAlpha = 4,  // the list's line, for the safe search range (Ao et al. §3.3)
  kGlobalBase = 5,   // int64, two words
  kGlobalRange = 7,  // max deviation from the list's line
  kBuckets = 8,      // HS_LRC: number of hash values
  kHeaderWords = 10,
};
// Record words.
enum : uint32_t { kFirst = 0, kData = 1, kBits = 2, kAlpha = 3, kBase = 4, kRecordWords = 6 };

WARP_HD const uint32_t* record(const uint32_t* words, uint32_t r) { return words + kHeaderWords + r * kRecordWords; }

WARP_HD int64_t predict(float alpha, int64_t base, uint32_t local) {
  return base + static_cast<int64_t>(::floor(static_cast<double>(alpha) * static_cast<double>(local)));
}

// DocID at list position i, which record r holds.
WARP_HD uint32_t value_in_record(const uint32_t* words, uint32_t r, uint32_t i) {
  const uint32_t* rec = record(words, r);
  const uint32_t local = i - rec[kFirst];
  return static_cast<uint32_t>(predict(fmt::as_float(rec[kAlpha]), fmt::read_i64(rec + kBase), local) +
                               fmt::extract(words + rec[kData], local, rec[kBits]));
}

// The record holding position i of block `block`: the last record in [endpoints[block],
// endpoints[block+1]] that starts at or before i.
WARP_HD uint32_t record_of(const uint32_t* words, const uint32_t* endpoints, uint32_t block, uint32_t i) {
  uint32_t lo = endpoints[block], hi = endpoints[block + 1];
  while (lo < hi) {
    const uint32_t mid = (lo + hi + 1) / 2;
    if (record(words, mid)[kFirst] <= i)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

WARP_HD uint32_t value_at(const uint32_t* words, const uint32_t* endpoints, uint32_t block_size, uint32_t i) {
  return value_in_record(words, record_of(words, endpoints, i / block_size, i), i);
}

// Narrows [lo, hi) to the positions whose prediction could equal x: S = base + floor(alpha*l) + λ
// with 0 <= λ <= range means floor(alpha*l) in [x-base-range, x-base]. One position of slack on each
// side absorbs the rounding of the division (the safe search range of Ao et al. §3.3).
WARP_HD void contract(float alpha, int64_t base, uint64_t range, uint32_t first, uint32_t x, uint32_t& lo,
                      uint32_t& hi) {
  if (!(alpha > 0)) return;
  const double a = alpha;
  const double y_low = static_cast<double>(static_cast<int64_t>(x) - base - static_cast<int64_t>(range));
  const double y_high = static_cast<double>(static_cast<int64_t>(x) - base + 1);
  double l_lo = ::floor(y_low / a) - 1, l_hi = ::ceil(y_high / a) + 1;
  l_lo = l_lo < 0 ? 0 : l_lo;
  l_hi = l_hi < 0 ? 0 : l_hi;
  const double new_lo = static_cast<double>(first) + l_lo, new_hi = static_cast<double>(first) + l_hi;
  if (new_lo > lo) lo = new_lo >= hi ? hi : static_cast<uint32_t>(new_lo);
  if (new_hi < hi) hi = new_hi <= lo ? lo : static_cast<uint32_t>(new_hi);
}

// Ao et al. Algorithm 1, one list: is docID x in the LRC-coded list, and at which position?
// Non-HS variants contract by the list's line, binary-search the per-block last docIDs in that
// range for the only block that can hold x, contract again by the block's own line, and finish by
// a binary search that decodes each probed docID alone. HS_LRC goes to x's hash segment directly.
WARP_HD bool find(const uint32_t* words, const uint32_t* endpoints, const uint32_t* block_last, uint32_t count,
                  uint32_t block_size, uint32_t x, uint32_t& position) {
  if (count == 0) return false;
  uint32_t lo = 0, hi = count, r;
  if (words[kVariant] == kHsLrc) {
    const uint32_t h = x >> words[kHashShift];
    if (h >= words[kBuckets]) return false;
    const uint32_t* table = words + words[kHashTable];
    r = table[h];
    if (table[h + 1] == r) return false;  // empty hash segment
    lo = record(words, r)[kFirst];
    hi = r + 1 < words[kSegments] ? record(words, r + 1)[kFirst] : count;
  } else {
    contract(fmt::as_float(words[kGlobalAlpha]), fmt::read_i64(words + kGlobalBase), words[kGlobalRange], 0, x, lo, hi);
    if (lo >= hi) return false;
    uint32_t b_lo = lo / block_size, b_hi = (hi - 1) / block_size + 1;  // first block whose last docID >= x
    while (b_lo < b_hi) {
      const uint32_t mid = (b_lo + b_hi) / 2;
      if (block_last[mid] < x)
        b_lo = mid + 1;
      else
        b_hi = mid;
    }
    const uint32_t block = b_lo;
    if (block * block_size >= count || block_last[block] < x) return false;
    const uint32_t block_end = block * block_size + block_size < count ? block * block_size + block_size : count;
    lo = lo > block * block_size ? lo : block * block_size;
    hi = hi < block_end ? hi : block_end;
    r = record_of(words, endpoints, block, block * block_size);
  }
  const uint32_t* rec = record(words, r);
  const uint32_t bits = rec[kBits];
  contract(fmt::as_float(rec[kAlpha]), fmt::read_i64(rec + kBase), bits >= 32 ? 0xFFFFFFFFull : ((1ull << bits) - 1),
           rec[kFirst], x, lo, hi);
  while (lo < hi) {
    const uint32_t mid = (lo + hi) / 2;
    if (value_in_record(words, r, mid) < x)
      lo = mid + 1;
    else
      hi = mid;
  }
  const uint32_t end = r + 1 < words[kSegments] ? record(words, r + 1)[kFirst] : count;
  if (lo >= end || value_in_record(words, r, lo) != x) return false;
  position = lo;
  return true;
}

}  // namespace warp::lrc
