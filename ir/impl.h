// How a GEMM runs: the attribute passes/select_kernels sets on each matmul (and on the
// fused.pointwise region a gated GEMM kernel swallows, and on a fused.mlp region), printed as
// `impl NAME`. Codegen lowers what it says and decides nothing; `auto` is a graph no selection
// ran on (cuBLASLt).
#pragma once

#include <optional>
#include <string_view>

namespace mlpc::ir {

enum class Impl {
  Auto,          // not selected: a cuBLASLt call
  Cublaslt,      // a cuBLASLt call (IEEE fp32 SGEMM for f32)
  CublasltXt,    // f32: x stored transposed by the kernel writing it (codegen/transposed_x_plan.h)
  CublasltXtWt,  // f32: x and the weight stored transposed (cuBLAS's NT SGEMM)
  Tf32x3,        // f32: three TF32 tensor-core products in K-chunks (codegen/tf32x3.h)
  Simt,          // the CUDA-core GEMM kernel (codegen/small_gemm_kernel.h)
  Mma,           // the tensor-core mma.sync kernel (codegen/mma_gemm_kernel.h)
  GatedWgmma,    // gate, up and their combine as the Hopper gated kernel (gated_gemm_kernel.h)
  GatedMma,      // the same as the mma.sync gated kernel
  FusedMlp,      // a layer of a whole MLP in one kernel (a fused.mlp region, ir/mlp_chain.h)
};

std::string_view impl_name(Impl impl);
std::optional<Impl> parse_impl(std::string_view name);
// Whether `impl` makes a matmul part of a gated GEMM kernel (with its region).
inline bool is_gated(Impl impl) { return impl == Impl::GatedWgmma || impl == Impl::GatedMma; }
// Whether `impl` keeps an f32 matmul a cuBLASLt call with some layout.
inline bool is_cublaslt(Impl impl) {
  return impl == Impl::Auto || impl == Impl::Cublaslt || impl == Impl::CublasltXt ||
         impl == Impl::CublasltXtWt;
}

}  // namespace mlpc::ir
