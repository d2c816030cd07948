// What the GEMM-kernel tests share: a GemmStep of given shape and epilogue, and a gated graph
// whose combine rounds through f16 (it needs the headers' conversions).
#pragma once

#include <cstdint>

#include "codegen/plan.h"

namespace mlpc::testing {

// The epilogues the GEMM tests name most (ir::GemmEpilogue).
struct Epilogue {
  static inline const ir::GemmEpilogue None{};
  static inline const ir::GemmEpilogue Bias{.bias = true};
  static inline const ir::GemmEpilogue Relu{.act = ir::Op::Relu};
  static inline const ir::GemmEpilogue ReluBias{.bias = true, .act = ir::Op::Relu};
  static inline const ir::GemmEpilogue GeluTanhBias{.bias = true, .act = ir::Op::GeluTanh};
  static inline const ir::GemmEpilogue SiluBias{.bias = true, .act = ir::Op::Silu};
};

// y[M, n] = act(x[M, k] . w^T + bias): buffers x 0, w 1, bias 2 (when the epilogue has one), y 3.
inline codegen::GemmStep gemm_step(ir::DType dt, int64_t n, int64_t k,
                                   const ir::GemmEpilogue& e) {
  codegen::GemmStep g;
  g.name = "gemm_y";
  g.x = 0, g.w = 1, g.y = 3;
  g.epilogue = e;
  if (e.bias) g.bias = 2;
  g.n = n;
  g.k = k;
  g.dtype = dt;
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
