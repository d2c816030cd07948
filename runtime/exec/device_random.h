// Random operands for timing, written on the device: the first kRandomBlock values are drawn on
// the host (host/random_init.h) and uploaded, the rest are device copies of them. Timing needs
// random bits in every tile (zeros draw less power and flatter a GEMM), not values unique over
// the whole operand, and drawing and uploading every value of a large operand from the host
// cost a cold -O2 compile more than the timings themselves.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "ir/dtype.h"

namespace mlpc::runtime {

inline constexpr int64_t kRandomBlock = int64_t{1} << 20;  // values drawn on the host

// Fills `count` values of `dtype` at device memory `dst` with U(-scale, scale) from `seed`,
// the pattern of the first min(count, kRandomBlock) values repeated; enqueued on `stream`.
void fill_random_device(void* dst, int64_t count, ir::DType dtype, double scale, uint64_t seed,
                        cudaStream_t stream = nullptr);

}  // namespace mlpc::runtime
