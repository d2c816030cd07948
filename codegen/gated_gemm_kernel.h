// A gated GEMM as one generated Hopper kernel: y[rows, n] = f(x . wg^T, x . wu^T), where f is a
// pointwise function of the two accumulators (GeGLU: gelu_tanh(g) * u; SwiGLU: silu(g) * u).
// cuBLASLt has no epilogue that combines two GEMM outputs, so eager and torch.compile write
// both [rows, n] products to memory and read them back in a pointwise kernel, a fifth of the
// forward's time at the article's size (docs/benchmarks.md). Here the products never leave the
// registers.
//
// Shape (sm_90a only: TMA and WGMMA): a persistent kernel, one block of 3 warpgroups per SM.
// Warpgroup 0 is the producer: one thread streams k-slices of 64 through a ring of shared-
// memory stages with TMA (x's 128 rows, then wg's and wu's 128 rows of the same output columns,
// back to back: the B operand of one m64n256k16 WGMMA whose first 128 columns are the gate and
// last 128 the up projection). Warpgroups 1 and 2 each own 64 of the tile's 128 rows and issue
// the WGMMAs; a thread's accumulator fragment then holds g and u of the same output elements
// (fragment columns c and c + 128), so the epilogue needs no data exchange. mbarriers hand the
// stages back and forth; the producer runs ahead into the next tile while the consumers finish
// this one. Tiles go in groups of kGatedGroupM row blocks for L2 reuse of x.
//
// Epilogue workers (GatedGemmConfig::epilogue_workers, the default): the consumers write g and u
// to shared memory as 16-bit values and go straight on to the next tile's WGMMAs, while the
// producer warpgroup's three idle warps compute combine(g, u) and store the tile with TMA; the
// combine's exp and reciprocal no longer keep the tensor cores waiting. A block's last tile has
// nothing to overlap with: its consumers combine it themselves (three times the threads).
//
// The last round: a tile count just over a multiple of the grid leaves most SMs idle in the last
// round (Llama-8B's 3584 tiles on 132 SMs: 27.15 rounds run as 28). Those tail tiles are split
// along k into up to gated_gemm_max_splits(k) ranges, one per block; each range's fp32 partial
// sums go to a workspace, and whichever range of a tile finishes last (an atomic counter) adds
// the others' and runs the epilogue. The same split spreads a few tiles over more SMs at small
// batches.
//
// Operand layout: x[rows, k], wg[n, k], wu[n, k], y[rows, n], all row-major (k contiguous), 16-
// byte aligned rows (k % 8 == 0, n % 8 == 0); ragged edges are zero-filled by TMA on load and
// clipped on store. The kernel takes four TMA descriptors (runtime/exec/tensor_map.h builds them,
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

// 3 stages: measured faster than 4 at Llama-8B's size and equal at the article's
// (bench/gated_gemm_probe; docs/benchmarks.md). Clusters of 2 blocks sharing each weight slice
// through TMA multicast measured a quarter slower.
struct GatedGemmConfig {
  int stages = 3;  // shared-memory ring depth (48 KiB each)
  // The consumers hand g and u to the producer warpgroup's idle warps as 16-bit values (rounded
  // as eager and torch.compile round them) and go on to the next tile's WGMMAs while those warps
  // combine and store; otherwise the consumers combine the fp32 accumulators themselves while
  // the tensor cores idle.
  bool epilogue_workers = true;
  // The kernel can split tail tiles along k (its max_splits argument is then honoured). Off for a
  // K that never splits (gated_gemm_max_splits(k) == 1, e.g. the article's 768): the partial-sum
  // code is left out of the source, which cuts NVRTC's build by about a third
  // (bench/nvrtc_build_probe), and that build is the longest path of a cold -O2 compile.
  bool split_tail = true;
  // Blocks per cluster along M (1 or 2): with 2, the two blocks of a cluster take tiles of the
  // same columns in adjacent row blocks, in step, and each loads half of the weight slice for
  // both (TMA multicast): a third less traffic from L2 per FLOP. Launched with a grid of whole
  // clusters (gated_gemm_grid). Measured no faster than 1 (gated_gemm_probe and mlpc bench;
  // docs/benchmarks.md), so 1 is the default.
  int cluster_m = 1;
};

// The most k-ranges a tail tile is split into (the kernel's max_splits argument; 1: no split).
int gated_gemm_max_splits(int64_t k);

// Blocks to launch for y[rows, n]: one per SM at most (the kernel loops over its tiles), fewer
// when there are fewer tiles than SMs, counting a tile as max_splits units; whole clusters of
// cluster_m blocks (GatedGemmConfig::cluster_m), sm_count then the blocks that fit at once in
// whole clusters (cudaOccupancyMaxActiveClusters times cluster_m).
unsigned gated_gemm_grid(int64_t rows, int64_t n, int max_splits, int sm_count, int cluster_m = 1);

// The kernel's workspace (its ws argument, zero-filled once before the first launch and left
// zero by every launch): tail-tile counters, then fp32 partial sums of one [128, 256] tile per
// block. One workspace serves every gated kernel launched in order on one stream.
inline constexpr size_t kGatedCounterBytes = 4096;  // 1024 tail tiles: more than any GPU's SMs
size_t gated_gemm_workspace_bytes(int sm_count);

// Dynamic shared memory the kernel needs for `config`, including 1 KiB of alignment slack.
int gated_gemm_smem_bytes(const GatedGemmConfig& config);

// The CUDA source of kernel `name`:
//   extern "C" __global__ void name(const __grid_constant__ MlpcTmaDesc x,
//       const __grid_constant__ MlpcTmaDesc wg, const __grid_constant__ MlpcTmaDesc wu,
//       const __grid_constant__ MlpcTmaDesc y, int rows, int n, int k, int max_splits, float* ws)
// launched with kGatedThreads threads, gated_gemm_smem_bytes() of dynamic shared memory, and
// at most one block per SM (the grid loops over the tiles). `combine` is the body of
//   __device__ __forceinline__ float mlpc_gate_combine(float g, float u)
// (e.g. "return mlpc_gelu_tanh(g) * u;"), and `helpers` the device functions it calls.
// dtype: BF16 or F16 (throws mlpc::Error for F32: WGMMA takes no fp32 operands).
std::string generate_gated_gemm_source(const std::string& name, ir::DType dtype,
                                       const std::string& helpers, const std::string& combine,
                                       const GatedGemmConfig& config = {});

}  // namespace mlpc::codegen
