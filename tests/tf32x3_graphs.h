// Graphs shared by the CPU and GPU tests of 3xTF32 GEMMs (tests/test_tf32x3.cpp,
// tests/gpu/test_gpu_tf32x3.cpp).
#pragma once

namespace mlpc::testing {

// Every f32 GEMM cut into four K-chunks (K 512 -> 128, K 256 -> 64) at -O2: m1's relu+bias
// epilogue rides the last chunk; m2 + r folds into one GEMM with the other as its residual,
// which enters with the first chunk.
inline constexpr const char* kChunkedTf32x3 = R"(func @chunked(%x: f32[M, 512]) -> f32[M, 128] {
  %w1 = param f32[256, 512]
  %b1 = param f32[256]
  %m1 = matmul %x, %w1 : f32[M, 256]
  %a1 = add %m1, %b1 : f32[M, 256]
  %h = relu %a1 : f32[M, 256]
  %w2 = param f32[128, 256]
  %m2 = matmul %h, %w2 : f32[M, 128]
  %w3 = param f32[128, 512]
  %r = matmul %x, %w3 : f32[M, 128]
  %y = add %m2, %r : f32[M, 128]
  return %y
})";

}  // namespace mlpc::testing
