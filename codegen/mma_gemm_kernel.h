// A GEMM with few rows (decode sizes: 1 to a few hundred) on the tensor cores through warp-level
// mma.sync (sm_80+), as one generated kernel: y[rows, n] = act(x[rows, k] . w[n, k]^T + bias),
// or, gated, y = combine(x . wg^T, x . wu^T) (GeGLU's gelu_tanh(g) * u) with both products in
// registers. fp32 accumulation, one rounding to the output dtype.
//
// Why: at 16 rows a GEMM is a read of its weights (the decode-size GeGLU's 14 MB, L2-resident
// across forwards) and a few microseconds of latency; cuBLASLt's tiles leave most SMs idle there
// (docs/benchmarks.md has the decode-size GeGLU's times), the CUDA-core small-GEMM kernel
// (codegen/small_gemm_kernel.h) re-reads every weight once per row, and the Hopper gated kernel
// (codegen/gated_gemm_kernel.h) pays for 128-row tiles. Here a block owns a tile of 16 rows x 8
// n_tiles output columns: its warps split K into 32-wide chunks, each chunk one 16-byte load per
// thread of x's two rows and of each weight row, fed to two m16n8k16 MMAs per 8 columns (the
// chunk's k order permuted identically for both operands so those loads land in the fragments
// directly); the warps' partial sums meet in shared memory, then the epilogue stores the tile.
// Every weight is read once per 16 rows; x once per block.
//
// Layout: x[rows, k], w (wg, wu)[n, k], y[rows, n] row-major; k % 32 == 0, n % 8 == 0; bf16 or
// f16. Launched as a plain generated kernel (MmaGemm, launch_dims): a block per
// output tile, grid-striding past the launch cap; rows past the end read as zeros, never stored.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "codegen/plan.h"

namespace mlpc::codegen {

inline constexpr int kMmaTileRows = 16;   // rows of an output tile: the MMA's M
inline constexpr int kMmaChunkK = 32;     // k per 16-byte load of a thread: two MMAs' K
inline constexpr int kMmaMaxWarps = 8;

// How a block covers its tile: `warps` split K's chunks, `n_tiles` 8-column MMA tiles wide.
struct MmaGemmShape {
  int warps = 1;
  int n_tiles = 1;
  int columns() const { return 8 * n_tiles; }
  int threads() const { return 32 * warps; }
};
// Warps: K's chunks four to a warp, 1 to kMmaMaxWarps. Columns: as wide as keeps the block
// count at one wave of 16-row tiles or more on a 132-SM GPU (wider tiles read x fewer times),
// up to 4 MMA tiles (gated: 2, as each reads two weights), dividing n.
MmaGemmShape mma_gemm_shape(int64_t n, int64_t k, bool gated);

// Whether the kernel can compute y[rows, n] over K = k in `dtype` (bf16 or f16, k % 32, n % 8).
bool mma_gemm_fits(ir::DType dtype, int64_t n, int64_t k);

// The kernel for `g` (inputs x, w and the bias when its epilogue has one), or nullopt when it
// cannot compute it: an epilogue passes/gemm_epilogue.h says it does not run, a 3xTF32 or
// K-chunk or transposed GEMM, an f32 GEMM, or a shape mma_gemm_fits refuses.
std::optional<KernelStep> generate_mma_gemm_kernel(const GemmStep& g);

// The source of gated kernel `name`:
//   extern "C" __global__ void name(const T* x, const T* wg, const T* wu, T* y, long long n)
// (n: y's element count) with `combine` the body of
//   __device__ __forceinline__ float mlpc_gate_combine(float g, float u)
// and `helpers` the device functions it calls (as for codegen/gated_gemm_kernel.h).
std::string generate_mma_gated_source(const std::string& name, ir::DType dtype, int64_t n,
                                      int64_t k, const std::string& helpers,
                                      const std::string& combine);

// The launch facts of an mma kernel over y[rows, n] (a gated one's become a GatedMmaGemm).
MmaGemm mma_gemm_launch(int64_t n, int64_t k, bool gated);

// A block per output tile of the output's `numel` elements; past a cap the kernel loops.
LaunchDims launch_dims(const MmaGemm& m, const KernelStep& k, int64_t numel);

}  // namespace mlpc::codegen
