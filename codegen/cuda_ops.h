// How each pointwise op is written in CUDA C++ (style.md #12): one table, fp32 math throughout.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ir/graph.h"

namespace mlpc::codegen {

// The fp32 expression computing `n` from operand expressions `args`.
std::string cuda_expr(const ir::Node& n, const std::vector<std::string>& args);
// A __device__ helper the expression calls, or "" when it needs none.
std::string_view cuda_helper(ir::Op op);
// The CUDA element type of a dtype: float, __half, __nv_bfloat16.
std::string_view cuda_type(ir::DType t);

// The pieces every generated kernel's source starts from: the cuda_fp16/cuda_bf16 includes;
// mlpc_to_float / mlpc_from_float for one dtype; and mlpc_load<N> / mlpc_store<N> of N
// consecutive elements (16-byte accesses when they fill whole chunks, p then 16-byte aligned;
// one at a time otherwise), which need the conversions of the dtypes they are used with.
std::string_view cuda_includes();
std::string float_conversions(ir::DType t);
std::string_view vector_access();

// Every generated kernel's signature, through its opening brace:
//   extern "C" __global__ void __launch_bounds__(THREADS) NAME(
//       const T* __restrict__ in0,  // %input   (one per input of `body`, in order)
//       T* __restrict__ out,  // %fused
//       long long n) {
std::string kernel_signature(std::string_view name, int threads, const ir::Graph& body,
                             const std::vector<ir::NodeId>& inputs, const ir::Node& fused);

}  // namespace mlpc::codegen
