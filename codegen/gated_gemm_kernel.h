// A gated GEMM as one generated Hopper kernel: y[rows, n] = f(x . wg^T, x . wu^T), where f is a
// pointwise function of the two accumulators (GeGLU: gelu_tanh(g) * u; SwiGLU: silu(g) * u).
// cuBLASLt has no epilogue that combines two GEMM outputs, so eager and torch.compile write
// both [rows, n] products to memory and read them back in a pointwise kernel: at the article's
// size 100 MB written and read again, ~40 µs of a ~210 µs forward. Here the products never
// leave the registers.
//
// Shape (sm_90a only: TMA and WGMMA): a persistent kernel, one block of 3 warpgroups per SM.
// Warpgroup 0 is the producer: one thread streams k-slices of 64 through a ring of shared-
// memory stages with TMA (x's 128 rows, then wg's and wu's 128 rows of the same output columns,
// back to back: the B operand of one m64n256k16 WGMMA whose first 128 columns are the gate and
// last 128 the up projection). Warpgroups 1 and 2 each own 64 of the tile's 128 rows and issue
// the WGMMAs; a thread's accumulator fragment then holds g and u of the same output elements
// (fragment columns c and c + 128), so the epilogue needs no data exchange. mbarriers hand the
// stages back and forth; the producer runs ahead into the next tile while the consumers finish
// the epilogue of this one. Tiles go in groups of kGatedGroupM row blocks for L2 reuse of x.
//
// Operand layout: x[rows, k], wg[n, k], wu[n, k], y[rows, n], all row-major (k contiguous), 16-
// byte aligned rows (k % 8 == 0, n % 8 == 0); ragged edges are zero-filled by TMA on load and
// clipped on store. The kernel takes four TMA descriptors (runtime/tensor_map.h builds them,
// 64-element inner box, 128-byte swizzle): x, wg and wu with kGatedTileRows-row boxes, y with
// kGatedStoreRows-row boxes.
#pragma once

#include <string>

#include "ir/dtype.h"

namespace mlpc::codegen {

inline constexpr int kGatedTileRows = 128;  // rows of x per tile, and output columns per tile
inline constexpr int kGatedTileK = 64;      // k per stage: one 128-byte swizzle row of bf16
inline constexpr int kGatedThreads = 384;   // producer + two consumer warpgroups
inline constexpr int kGatedGroupM = 16;     // row blocks walked together (tile order)
inline constexpr int kGatedStoreRows = 64;  // rows of a TMA store box of y (one warpgroup's)

// 3 stages: 702 vs 680 TFLOP/s with 4 at Llama-8B's size on the H200, equal at the article's
// (bench/gated_gemm_probe). Clusters of 2 blocks sharing each weight slice through TMA multicast
// were tried and measured 25% slower (510 vs 668 TFLOP/s, all 66 clusters resident).
struct GatedGemmConfig {
  int stages = 3;  // shared-memory ring depth (48 KiB each)
};

// Blocks to launch for y[rows, n]: one per SM at most (the kernel loops over its tiles).
unsigned gated_gemm_grid(int64_t rows, int64_t n, int sm_count);

// Dynamic shared memory the kernel needs for `config`, including 1 KiB of alignment slack.
int gated_gemm_smem_bytes(const GatedGemmConfig& config);

// The CUDA source of kernel `name`:
//   extern "C" __global__ void name(const __grid_constant__ MlpcTmaDesc x,
//       const __grid_constant__ MlpcTmaDesc wg, const __grid_constant__ MlpcTmaDesc wu,
//       const __grid_constant__ MlpcTmaDesc y, int rows, int n, int k)
// launched with kGatedThreads threads, gated_gemm_smem_bytes() of dynamic shared memory, and
// at most one block per SM (the grid loops over the tiles). `combine` is the body of
//   __device__ __forceinline__ float mlpc_gate_combine(float g, float u)
// (e.g. "return mlpc_gelu_tanh(g) * u;"), and `helpers` the device functions it calls.
// dtype: BF16 or F16 (throws mlpc::Error for F32: WGMMA takes no fp32 operands).
std::string generate_gated_gemm_source(const std::string& name, ir::DType dtype,
                                       const std::string& helpers, const std::string& combine,
                                       const GatedGemmConfig& config = {});

}  // namespace mlpc::codegen
