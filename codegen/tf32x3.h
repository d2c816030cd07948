// fp32 GEMMs on TF32 tensor cores at close to fp32 accuracy ("3xTF32"): each operand value v
// is split into hi = tf32(v) and lo = tf32(v - hi), and x . w is computed as
//   lo_x . hi_w + hi_x . lo_w + hi_x . hi_w
// (the lo_x . lo_w term, ~2^-22 relative, is dropped). Laying the parts side by side along K,
//   x3 = [lo_x | hi_x | hi_x]   and   w3 = [hi_w | lo_w | hi_w],
// makes that sum one ordinary TF32 GEMM over K' = 3K with fp32 accumulation — a cuBLASLt call
// with CUBLAS_COMPUTE_32F_FAST_TF32, epilogues included. The small terms come first in K so the
// accumulator holds them before the large ones. Weights are split once, when they are set
// (host side, split_tf32x3 below); activations by the kernel that writes them (the device
// helper below), both rounding the same way: to nearest at TF32's 10 mantissa bits, ties away
// from zero (PTX cvt.rna's rounding), never rounding a finite value up to infinity.
// Accuracy: each product keeps ~21 bits, but tensor cores accumulate without IEEE rounding
// (they truncate), so the error grows with the length of each accumulation chain: one GEMM over
// K = 4096 is several times IEEE fp32's error (bench/tf32x3_accuracy.py). Cutting K into chunks
// of at most kTf32x3MaxChunk, each its own GEMM adding its result to the previous ones' in fp32
// (cuBLASLt's C = y, beta = 1), brings it to IEEE fp32's level, end to end within IEEE's
// tolerance (the measured errors are in docs/benchmarks.md). Below
// that, the split's own rounding (~2^-22 per product, against IEEE's 2^-24) is the floor. It
// changes fp32 results, so it is asked for (--fp32-gemms), never a default. The layout is
// then chunk by chunk: x3 = [lo_x0 | hi_x0 | hi_x0 | lo_x1 | hi_x1 | hi_x1 | ...] with x_j the
// j-th chunk of K, so each chunk's GEMM reads one contiguous column range of x3 and w3.
// A GEMM that cannot be cut so (K < kTf32x3MinK, or no chunk length divides K) runs in one chunk,
// less accurate: only with --fp32-gemms tf32x3 (auto skips it), checked with a tolerance of its
// own (runtime/reference/tolerance.h). One TF32 product (PyTorch's "high" matmul precision on
// Hopper) is ~2^-11 relative, for comparison.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace mlpc::codegen {

// Which of a chunk's three K-blocks holds the lo part; the other two hold hi.
inline constexpr int kTf32x3ActivationLoPart = 0;
inline constexpr int kTf32x3WeightLoPart = 1;

// Chunks are at most this long and at most a quarter of K (IEEE fp32's error grows like
// sqrt(K), the chunks' like their length: at K = 1024 with activations like a GELU layer's,
// 512-chunks only matched IEEE's max error, 256-chunks halved it), and multiples
// of 64: each chunk's columns then start 256-byte aligned in x3 and w3, as cuBLASLt's
// heuristics assume by default.
inline constexpr int64_t kTf32x3MaxChunk = 512;
inline constexpr int64_t kTf32x3ChunkAlign = 64;
inline constexpr int64_t kTf32x3MinK = 256;  // smallest K measured (chunked: below IEEE's error)

// The K-chunk that keeps a 3xTF32 GEMM of reduction length k at IEEE fp32's accuracy:
// the largest multiple of kTf32x3ChunkAlign dividing k, at most min(kTf32x3MaxChunk, k / 4);
// 0 when there is none or k < kTf32x3MinK.
int64_t tf32x3_chunk_k(int64_t k);

float tf32_round(float v);

// rows x k values (row-major) -> rows x 3k: each row's three parts, chunk by chunk of `chunk`
// columns (which divides k; k itself for one chunk), lo in block `lo_part` of each chunk.
std::vector<float> split_tf32x3(const std::vector<float>& values, int64_t rows, int64_t k,
                                int lo_part, int64_t chunk);

// CUDA source: mlpc_tf32(v) and mlpc_store_tf32x3<N>(out, e, row_len, chunk, v), which stores
// the N consecutive values v of element e (of a [rows, row_len] space; N divides chunk, chunk
// divides row_len) as their three parts in out = [rows, 3 * row_len], chunk by chunk, lo in
// block kTf32x3ActivationLoPart. Needs vector_access()'s mlpc_store.
std::string_view tf32x3_device_helpers();

}  // namespace mlpc::codegen
