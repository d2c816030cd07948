// The kinds of generated kernel: what each is launched with, and nothing else. A KernelStep
// (codegen/plan.h) holds one of them beside the fields every kernel has; each kind's launch is
// defined by the file that generates it, and the executor launches each kind in one case.
#pragma once

#include <cstdint>
#include <string_view>

namespace mlpc::codegen {

// The tile a transposed-store kernel (256 threads) turns around in shared memory: `rows` of the
// space x 32 * vec columns, read and written in vectors of `vec` elements (1 or 4; rows a
// multiple of 8 and of vec, rows / vec dividing 32). kTransposeTile unless asked otherwise
// (bench/transpose_store_probe measures them).
struct TransposeTile {
  int rows = 32, vec = 4;
  int cols() const { return 32 * vec; }
  bool operator==(const TransposeTile&) const = default;
};
inline constexpr TransposeTile kTransposeTile{32, 4};

// Each kind says what reports call it (`kName`, the --json "kind"), how many GEMM products it
// computes (`kProducts`; a GEMM kind then has their K as `k`), and whether NVRTC builds it for
// the arch-specific target (`kArchSpecific`, sm_90a): reports, builds and plan rewrites read
// these through KernelStep, never a kind's own fields.

// A pointwise grid-stride kernel (codegen/pointwise_kernel.h): each thread computes vec elements
// of the space per iteration. `store` is how it lays out what it writes; it is no kind of its
// own since one generator, one signature and one grid-stride loop serve every layout, and only
// the layout is what the plan rewrites and the layout check ask about.
enum class Store {
  RowMajor,
  // The output is a [rows, 3 * row_len] split buffer (codegen/tf32x3.h): the kernel's n counts
  // its elements, three per element of the iteration space.
  Tf32x3Split,
  // The output is stored transposed, [row_len, rows] (codegen/transposed_x_plan.h): a block per
  // tile of `transpose_tile`, turned around in shared memory.
  Transposed,
};
struct Elementwise {
  static constexpr std::string_view kName = "pointwise";
  static constexpr int kProducts = 0;
  static constexpr bool kArchSpecific = false;
  Store store = Store::RowMajor;
  TransposeTile transpose_tile = kTransposeTile;  // Store::Transposed only
  bool operator==(const Elementwise&) const = default;
};

// A row kernel (codegen/reduction_kernel.h): threads_per_row threads (a warp or a whole block)
// share a row, rows_per_block rows to a block; the output has out_row_len elements per row
// (row_len, or 1 for a per-row result).
struct RowReduction {
  static constexpr std::string_view kName = "reduction";
  static constexpr int kProducts = 0;
  static constexpr bool kArchSpecific = false;
  int threads_per_row = 32;
  int rows_per_block = 1;
  int64_t out_row_len = 1;
  bool operator==(const RowReduction&) const = default;
};

// A GEMM on the CUDA cores (codegen/small_gemm_kernel.h): y[rows, row_len] = x[rows, k] . w^T,
// a block of kSmallGemmThreads threads per tile_cols columns of one row of y.
struct SimtGemm {
  static constexpr std::string_view kName = "gemm";
  static constexpr int kProducts = 1;
  static constexpr bool kArchSpecific = false;
  int64_t k = 0;
  int64_t tile_cols = 0;
  bool operator==(const SimtGemm&) const = default;
};

// A GEMM on the tensor cores by mma.sync (codegen/mma_gemm_kernel.h): a block of `threads`
// threads per tile of tile_rows rows x tile_cols columns of y[rows, row_len], over K = k.
struct MmaGemm {
  static constexpr std::string_view kName = "gemm";
  static constexpr int kProducts = 1;
  static constexpr bool kArchSpecific = false;
  int64_t k = 0;
  int64_t tile_rows = 0;
  int64_t tile_cols = 0;
  int threads = 0;
  bool operator==(const MmaGemm&) const = default;
};

// A gated GEMM as an mma kernel: inputs x, wg, wu; y = combine(x . wg^T, x . wu^T). Launched as
// the plain mma kernel is (no TMA).
struct GatedMmaGemm : MmaGemm {
  static constexpr std::string_view kName = "gated_gemm";
  static constexpr int kProducts = 2;
  bool operator==(const GatedMmaGemm&) const = default;
};

// The Hopper gated GEMM (codegen/gated_gemm_kernel.h): inputs x, wg, wu; y[rows, row_len] =
// combine(x . wg^T, x . wu^T) over K = k. Launched with TMA descriptors of its buffers,
// kGatedThreads threads, smem_bytes of dynamic shared memory and one block per SM at most.
struct GatedGemm {
  static constexpr std::string_view kName = "gated_gemm";
  static constexpr int kProducts = 2;
  static constexpr bool kArchSpecific = true;
  int64_t k = 0;
  int smem_bytes = 0;
  bool operator==(const GatedGemm&) const = default;
};

// A whole MLP on the tensor cores (codegen/fused_mlp_mma_kernel.h): inputs x, then each layer's
// weight (and bias); y[rows, row_len]. Persistent: warps of tile_rows rows each, up to `threads`
// threads a block, smem_bytes of dynamic shared memory. Its products differ in K and N, so it
// states no kProducts: its FLOPs are 2 * rows * macs_per_row (KernelStep::macs_per_row).
struct FusedMlpMma {
  static constexpr std::string_view kName = "fused_mlp";
  static constexpr int kProducts = 0;
  static constexpr bool kArchSpecific = false;
  int64_t tile_rows = 0;
  int threads = 0;
  int smem_bytes = 0;
  int64_t macs_per_row = 0;  // sum over layers of n_i * n_{i-1}
  bool operator==(const FusedMlpMma&) const = default;
};

// A whole MLP in one kernel on the CUDA cores, IEEE fp32 (codegen/fused_mlp_simt_kernel.h): a
// cluster of `cluster` blocks of `threads` threads per tile of rows_per_tile rows of y, through
// every layer, with smem_bytes of dynamic shared memory. Its chain of products counts as one
// GEMM of x (K = k, x's width); reports take its multiply-adds from macs_per_row, the sum over
// layers of n_i x n_{i-1} for a row of y.
struct FusedMlpSimt {
  static constexpr std::string_view kName = "fused_mlp";
  static constexpr int kProducts = 1;
  static constexpr bool kArchSpecific = false;
  int64_t k = 0;
  int64_t macs_per_row = 0;
  int rows_per_tile = 0;
  int cluster = 0;
  int threads = 0;
  int smem_bytes = 0;
  bool operator==(const FusedMlpSimt&) const = default;
};

// Overloaded lambdas for std::visit over the kinds.
template <class... F>
struct Overloaded : F... {
  using F::operator()...;
};
// Clang before 17 does not deduce an aggregate's template arguments from its initializers.
template <class... F>
Overloaded(F...) -> Overloaded<F...>;

}  // namespace mlpc::codegen
