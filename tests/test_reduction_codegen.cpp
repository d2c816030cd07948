// Row-kernel codegen: the launch shape follows the row length, sources make the expected
// choices, and every row kernel compiles with NVRTC for sm_90 at row lengths 1, 7, 768, 4096
// and 14336 in every dtype (no GPU needed).
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "codegen/plan_builder.h"
#include "codegen/reduction_kernel.h"
#include "compiler/compile.h"
#include "ir/parser.h"
#include "passes/pipeline.h"

using namespace mlpc;

namespace {

std::vector<codegen::KernelStep> row_kernels(const std::string& text, bool fusion = true) {
  passes::PipelineResult r = passes::run_pipeline(ir::parse(text, "k.mlp"), {.fusion = fusion});
  std::vector<codegen::KernelStep> out;
  for (const codegen::Step& s : codegen::build_plan(r.graph).steps)
    if (auto* k = std::get_if<codegen::KernelStep>(&s); k && k->as<codegen::RowReduction>())
      out.push_back(*k);
  return out;
}

std::string softmax_of(const char* dt, int64_t n) {
  return fmt::format("func @s(%x: {0}[M, {1}]) -> {0}[M, {1}] {{\n  %p = softmax %x : {0}[M, {1}]"
                     "\n  return %p\n}}", dt, n);
}

bool has(const std::string& s, const std::string& what) {
  return s.find(what) != std::string::npos;
}

}  // namespace

TEST_CASE("row shape: a warp per short row, a block per long row", "[reduction][codegen]") {
  codegen::RowShape s = codegen::choose_row_shape(768, 8);  // 96 vectors
  CHECK(s.threads_per_row == 32);
  CHECK(s.rows_per_block == 8);
  CHECK(s.chunks == 3);
  CHECK(s.cached);
  s = codegen::choose_row_shape(4096, 8);  // 512 vectors: 128 threads x 4
  CHECK(s.threads_per_row == 128);
  CHECK(s.rows_per_block == 1);
  CHECK(s.chunks == 4);
  s = codegen::choose_row_shape(14336, 8);  // 1792 vectors: 512 threads x 4 (the last partial)
  CHECK(s.threads_per_row == 512);
  CHECK(s.chunks == 4);
  CHECK(s.cached);
  s = codegen::choose_row_shape(40000, 4);  // 10000 vectors: 1024 threads x 10, too many floats
  CHECK(s.threads_per_row == 1024);
  CHECK(s.chunks == 10);
  CHECK_FALSE(s.cached);
  s = codegen::choose_row_shape(1, 1);
  CHECK(s.threads_per_row == 32);
  CHECK(s.chunks == 1);
}

TEST_CASE("row kernel sources: vectors when aligned, scalar otherwise, fp32 accumulation",
          "[reduction][codegen]") {
  auto k = row_kernels(softmax_of("bf16", 768));
  REQUIRE(k.size() == 1);
  CHECK(k[0].vec == 8);
  CHECK(k[0].as<codegen::RowReduction>()->out_row_len == 768);
  CHECK(has(k[0].source, "float acc0 = __int_as_float(0xff800000);  // -inf"));  // the max pass first
  CHECK(has(k[0].source, "mlpc_warp_max(acc0)"));
  CHECK(has(k[0].source, "mlpc_warp_sum(acc1)"));
  CHECK(has(k[0].source, "//   %p.max = reduce_max %p.f32"));
  CHECK_FALSE(has(k[0].source, "mlpc_block_"));
  k = row_kernels(softmax_of("f16", 7));
  CHECK(k[0].vec == 1);
  k = row_kernels(softmax_of("f32", 4096));
  CHECK(k[0].as<codegen::RowReduction>()->threads_per_row == 256);
  CHECK(has(k[0].source, "mlpc_block_max<kThreadsPerRow / 32>(acc0, smem)"));
  CHECK(has(k[0].source, "kept in registers"));
  k = row_kernels(softmax_of("f32", 40000));
  CHECK(has(k[0].source, "re-read in every pass"));
  // A per-row result is written once per row.
  k = row_kernels("func @f(%x: bf16[M, 64]) -> bf16[M, 1] {\n  %m = reduce_mean %x : bf16[M, 1]"
                  "\n  return %m\n}");
  REQUIRE(k.size() == 1);
  CHECK(k[0].as<codegen::RowReduction>()->out_row_len == 1);
  CHECK(has(k[0].source, "if (lane == 0) mlpc_from_float(v_m, &out[row]);"));
  CHECK(has(k[0].source, "(1.0f / kRowLen)"));
}

TEST_CASE("row kernel registers: the row held, row vectors reloaded, costly values kept",
          "[reduction][codegen]") {
  // layernorm: only x is held across passes; its weight and bias are reloaded in the output
  // pass (holding all three took many more registers and ran much slower: docs/benchmarks.md).
  // x is held as bf16, its own width: half the registers of its floats, so more blocks fit on
  // an SM.
  auto k = row_kernels("func @l(%x: bf16[M, 4096]) -> bf16[M, 4096] {\n"
                       "  %w = param bf16[4096]\n  %b = param bf16[4096]\n"
                       "  %y = layernorm %x, %w, %b, 1e-05 : bf16[M, 4096]\n  return %y\n}");
  REQUIRE(k.size() == 1);
  CHECK(has(k[0].source, "alignas(16) __nv_bfloat16 x0[kChunks][kVec];"));
  CHECK(has(k[0].source, "mlpc_load_raw<kVec>(row0 + col, x0[j]);"));
  CHECK(has(k[0].source, "mlpc_to_float(x0[j][k])"));
  CHECK_FALSE(has(k[0].source, "x1[kChunks][kVec];"));
  CHECK_FALSE(has(k[0].source, "x2[kChunks][kVec];"));
  CHECK(has(k[0].source, "      float x1[kVec];\n      mlpc_load<kVec>(row1 + col, x1);"));
  CHECK_FALSE(has(k[0].source, "kept for a later pass"));  // nothing costly is recomputed
  // softmax: exp is computed in the sum pass and read back in the output pass, which divides
  // by the row's sum through its reciprocal.
  k = row_kernels(softmax_of("bf16", 4096));
  REQUIRE(k.size() == 1);
  CHECK(has(k[0].source, "float k_v_p_exp[kChunks][kVec];  // kept for a later pass"));
  CHECK(has(k[0].source, "k_v_p_exp[j][k] = v_p_exp;"));
  CHECK(has(k[0].source, "const float v_p_exp = k_v_p_exp[j][k];"));
  CHECK(has(k[0].source, "v_p_exp * (1.0f / v_p_sum)"));
  // A re-read row has no registers to spare: exp is computed again.
  k = row_kernels(softmax_of("f32", 40000));
  CHECK_FALSE(has(k[0].source, "k_v_p_exp"));
}

TEST_CASE("launch dims of a row kernel: a block per rows_per_block rows", "[reduction][codegen]") {
  const codegen::KernelStep k;
  codegen::RowReduction r{.threads_per_row = 32, .rows_per_block = 8, .out_row_len = 768};
  CHECK(codegen::launch_dims(r, k, 768 * 37).grid == 5);
  CHECK(codegen::launch_dims(r, k, 768 * 37).block == 256);
  r = {.threads_per_row = 128, .rows_per_block = 1, .out_row_len = 1};  // a per-row output:
  CHECK(codegen::launch_dims(r, k, 8192).grid == 8192);                 // numel is the rows
  CHECK(codegen::launch_dims(r, k, 8192).block == 128);
}

TEST_CASE("row kernels compile with NVRTC at every row length and dtype",
          "[reduction][codegen][nvrtc]") {
  for (int64_t n : {1, 7, 768, 4096, 14336})
    for (const char* dt : {"f32", "f16", "bf16"}) {
      std::string text = fmt::format(R"(
func @rows(%x: {0}[M, {1}], %r: {0}[M, {1}]) -> ({0}[M, {1}], {0}[M, {1}], {0}[M, {1}], {0}[M, 1]) {{
  %w = param {0}[{1}]
  %b = param {0}[{1}]
  %h = add %x, %r : {0}[M, {1}]
  %rms = rmsnorm %h, %w, 1e-05 : {0}[M, {1}]
  %ln = layernorm %x, %w, %b, 1e-05 : {0}[M, {1}]
  %sm = softmax %x : {0}[M, {1}]
  %mx = reduce_max %r : {0}[M, 1]
  return %rms, %ln, %sm, %mx
}})", dt, n);
      INFO("row length " << n << " " << dt);
      CompiledGraph c = compile(ir::parse(text, "rows.mlp"), {.arch = "sm_90", .use_cache = false});
      CHECK(c.cubins.size() >= 4);
      for (const auto& [name, cubin] : c.cubins) {
        INFO(name);
        CHECK(std::string(cubin.data(), 4) == "\x7f" "ELF");
      }
    }
  // The register-spilling long row, and eager's lone row kernels.
  CompiledGraph wide = compile(ir::parse(softmax_of("f32", 40000), "w.mlp"),
                               {.arch = "sm_90", .use_cache = false});
  CHECK(wide.cubins.size() == 1);
  CompiledGraph eager = compile(ir::parse(softmax_of("bf16", 768), "e.mlp"),
                                {.fusion = false, .arch = "sm_90", .use_cache = false});
  CHECK(eager.plan.launches() == 7);  // cast, max, sub, exp, sum, div, cast
}
