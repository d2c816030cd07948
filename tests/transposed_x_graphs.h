// A graph shared by the CPU and GPU tests of GEMMs reading x stored transposed
// (tests/test_transposed_x.cpp, tests/gpu/test_gpu_transposed_x.cpp).
#pragma once

namespace mlpc::testing {

// At -O1 the biases stay in the pointwise kernels (row vectors: read by column), so the kernels
// storing h and g transposed index them per element of a [M, 40] / [M, 30] space whose rows are
// not whole tiles: h's in vectors of 4, g's (30 is no multiple of 4) element by element. m4's
// x (h2) is also read by the residual add, so it keeps its row-major layout.
inline constexpr const char* kTransposedX = R"(func @tx(%x: f32[M, 48]) -> f32[M, 24] {
  %w1 = param f32[40, 48]
  %b1 = param f32[40]
  %m1 = matmul %x, %w1 : f32[M, 40]
  %a1 = add %m1, %b1 : f32[M, 40]
  %h = gelu %a1 : f32[M, 40]
  %w2 = param f32[30, 40]
  %b2 = param f32[30]
  %m2 = matmul %h, %w2 : f32[M, 30]
  %a2 = add %m2, %b2 : f32[M, 30]
  %g = silu %a2 : f32[M, 30]
  %w3 = param f32[24, 30]
  %m3 = matmul %g, %w3 : f32[M, 24]
  %h2 = tanh %m3 : f32[M, 24]
  %w4 = param f32[24, 24]
  %m4 = matmul %h2, %w4 : f32[M, 24]
  %y = add %m4, %h2 : f32[M, 24]
  return %y
})";

}  // namespace mlpc::testing
