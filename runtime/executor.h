// Executes a Plan on the GPU: loads each kernel's CUBIN (cudaLibraryLoadData, no driver API),
// keeps params in their own allocations and every other buffer in one arena bound to a batch
// size, and runs the steps in order on one stream.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "codegen/plan.h"
#include "runtime/gemm_lt.h"
#include "runtime/host_tensor.h"

namespace mlpc::runtime {

class Executor {
 public:
  // `cubins` maps each KernelStep's name to its CUBIN (compile_to_cubin). Needs a GPU.
  Executor(const codegen::Plan& plan, std::map<std::string, std::vector<char>> cubins);
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // Allocates the arena for this batch size (inputs, intermediates, outputs; 256-byte aligned
  // offsets) and prepares the GEMMs. A new batch size reallocates: inputs must be set again;
  // params stay.
  void bind_batch(int64_t batch);
  int64_t batch() const { return batch_; }

  // Uploads a param (allocated on its first set) or an arena buffer (needs bind_batch first).
  // The tensor's dtype and dims must match the buffer's type with the batch dim bound.
  void set_tensor(const std::string& buffer_name, const HostTensor& t);

  // Enqueues one forward on `stream`. Throws mlpc::Error if a param or input was never set.
  void run(cudaStream_t stream = nullptr);

  // Synchronizes the device, then copies one buffer back.
  HostTensor download(int buffer_index);
  std::vector<HostTensor> outputs();  // in plan.outputs order

  size_t arena_bytes() const { return arena_bytes_; }
  void* device_ptr(int buffer_index) const;  // nullptr when not allocated yet
  const codegen::Plan& plan() const { return plan_; }

 private:
  struct Launch;  // one step, with its device pointers resolved
  void resolve_launches();
  std::vector<int64_t> bound_dims(int buffer_index) const;
  int buffer_index(const std::string& name) const;

  codegen::Plan plan_;
  std::map<std::string, std::vector<char>> cubins_;  // kept alive while the libraries are loaded
  std::vector<cudaLibrary_t> libraries_;
  std::map<std::string, cudaKernel_t> kernels_;
  GemmLt gemm_;

  int64_t batch_ = -1;
  void* arena_ = nullptr;
  size_t arena_bytes_ = 0;
  std::vector<size_t> offsets_;       // arena offset per buffer (params: unused)
  std::vector<void*> params_;         // per buffer; non-null once a param was set
  std::vector<bool> set_;             // per buffer: uploaded since the last bind (params: ever)
  std::vector<Launch> launches_;
  bool launches_valid_ = false;
};

}  // namespace mlpc::runtime
