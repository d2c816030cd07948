// What the GEMM-kernel tests share: a GemmStep of given shape and epilogue, and a gated graph
// whose combine rounds through f16 (it needs the headers' conversions).
#pragma once

#include <cstdint>

#include "codegen/plan.h"

namespace mlpc::testing {

// y[M, n] = epilogue(x[M, k] . w^T): buffers x 0, w 1, bias 2 (when the epilogue has one), y 3.
inline codegen::GemmStep gemm_step(ir::DType dt, int64_t n, int64_t k, codegen::Epilogue e) {
  codegen::GemmStep g;
  g.name = "gemm_y";
  g.x = 0, g.w = 1, g.y = 3;
  g.epilogue = e;
  if (e != codegen::Epilogue::None) g.bias = 2;
  g.n = n;
  g.k = k;
  g.dtype = dt;
  g.op = "matmul";
  g.ir_nodes = {"y"};
  return g;
}

inline constexpr const char* kGatedThroughF16 = R"(func @g(%x: bf16[M, 64]) -> bf16[M, 64] {
  %wg = param bf16[64, 64]
  %wu = param bf16[64, 64]
  %gate = matmul %x, %wg : bf16[M, 64]
  %up = matmul %x, %wu : bf16[M, 64]
  %act = silu %gate : bf16[M, 64]
  %half = cast %act : f16[M, 64]
  %back = cast %half : bf16[M, 64]
  %h = mul %back, %up : bf16[M, 64]
  return %h
})";

}  // namespace mlpc::testing
