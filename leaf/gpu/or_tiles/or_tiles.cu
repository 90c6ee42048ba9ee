#include "leaf/gpu/or_tiles/or_tiles.hpp"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "common/util/status.hpp"
#include "common/util/cuda_check.cuh"
#include "leaf/gpu/or_tiles/or_tiles_engine.cuh"

namespace warp::gpu {
using namespace or_tiles_engine;
namespace {

template <class T>
void device_alloc(T*& p, size_t count) {
  WARP_CUDA_CHECK(cudaMalloc(&p, std::max<size_t>(1, count) * sizeof(T)));
}

}  // namespace

// The per-run inputs (queries, lists, their weights and sparse rows, the sparse lists) are packed
// into one pinned staging area and go over in one copy; `Staged` points into either copy.
struct Staged {
  RunSizes* sizes;
  EngineQuery* queries;
  DeviceList* lists;
  uint32_t* sparse_slots;  // per list: its row of sparse maxima, or kDenseList
  float* weights;
  float* bound_scales;
  SparseList* sparse;
  size_t bytes;
};

Staged carve_staging(char* base, size_t queries, size_t lists) {
  size_t offset = 0;
  auto take = [&](size_t bytes) {  // base null: only the size is wanted
    char* p = base == nullptr ? nullptr : base + offset;
    offset = (offset + bytes + 15) / 16 * 16;
    return p;
  };
  Staged s{};
  s.sizes = reinterpret_cast<RunSizes*>(take(sizeof(RunSizes)));
  s.queries = reinterpret_cast<EngineQuery*>(take(queries * sizeof(EngineQuery)));
  s.lists = reinterpret_cast<DeviceList*>(take(lists * sizeof(DeviceList)));
  s.sparse_slots = reinterpret_cast<uint32_t*>(take(lists * sizeof(uint32_t)));
  s.weights = reinterpret_cast<float*>(take(lists * sizeof(float)));
  s.bound_scales = reinterpret_cast<float*>(take(lists * sizeof(float)));
  s.sparse = reinterpret_cast<SparseList*>(take(lists * sizeof(SparseList)));
  s.bytes = offset;
  return s;
}

// Zeroes a run's accumulators: its queries' scratch, its sparse lists' slice maxima, the rounds'
// work-list counts (the run's sizes from device memory: any grid covers them).
__global__ void zero_run_kernel(const RunSizes* sizes, uint32_t* scratch, uint32_t* sparse_maxima, uint32_t slices,
                                uint32_t* round_totals, uint32_t rounds) {
  const size_t scratch_words = size_t{sizes->queries} * (sizeof(QueryScratch) / sizeof(uint32_t));
  const size_t sparse_words = size_t{sizes->sparse} * slices;
  const size_t stride = size_t{gridDim.x} * blockDim.x;
  const size_t first = size_t{blockIdx.x} * blockDim.x + threadIdx.x;
  for (size_t i = first; i < scratch_words; i += stride) scratch[i] = 0;
  for (size_t i = first; i < sparse_words; i += stride) sparse_maxima[i] = 0;
  if (first < rounds) round_totals[first] = 0;
}

struct OrTiles::Buffers {
  uint32_t tiles = 0, slices = 0, sparse_capacity = 0, first_capacity = 0, persistent_128 = 0, persistent_256 = 0;
  char* inputs = nullptr;             // device copy of the staging area
  char* host_inputs = nullptr;        // pinned staging area
  uint32_t* sparse_maxima = nullptr;  // sparse_capacity × slices
  SparsePostings sparse{};
  float* slice_bounds = nullptr;  // max_queries × tiles × 32
  QueryScratch* scratch = nullptr;
  float* bounds = nullptr;
  uint32_t* first_tiles = nullptr;
  uint32_t* second_tiles = nullptr;
  uint32_t* second_total = nullptr;
  uint64_t* staging = nullptr;
  uint64_t* results = nullptr;
  uint64_t* host_results = nullptr;
  // A run's kernels as one CUDA graph (unless WARP_GPU_GRAPHS=0), captured once per block size
  // with grids for the most queries and the run's sizes read from device memory: a run costs the
  // host three calls (inputs in, the graph, answers out) instead of a dozen or more. The launches
  // were most of a GPU driver thread's host work a batch (tests/bench/results/gpu-queries.md).
  bool graphs = std::getenv("WARP_GPU_GRAPHS") == nullptr || std::string(std::getenv("WARP_GPU_GRAPHS")) != "0";
  cudaGraphExec_t graph_execs[2] = {};   // [block size 256]
  const uint64_t* graph_keys = nullptr;  // the key rows the graphs were captured with
  size_t graph_key_stride = 0;
  uint32_t sparse_grid = 0;  // thread blocks of a graph's sparse-list kernel
  void drop_graphs() {
    for (cudaGraphExec_t& exec : graph_execs) {
      if (exec != nullptr) cudaGraphExecDestroy(exec);
      exec = nullptr;
    }
    graph_keys = nullptr;
  }
  ~Buffers() {
    drop_graphs();
    for (void* p : {(void*)inputs, (void*)sparse_maxima, (void*)sparse.docs, (void*)sparse.scores,
                    (void*)sparse.tile_start, (void*)slice_bounds, (void*)scratch, (void*)bounds, (void*)first_tiles,
                    (void*)second_tiles, (void*)second_total, (void*)staging, (void*)results}) {
      cudaFree(p);
    }
    cudaFreeHost(host_inputs);
    cudaFreeHost(host_results);
  }
};

// With WARP_GPU_STAGE_TIMES set, CUDA events around the stages; the mean per query, the tiles
// scored and each round's θ, tiles and blocks go to stderr when the object is destroyed; with
// WARP_GPU_STAGE_TIMES=2 also a line per query.
struct OrTiles::StageTimes {
  static constexpr int kMarks = 6;
  bool on = std::getenv("WARP_GPU_STAGE_TIMES") != nullptr;
  bool per_query = on && std::string(std::getenv("WARP_GPU_STAGE_TIMES")) == "2";
  size_t rounds = 0;  // of the last run
  uint64_t first_blocks = 0, round_blocks[kRounds] = {}, round_tiles[kRounds] = {};
  double round_theta_ratio[kRounds] = {};
  cudaEvent_t events[kMarks] = {};
  double total_ms[kMarks - 1] = {};
  uint64_t queries = 0, tiles_scored = 0, tiles_total = 0, theta_count = 0;
  double theta_ratio = 0;  // θ over the k-th best score, for queries with k answers
  void mark(int i, cudaStream_t stream) {
    if (!on) return;
    if (events[i] == nullptr) WARP_CUDA_CHECK(cudaEventCreate(&events[i]));
    WARP_CUDA_CHECK(cudaEventRecord(events[i], stream));
  }
  void add(size_t n) {  // after the stream synchronised
    if (!on) return;
    for (int i = 0; i + 1 < kMarks; ++i) {
      float ms = 0;
      WARP_CUDA_CHECK(cudaEventElapsedTime(&ms, events[i], events[i + 1]));
      total_ms[i] += ms;
    }
    queries += n;
  }
  // One query's θ per round against its k-th best, and where its blocks were decoded.
  void record(const OrTileQuery& query, const OrTileAnswer& answer, const QueryScratch* device_scratch) {
    QueryScratch s;
    WARP_CUDA_CHECK(cudaMemcpy(&s, device_scratch, sizeof s, cudaMemcpyDeviceToHost));
    const double kth = answer.hits.back().score;
    auto ratio = [&](uint32_t bits) {
      float theta;
      std::memcpy(&theta, &bits, sizeof theta);
      return theta / kth;
    };
    theta_ratio += ratio(s.theta_bits), ++theta_count;
    first_blocks += s.blocks_before_round[0];
    std::string line;
    char part[96];
    for (uint32_t r = 0; r < rounds; ++r) {
      const uint64_t blocks =
          (r + 1 < rounds ? s.blocks_before_round[r + 1] : answer.blocks_decoded) - s.blocks_before_round[r];
      round_theta_ratio[r] += ratio(s.round_theta_bits[r]);
      round_tiles[r] += s.round_tiles[r];
      round_blocks[r] += blocks;
      std::snprintf(part, sizeof part, " | round %u: %u tiles, %llu blocks, theta / k-th %.3f", r, s.round_tiles[r],
                    static_cast<unsigned long long>(blocks), ratio(s.round_theta_bits[r]));
      line += part;
    }
    if (!per_query) return;
    std::string lists;
    for (const auto& [list, weight, scale] : query.lists) lists.append(" ").append(std::to_string(list.count));
    std::fprintf(stderr, "gpu OR tiles query: k %u lists%s | blocks %llu, pass 1 %llu%s\n", query.k, lists.c_str(),
                 static_cast<unsigned long long>(answer.blocks_decoded),
                 static_cast<unsigned long long>(s.blocks_before_round[0]), line.c_str());
  }
  ~StageTimes() {
    if (on && queries > 0) {
      const double q = static_cast<double>(queries);
      std::fprintf(
          stderr,
          "gpu OR tiles over %llu queries, us per query: bounds+plan %.1f, pass 1 %.1f, theta %.1f, pass 2 %.1f, "
          "select %.1f; tiles scored %.1f%% (%.0f of %.0f per query); theta / k-th best %.3f\n",
          static_cast<unsigned long long>(queries), total_ms[0] * 1e3 / q, total_ms[1] * 1e3 / q, total_ms[2] * 1e3 / q,
          total_ms[3] * 1e3 / q, total_ms[4] * 1e3 / q, tiles_total == 0 ? 0.0 : 100.0 * tiles_scored / tiles_total,
          tiles_scored / q, tiles_total / q, theta_count == 0 ? 0.0 : theta_ratio / theta_count);
      std::fprintf(stderr, "gpu OR tiles per query: blocks in pass 1 %.0f", first_blocks / q);
      for (uint32_t r = 0; r < rounds; ++r) {
        std::fprintf(stderr, "; round %u: tiles %.0f, blocks %.0f, theta / k-th best %.3f", r, round_tiles[r] / q,
                     round_blocks[r] / q, theta_count == 0 ? 0.0 : round_theta_ratio[r] / theta_count);
      }
      std::fprintf(stderr, "\n");
    }
    for (cudaEvent_t e : events) {
      if (e != nullptr) cudaEventDestroy(e);
    }
  }
};

namespace {

// The rounds of pass 2, as the rank of the last tile (by bound) each reaches: the first pass's
// tiles × 4, × 16, … then all (0). Each round runs under the θ of everything scored before it, so
// most tiles meet a θ near the k-th best: on the GOV2-like preset at k = 1000 θ is 0.39, 0.69, 0.90
// and 0.98 of it over the rounds, where two rounds (the tiles 15% above the first pass's θ, then
// the rest) scored 98% of the tiles under 0.39.
std::vector<uint32_t> plan_rounds(uint32_t first_tiles, uint32_t tiles) {
  constexpr uint64_t kGrowth = 4;
  std::vector<uint32_t> ranks;
  for (uint64_t rank = uint64_t{first_tiles} * kGrowth; rank < tiles && ranks.size() + 1 < kRounds; rank *= kGrowth) {
    ranks.push_back(static_cast<uint32_t>(rank));
  }
  ranks.push_back(0);
  return ranks;
}

// The stages of pass 2 (or_tiles_score.cuh): a non-essential list gets a stage of its own where
// at least eight of its blocks overlap the tile; fewer are decoded with the essential lists (the
// test and the barriers would cost more than they save). Measured on the GOV2-like preset, OR
// top-1000 batched: 2, 4 and 8 blocks decode 17,992, 18,009 and 18,365 blocks a query against
// 21,383 without stages, at 0.82×, 0.82× and 0.94× its queries per second.
constexpr StageOptions kStageOptions{.min_items = 8};

// Lists a graph's staging holds (fixed places, copied whole each run: ~40 KB); runs with more
// lists launch kernel by kernel.
constexpr size_t kGraphLists = 128;

}  // namespace

OrTiles::OrTiles(const DeviceIndex& device, size_t max_queries, size_t max_lists, bool staged)
    : device_(device),
      max_queries_(std::max<size_t>(1, max_queries)),
      max_lists_(std::max<size_t>(1, max_lists)),
      staged_(staged),
      buffers_(std::make_unique<Buffers>()),
      times_(std::make_unique<StageTimes>()) {
  if (max_queries_ > (size_t{1} << kQueryBits)) throw Error("OR tiles run at most 256 queries together");
  const uint32_t doc_count = device.host().doc_count();
  Buffers& b = *buffers_;
  b.tiles = (doc_count + kTile - 1) / kTile;
  b.slices = (doc_count + kSliceDocs - 1) / kSliceDocs;
  b.sparse_capacity = static_cast<uint32_t>(std::min<size_t>(max_lists_, std::max<size_t>(8, 4 * max_queries_)));
  if (b.tiles > kTileMask)
    throw Error("a partition of more than " + std::to_string(size_t{kTileMask} * kTile) + " documents");
  int gpu = 0, sms = 0, per_sm_128 = 0, per_sm_256 = 0;
  WARP_CUDA_CHECK(cudaGetDevice(&gpu));
  WARP_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, gpu));
  second_pass_occupancy(per_sm_128, per_sm_256);
  b.persistent_128 = static_cast<uint32_t>(sms * std::max(1, per_sm_128));
  b.persistent_256 = static_cast<uint32_t>(sms * std::max(1, per_sm_256));
  b.sparse_grid = static_cast<uint32_t>(2 * sms);
  // The first pass, whose k-th best gives θ: about four waves of the GPU over the batch, 32 to 128
  // tiles a query, at most an eighth of the partition's tiles.
  b.first_capacity = static_cast<uint32_t>(
      std::min<size_t>(std::clamp<size_t>(4 * sms / max_queries_, 32, 128), std::max<size_t>(1, b.tiles / 8)));
  const size_t q = max_queries_;
  const size_t input_bytes = carve_staging(nullptr, q, max_lists_).bytes;
  WARP_CUDA_CHECK(cudaMalloc(&b.inputs, input_bytes));
  WARP_CUDA_CHECK(cudaMallocHost(&b.host_inputs, input_bytes));
  device_alloc(b.sparse_maxima, size_t{b.sparse_capacity} * b.slices);
  b.sparse.capacity = b.slices / 4 + 1;  // is_sparse: fewer postings than a quarter of the slices
  b.sparse.tiles = b.tiles;
  device_alloc(b.sparse.docs, size_t{b.sparse_capacity} * b.sparse.capacity);
  device_alloc(b.sparse.scores, size_t{b.sparse_capacity} * b.sparse.capacity);
  device_alloc(b.sparse.tile_start, size_t{b.sparse_capacity} * b.tiles);
  device_alloc(b.slice_bounds, q * b.tiles * kSlicesPerTile);
  device_alloc(b.scratch, q);
  device_alloc(b.bounds, q * b.tiles);
  device_alloc(b.first_tiles, q * b.first_capacity);
  device_alloc(b.second_tiles, q * b.tiles);
  device_alloc(b.second_total, kRounds);
  device_alloc(b.staging, q * kSortCapacity);
  device_alloc(b.results, q * (kHeader + kSortCapacity));
  WARP_CUDA_CHECK(cudaMallocHost(&b.host_results, q * (kHeader + kSortCapacity) * sizeof(uint64_t)));
}

OrTiles::~OrTiles() = default;

// The staging of a run with more lists than the largest so far: rare (long queries), so the
// allocation on this path is accepted; every stream that used the old staging has synchronised.
void OrTiles::grow_staging(size_t lists) {
  Buffers& b = *buffers_;
  b.drop_graphs();  // they point into the staging
  const size_t input_bytes = carve_staging(nullptr, max_queries_, lists).bytes;
  char *inputs = nullptr, *host_inputs = nullptr;
  WARP_CUDA_CHECK(cudaMalloc(&inputs, input_bytes));
  if (cudaMallocHost(&host_inputs, input_bytes) != cudaSuccess) {
    cudaFree(inputs);
    throw Error("cannot allocate the OR tiles' staging for " + std::to_string(lists) + " lists");
  }
  cudaFree(b.inputs);
  cudaFreeHost(b.host_inputs);
  b.inputs = inputs, b.host_inputs = host_inputs;
  max_lists_ = lists;
}

std::vector<OrTileAnswer> OrTiles::run(std::span<const OrTileQuery> queries, const OrTileRows& rows,
                                       cudaStream_t stream) {
  const Launched launched = launch(queries, rows, stream);
  if (launched.any) WARP_CUDA_CHECK(cudaStreamSynchronize(stream));
  return collect(queries, rows, launched, stream);
}

OrTiles::Launched OrTiles::launch(std::span<const OrTileQuery> queries, const OrTileRows& rows, cudaStream_t stream) {
  Buffers& b = *buffers_;
  const size_t n = queries.size();
  if (n > max_queries_) throw Error("too many queries for one OR tiles run");
  Launched launched;
  launched.queries = n;
  const uint32_t doc_begin = device_.host().meta.doc_begin, doc_count = device_.host().doc_count();
  size_t list_total = 0;
  for (const OrTileQuery& query : queries) list_total += query.lists.size();
  if (list_total > max_lists_) grow_staging(list_total);
  uint64_t* const candidate_keys = rows.keys;  // query i's row at candidate_keys + i * key_stride
  const size_t key_stride = std::min<size_t>(rows.row, doc_count);
  const float* norms = n > 0 && queries[0].norms != nullptr ? queries[0].norms : device_.length_norms();
  // The graph's staging has room for the most queries and kGraphLists lists at fixed places; a run
  // with more lists, other rows (a query again alone), an overlay's norms (the graph holds the
  // index's) or stage timing launches kernel by kernel.
  const bool graph = b.graphs && rows.lasting && !times_->on && list_total <= kGraphLists && list_total <= max_lists_ &&
                     norms == device_.length_norms() &&
                     (b.graph_keys == nullptr || (b.graph_keys == candidate_keys && b.graph_key_stride == key_stride));
  const size_t staged_queries = graph ? max_queries_ : n,
               staged_lists = graph ? std::min(kGraphLists, max_lists_) : list_total;
  const Staged host = carve_staging(b.host_inputs, staged_queries, staged_lists);
  const Staged dev = carve_staging(b.inputs, staged_queries, staged_lists);
  uint32_t lists = 0, block_size = 128, max_k = 1, sparse = 0, sparse_blocks = 0;
  bool any = false;
  for (size_t i = 0; i < n; ++i) {
    host.queries[i] = {lists, static_cast<uint32_t>(queries[i].lists.size()), std::max<uint32_t>(1, queries[i].k), 0,
                       std::bit_cast<uint32_t>(std::max(queries[i].floor, Score{0}))};
    for (const auto& [list, weight, bound_scale] : queries[i].lists) {
      block_size = list.block_size;
      host.sparse_slots[lists] = kDenseList;
      if (is_sparse(list, b.slices) && list.block_count > 0 && sparse < b.sparse_capacity) {
        host.sparse_slots[lists] = sparse;
        host.sparse[sparse++] = {list, sparse_blocks, host.sparse_slots[lists], static_cast<uint32_t>(i), weight};
        sparse_blocks += list.block_count;
      }
      host.queries[i].dense_lists += host.sparse_slots[lists] == kDenseList;
      host.weights[lists] = weight;
      host.bound_scales[lists] = bound_scale;
      host.lists[lists++] = list;
    }
    max_k = std::max(max_k, queries[i].k);
    any = any || (!queries[i].lists.empty() && queries[i].k > 0);
  }
  if (!any || doc_count == 0) return launched;
  const uint32_t result_stride = kHeader + std::min(max_k, kSortCapacity);
  *host.sizes = {static_cast<uint32_t>(n), sparse, sparse_blocks, result_stride};
  WARP_CUDA_CHECK(cudaMemcpyAsync(b.inputs, b.host_inputs, host.bytes, cudaMemcpyHostToDevice, stream));
  // The run's kernels, for `qn` queries' grids and `sparse_grid` blocks over the sparse lists'
  // blocks (0: none); the kernels read the run's own sizes from dev.sizes.
  const BoundInputs in{dev.lists, dev.sparse_slots, dev.bound_scales, b.sparse_maxima, b.slices,
                       doc_begin, doc_count,        b.sparse,         b.slice_bounds};
  const std::vector<uint32_t> rounds = plan_rounds(b.first_capacity, b.tiles);
  auto enqueue = [&](uint32_t qn, uint32_t sparse_grid) {
    times_->mark(0, stream);
    // One launch zeroes what a run accumulates into (each call into the CUDA runtime costs the
    // host microseconds: a batch's launches were most of a GPU driver thread's work,
    // tests/bench/results/gpu-queries.md).
    zero_run_kernel<<<256, 256, 0, stream>>>(dev.sizes, reinterpret_cast<uint32_t*>(b.scratch), b.sparse_maxima,
                                             b.slices, b.second_total, kRounds);
    WARP_CUDA_CHECK_LAUNCH();
    if (sparse_grid > 0) {
      launch_sparse_maxima(block_size, sparse_grid, dev.sparse, dev.sizes, norms, doc_begin, b.slices, b.sparse_maxima,
                           b.sparse, b.scratch, stream);
    }
    launch_tile_bounds(qn, dev.queries, dev.sizes, in, b.tiles, b.bounds, b.scratch, stream);
    launch_plan(qn, dev.sizes, b.bounds, b.tiles, b.first_capacity, b.first_tiles, b.scratch, stream);
    times_->mark(1, stream);
    launch_first_pass(block_size, dim3(b.first_capacity, qn), dev.queries, dev.sizes, in, dev.weights, norms,
                      b.first_tiles, b.first_capacity, candidate_keys, key_stride, b.scratch, stream);
    times_->mark(2, stream);
    times_->rounds = rounds.size();
    for (uint32_t round = 0; round < rounds.size(); ++round) {
      uint32_t* const round_total = b.second_total + round;  // each round's own count, zeroed at the start
      launch_theta(qn, dev.queries, dev.sizes, b.bounds, round, rounds[round], b.tiles, candidate_keys, key_stride,
                   b.second_tiles, round_total, b.scratch, stream);
      if (round == 0) times_->mark(3, stream);
      launch_second_pass(block_size, block_size == 256 ? b.persistent_256 : b.persistent_128, dev.queries, in,
                         dev.weights, norms, b.second_tiles, round_total, candidate_keys, key_stride, staged_,
                         kStageOptions, b.scratch, stream);
    }
    times_->mark(4, stream);
    launch_select(qn, dev.queries, dev.sizes, candidate_keys, key_stride, b.staging, b.scratch, b.results, stream);
    times_->mark(5, stream);
  };
  if (graph) {
    // Captured once per block size, at the most queries and a fixed grid over the sparse blocks;
    // then every run is one launch of it.
    cudaGraphExec_t& exec = b.graph_execs[block_size == 256];
    if (exec == nullptr) {
      struct Capture {  // ends (and discards) the capture however the launches end
        cudaStream_t stream;
        bool on = true;
        ~Capture() {
          if (!on) return;
          cudaGraph_t graph = nullptr;
          cudaStreamEndCapture(stream, &graph);
          if (graph != nullptr) cudaGraphDestroy(graph);
        }
      } capture{stream};
      WARP_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
      enqueue(static_cast<uint32_t>(max_queries_), b.sparse_grid);
      cudaGraph_t captured = nullptr;
      capture.on = false;
      WARP_CUDA_CHECK(cudaStreamEndCapture(stream, &captured));
      const cudaError_t made = cudaGraphInstantiate(&exec, captured, 0);
      cudaGraphDestroy(captured);
      if (made != cudaSuccess) exec = nullptr;
      WARP_CUDA_CHECK(made);
      b.graph_keys = candidate_keys, b.graph_key_stride = key_stride;
    }
    WARP_CUDA_CHECK(cudaGraphLaunch(exec, stream));
  } else {
    enqueue(static_cast<uint32_t>(n), sparse_blocks);
  }
  WARP_CUDA_CHECK(
      cudaMemcpyAsync(b.host_results, b.results, n * result_stride * sizeof(uint64_t), cudaMemcpyDeviceToHost, stream));
  launched.any = true;
  launched.result_stride = result_stride;
  launched.key_stride = key_stride;
  return launched;
}

std::vector<OrTileAnswer> OrTiles::collect(std::span<const OrTileQuery> queries, const OrTileRows& rows,
                                           const Launched& launched, cudaStream_t stream) {
  Buffers& b = *buffers_;
  const size_t n = launched.queries;
  std::vector<OrTileAnswer> answers(n);
  if (!launched.any) return answers;
  const uint32_t result_stride = launched.result_stride;
  const size_t key_stride = launched.key_stride;
  uint64_t* const candidate_keys = rows.keys;
  times_->add(n);
  for (size_t i = 0; i < n; ++i) {
    const uint64_t* row = b.host_results + i * result_stride;
    OrTileAnswer& a = answers[i];
    a.blocks_decoded = row[2], a.postings_decoded = row[3], a.keys = row[6];
    times_->tiles_scored += row[4], times_->tiles_total += b.tiles;
    if (queries[i].k == 0 || queries[i].lists.empty() || a.keys > key_stride) continue;
    if (row[1] != 0) {  // too many keys at or above the k-th bucket for a block sort
      auto* scratch = b.scratch + i;
      a.hits = rows.fallback->select_candidates(candidate_keys + i * key_stride, &scratch->key_count,
                                                static_cast<uint32_t>(key_stride), scratch->key_buckets, queries[i].k,
                                                stream);
      continue;
    }
    const size_t take = std::min<size_t>(queries[i].k, row[0]);
    a.hits = keys_to_hits(row + kHeader, take);
    if (times_->on && take == queries[i].k) times_->record(queries[i], a, b.scratch + i);
  }
  return answers;
}

OrTileAnswer OrTiles::run_alone(const OrTileQuery& query, size_t keys, cudaStream_t stream) {
  // θ of a run whose row lost keys is only its k-th best's bucket, so alone, with every key, the
  // query may keep a different number: the row grows (at least doubling) until it holds them all.
  const size_t most = std::max<size_t>(1, device_.host().doc_count());
  keys = std::clamp<size_t>(keys, 1, most);
  WARP_CUDA_CHECK(cudaStreamSynchronize(stream));
  for (;;) {
    struct Owned {  // freed however the run ends
      uint64_t* row = nullptr;
      TopkBuffers selection;
      ~Owned() {
        cudaFree(row);
        selection.release();
      }
    } owned;
    WARP_CUDA_CHECK(cudaMalloc(&owned.row, keys * sizeof(uint64_t)));
    owned.selection.allocate(keys);
    std::vector<OrTileAnswer> answers =
        run(std::span<const OrTileQuery>(&query, 1), {owned.row, keys, &owned.selection, false}, stream);
    WARP_CUDA_CHECK(cudaStreamSynchronize(stream));
    if (answers[0].keys <= keys) return std::move(answers[0]);
    if (keys == most) throw Error("an OR query kept more candidates than the partition has documents");
    keys = std::min(most, std::max<size_t>(answers[0].keys, 2 * keys));
  }
}

}  // namespace warp::gpu
