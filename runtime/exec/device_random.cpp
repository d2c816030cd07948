#include "runtime/exec/device_random.h"

#include <algorithm>
#include <vector>

#include "host/random_init.h"
#include "runtime/device/cuda_check.h"

namespace mlpc::runtime {

void fill_random_device(void* dst, int64_t count, ir::DType dtype, double scale, uint64_t seed,
                        cudaStream_t stream) {
  if (count <= 0) return;
  const auto size = static_cast<int64_t>(ir::dtype_size(dtype));
  const int64_t block = std::min(count, kRandomBlock);
  const std::vector<uint8_t> bytes = random_bytes(dtype, block, scale, seed);
  // From pageable memory the call returns once the bytes are staged: `bytes` may go.
  MLPC_CUDA(cudaMemcpyAsync(dst, bytes.data(), bytes.size(), cudaMemcpyHostToDevice, stream));
  auto* base = static_cast<char*>(dst);
  // Doubling copies: each one repeats everything written so far, so a 1 GB operand takes ~10.
  for (int64_t done = block; done < count;) {
    const int64_t n = std::min(done, count - done);
    MLPC_CUDA(cudaMemcpyAsync(base + done * size, base, static_cast<size_t>(n * size),
                              cudaMemcpyDeviceToDevice, stream));
    done += n;
  }
}

}  // namespace mlpc::runtime
