// TMA descriptors (the driver's CUtensorMap) for the generated Hopper kernels
// (codegen/gated_gemm_kernel.h). The encoder is the driver's cuTensorMapEncodeTiled, reached
// through the runtime's driver entry point, so mlpc still links no libcuda.
#pragma once

#include <cstdint>

#include "ir/dtype.h"

namespace mlpc::runtime {

// Bit-compatible with CUtensorMap (128 bytes, 128-byte aligned here; the kernel side declares
// 64, what TMA needs of its address), passed by value as a
// __grid_constant__ kernel parameter.
struct alignas(128) TmaDesc {
  uint64_t words[16];
};

// A row-major [rows, cols] matrix of `dtype` at `base`, loaded in boxes of box_rows rows by
// box_cols elements with 128-byte swizzle (box_cols * element size must be 128 bytes); out-of-
// bounds elements read as zeros. Needs base 16-byte aligned and cols * element size a multiple of
// 16. Throws mlpc::Error naming the matrix when the driver has no encoder or rejects the shape.
TmaDesc tma_desc_2d(const void* base, ir::DType dtype, int64_t rows, int64_t cols, int box_rows,
                    int box_cols);

}  // namespace mlpc::runtime
