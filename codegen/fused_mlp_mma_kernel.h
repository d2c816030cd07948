// A whole MLP (codegen/fused_mlp_spec.h) as one generated kernel on the tensor cores through
// warp-level mma.sync m16n8k16 (sm_80+), f16 or bf16 with fp32 accumulation: x is read once, y
// written once, and no hidden activation leaves the SM. For a narrow MLP over many rows (widths
// up to 128) the per-layer plan is memory-bound on its hidden activations, written and read back
// once per layer; here every layer's weights sit in shared memory and each hidden activation
// lives only in registers.
//
// Layout in registers. A warp owns 16 * R rows (R m16 tiles) per tile of work. Layer i's fp32
// accumulators are R x n_i/8 m16n8 fragments; after the epilogue (bias, activation) they are
// rounded to the dtype and packed in pairs, which is exactly the A fragment of layer i + 1: the
// accumulators of two adjacent n8 tiles hold, per thread, the same rows and k positions as the A
// operand of one k16 slice. So a hidden activation never touches shared memory. The first layer's
// A fragments are x loaded straight from memory in 16-byte vectors: each thread loads 8
// consecutive elements of its two fragment rows, which permutes k within each 32-wide chunk (16
// for a 16-wide tail); W_1 is stored in shared memory with the same permutation, so the products
// are unchanged. The next tile's x is loaded into registers before the current tile's layers run,
// so its latency hides behind them.
//
// Layout in shared memory. Every layer's weights [n_i, n_{i-1}] row-major (the B operand, "col"
// for the MMA), rows padded by 8 elements (16 bytes) so the eight 16-byte rows one ldmatrix
// phase reads fall in eight different bank groups, then every bias as fp32. The last layer's
// rows are padded with zeros to a multiple of 8 (the MMA's N) and only the real columns are
// stored. The block is persistent (one per SM at most): it stages the weights once, then its
// warps loop over tiles of rows, a tile a warp.
//
// The budget. Registers: a thread holds R * width / 2 fp32 accumulators of a layer, R * width / 4
// packed A registers of its input, and R * in_width / 4 of the next tile's x; R * max width <= 128
// keeps that near 128 registers, well under the 255 a thread may hold, so R is 128 /
// the widest layer (at most 4) and a layer wider than 128 is refused (it would spill). Shared
// memory: the padded weights and the biases must fit a block's 227 KiB (sm_90's opt-in limit;
// sm_80 allows 163 KiB, so the largest specs launch on sm_90 only). Widths: in_width and every
// hidden width a multiple of 16 (the MMA's K, and a layer's output is the next one's K); the
// output width any, padded to 8.
//
// Alike hidden layers (square, with the same bias and activation) in a row may run as one loop
// over their weights, evenly spaced in shared memory, rewriting the A fragments in place: NVRTC's
// time grows with the unrolled code, and a cold -O2 compile waits for this kernel's build. The
// loop costs a few percent of run time, so it is taken only where the build is long
// (fused_mlp_loops_pay).
//
// The tail: rows past the end are read as zeros and never stored, at any row count.
//
// Parameters (fused_mlp_spec.h): x, then per layer W_i (and b_i when it has a bias), then y and
// y's element count n.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "codegen/fused_mlp_spec.h"
#include "codegen/plan.h"

namespace mlpc::codegen {

// A block's dynamic shared memory at most: sm_90's opt-in limit.
inline constexpr int kFusedMlpSmemBudget = 227 * 1024;
inline constexpr int64_t kFusedMlpMaxWidth = 128;  // R * width <= 128 registers' worth
// Warps of a block at most: one block per SM, so 65536 registers / 8 warps leave a thread 255.
// Fewer warps with more registers each beat 12 warps on the tensor cores
// (docs/kernels/fused_mlp_mma.md).
inline constexpr int kFusedMlpMaxWarps = 8;

// How the kernel covers a spec: `r` m16 tiles per warp, up to `warps` warps a block (one block per
// SM), `smem_bytes` of weights and biases a block.
struct FusedMlpMmaShape {
  int r = 1;
  int warps = kFusedMlpMaxWarps;
  int smem_bytes = 0;
  // Hidden layers alike (square, same bias and activation) in a row run as one loop over their
  // weights instead of a copy each: NVRTC builds one layer's code, not one per layer, and the
  // kernel runs a few percent slower. fused_mlp_mma_shape sets it where fused_mlp_loops_pay.
  bool loop_alike_layers = false;
  int threads() const { return 32 * warps; }
  int64_t warp_rows() const { return int64_t{16} * r; }  // rows a warp takes a tile
};

// Whether the kernel can compute `spec`; if not, why (in `why_not` when given): the dtype, an
// empty spec, a width not a multiple of 16 (in_width, hidden widths), a layer wider than
// kFusedMlpMaxWidth, weights past the shared-memory budget, an activation a GEMM epilogue does
// not apply, a residual whose widths differ.
bool fused_mlp_mma_fits(const FusedMlpSpec& spec, std::string* why_not = nullptr);

// The shape for a spec that fits.
FusedMlpMmaShape fused_mlp_mma_shape(const FusedMlpSpec& spec);

// Unrolled, a warp tile's MMAs past this make NVRTC's build the longest part of a cold -O2
// compile (width 128: 592 MMAs, over a second) while width 64's 336 build in about half that.
inline constexpr int64_t kFusedMlpLoopMmas = 384;
// Whether alike hidden layers should loop: the unrolled kernel has more than kFusedMlpLoopMmas
// MMAs a warp tile, or a looped run's activation is not ReLU (GELU, SiLU: an inline expression
// over every accumulator, unrolled once per layer).
bool fused_mlp_loops_pay(const FusedMlpSpec& spec);

// The kernel `name` for `spec`, or nullopt when fused_mlp_mma_fits refuses it. Its name, source,
// row_len (the output width), kind and ops are set; its buffers (inputs x, W_1, b_1, ..., output
// y) are the caller's to fill in.
std::optional<KernelStep> generate_fused_mlp_mma_kernel(const FusedMlpSpec& spec,
                                                        const std::string& name);
// The same with a shape of the caller's (e.g. loop_alike_layers off); `shape` as
// fused_mlp_mma_shape gives it but for the choices it leaves open.
std::optional<KernelStep> generate_fused_mlp_mma_kernel(const FusedMlpSpec& spec,
                                                        const std::string& name,
                                                        const FusedMlpMmaShape& shape);

// The runs of hidden layers the kernel loops over: [first, last] layer indices (0-based), each
// run at least two layers alike (square, same bias and activation), never the first or the last
// layer of the spec.
std::vector<std::pair<size_t, size_t>> fused_mlp_layer_loops(const FusedMlpSpec& spec);

// Persistent: tiles of tile_rows rows, one per warp at a time; as few warps a block as leave no
// SM without a tile (so few rows spread over many SMs), at most kGpuSms blocks; the warps loop.
LaunchDims launch_dims(const FusedMlpMma& f, const KernelStep& k, int64_t numel);

}  // namespace mlpc::codegen
