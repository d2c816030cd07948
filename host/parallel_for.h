// Host work spread over the CPU's cores: NVRTC builds, the reference's matmul rows, timing
// operands. One index at a time from a shared counter, so uneven items (a gated GEMM kernel's
// build beside a pointwise kernel's) balance by themselves.
#pragma once

#include <cstdint>
#include <functional>

namespace mlpc::runtime {

// Calls f(0) .. f(n - 1), each once, on up to hardware_concurrency threads (the calling thread
// among them), and returns when every call has. f must not throw: catch inside it.
void parallel_for(int64_t n, const std::function<void(int64_t)>& f);

}  // namespace mlpc::runtime
