// The fp32 fused-MLP kernel (codegen/fused_mlp_simt_kernel.h) without a GPU: what it refuses and
// why, its launch, what reports count for it, and that every variant builds with NVRTC for sm_90
// (tests/gpu/test_gpu_fused_mlp_simt.cpp checks the numbers). sm_90 only: its layers meet in
// thread-block clusters, which sm_80 does not have.
#include <catch2/catch.hpp>

#include "codegen/fused_mlp_simt_kernel.h"
#include "dump/report.h"
#include "runtime/jit/nvrtc_compiler.h"
#include "fused_mlp_test_util.h"

using namespace mlpc;
using codegen::FusedMlpLayer;
using testing::mlp_spec;

namespace {

bool has(const std::string& s, const std::string& what) {
  return s.find(what) != std::string::npos;
}

std::string refusal(const codegen::FusedMlpSpec& spec, const std::string& arch = "sm_90",
                    const codegen::FusedMlpSimtConfig& config = {}) {
  std::string why;
  CHECK_FALSE(codegen::fused_mlp_simt_fits(spec, arch, &why, config));
  if (arch == "sm_90") CHECK_FALSE(codegen::generate_fused_mlp_simt_kernel(spec, "k", config));
  return why;
}

}  // namespace

TEST_CASE("fused MLP simt kernel: mlp3_small's shape in clusters of 16", "[fused_mlp]") {
  const codegen::FusedMlpSpec spec = testing::mlp3_small_spec();
  REQUIRE(codegen::fused_mlp_simt_fits(spec, "sm_90"));
  auto k = codegen::generate_fused_mlp_simt_kernel(spec, "fused_mlp3");
  REQUIRE(k);
  CHECK(k->name == "fused_mlp3");
  CHECK(k->kind_name() == "fused_mlp");
  // Numbered as its parameters: x, w1, b1, w2, b2, w3, b3, then y.
  CHECK(k->inputs == std::vector<int>{0, 1, 2, 3, 4, 5, 6});
  CHECK(k->output == 7);
  CHECK(k->row_len == 256);
  CHECK(k->ops == std::vector<std::string>{"matmul", "bias", "relu", "matmul", "bias", "relu",
                                           "matmul", "bias"});
  const auto* f = k->as<codegen::FusedMlpSimt>();
  REQUIRE(f);
  // 4 warps of 4 columns a block: 16 blocks cover 256 columns; 8 rows a tile.
  CHECK(f->cluster == 16);
  CHECK(f->rows_per_tile == 8);
  CHECK(f->threads == 128);
  CHECK(f->k == 256);
  CHECK(f->macs_per_row == 3 * 256 * 256);
  CHECK(k->macs_per_row() == 3 * 256 * 256);
  CHECK(has(k->source, "__cluster_dims__(16, 1, 1) __launch_bounds__(128) fused_mlp3("));
  CHECK(has(k->source, "const float* __restrict__ in6,  // b3 [256]"));
  CHECK(has(k->source, "//   h1 = relu(x . W1^T + b1)   [M, 256]"));
  CHECK(has(k->source, "//   y = h2 . W3^T + b3   [M, 256]"));
  // Shared memory: two activation buffers of 8 rows of 256 + 4 floats, and each layer's slice:
  // 16 rows of its weight and 16 biases.
  CHECK(f->smem_bytes == 4 * (2 * 8 * 260 + 3 * (16 * 256 + 16)));
  // Every layer's slice is in flight before the first layer is computed; each layer waits for
  // its own copies alone.
  const size_t copies3 =
      k->source.find("mlpc_load_slice<256, 256>(w3, b3, in5, in6, col0, lane);");
  const size_t tile1 =
      k->source.find("mlpc_warp_tile<256>(act0, w1, lane) + b1[lane % kColsPerWarp]");
  const size_t tile2 = k->source.find("mlpc_warp_tile<256>(act1, w2, lane)");
  const size_t tile3 = k->source.find("mlpc_warp_tile<256>(act0, w3, lane)");
  REQUIRE(copies3 != std::string::npos);
  REQUIRE(tile3 != std::string::npos);
  CHECK(copies3 < tile1);
  CHECK(k->source.rfind("mlpc_cp_async_wait<2>();", tile1) > copies3);
  CHECK(k->source.rfind("mlpc_cp_async_wait<1>();", tile2) > tile1);
  CHECK(k->source.rfind("mlpc_cp_async_wait<0>();", tile3) > tile2);
  // Layer 1's output goes to every block's second buffer, then the cluster barrier.
  CHECK(has(k->source, "mlpc_store_to_cluster(act1 + row * kStride + col, v);\n"
                       "    mlpc_cluster_arrive();\n"
                       "    mlpc_cluster_wait();"));

  // 64 rows: 8 tiles of 8, a cluster of 16 each; ragged rows round up; no rows: one cluster.
  CHECK(codegen::launch_dims(*f, *k, 64 * 256).grid == 128);
  CHECK(codegen::launch_dims(*f, *k, 64 * 256).block == 128);
  CHECK(codegen::launch_dims(*f, *k, 1 * 256).grid == 16);
  CHECK(codegen::launch_dims(*f, *k, 127 * 256).grid == 16 * 16);
  CHECK(codegen::launch_dims(*f, *k, 1000 * 256).grid == 125 * 16);
  CHECK(codegen::launch_dims(*f, *k, 0).grid == 16);
}

TEST_CASE("fused MLP simt kernel: cluster size and idle warps follow the widths", "[fused_mlp]") {
  // The widest layer sets the cluster: 64 columns are 4 blocks of 16.
  auto k = codegen::generate_fused_mlp_simt_kernel(
      mlp_spec(64, {{64, false, ir::Op::Silu}, {64, false, {}}}, true), "k");
  REQUIRE(k);
  CHECK(k->as<codegen::FusedMlpSimt>()->cluster == 4);
  CHECK(k->inputs == std::vector<int>{0, 1, 2});
  CHECK(k->ops == std::vector<std::string>{"matmul", "silu", "matmul", "residual"});
  CHECK(has(k->source, "mlpc_silu("));
  CHECK(has(k->source, "+ res;"));
  // 96 columns need 6 blocks: a cluster of 8, the last two idle in that layer; the 16-wide
  // layer runs on one warp's columns in each of the first 4 blocks.
  k = codegen::generate_fused_mlp_simt_kernel(
      mlp_spec(16, {{96, true, ir::Op::GeluTanh}, {16, true, {}}}), "k");
  REQUIRE(k);
  CHECK(k->as<codegen::FusedMlpSimt>()->cluster == 8);
  CHECK(has(k->source, "const float v = col0 < 96 ?"));
  CHECK(has(k->source, "if (col0 < kOut) {"));
  // One layer: no cluster barrier, no shared-memory exchange.
  k = codegen::generate_fused_mlp_simt_kernel(mlp_spec(32, {{32, false, {}}}), "k");
  REQUIRE(k);
  CHECK(k->as<codegen::FusedMlpSimt>()->cluster == 2);
  CHECK_FALSE(has(k->source, "mlpc_cluster"));
  CHECK(k->macs_per_row() == 32 * 32);
  // Other tiles: 16 rows of 2 columns a warp, or 8 warps a block (a portable cluster of 8).
  k = codegen::generate_fused_mlp_simt_kernel(testing::mlp3_small_spec(), "k",
                                              {.rows_per_tile = 16, .warps = 8});
  REQUIRE(k);
  CHECK(k->as<codegen::FusedMlpSimt>()->cluster == 16);
  CHECK(k->as<codegen::FusedMlpSimt>()->threads == 256);
  k = codegen::generate_fused_mlp_simt_kernel(testing::mlp3_small_spec(), "k", {.warps = 8});
  REQUIRE(k);
  CHECK(k->as<codegen::FusedMlpSimt>()->cluster == 8);
}

TEST_CASE("fused MLP simt kernel: what it refuses, and why", "[fused_mlp]") {
  const codegen::FusedMlpSpec ok = testing::mlp3_small_spec();
  CHECK(refusal(ok, "sm_80") == "sm_80 has no thread-block clusters (sm_90 on)");
  CHECK(codegen::fused_mlp_simt_fits(ok, "sm_90a"));
  CHECK(codegen::fused_mlp_simt_fits(ok, "sm_100"));
  codegen::FusedMlpSpec f16 = ok;
  f16.dtype = ir::DType::F16;
  CHECK(refusal(f16) == "f16 is not f32: this kernel computes in IEEE fp32 on the CUDA cores");
  CHECK(refusal(mlp_spec(256, {})) == "no layers");
  // 16 blocks of 16 columns cover 256; 8 warps a block cover 512.
  CHECK(refusal(mlp_spec(64, {{512, true, {}}})) ==
        "width 512 needs more than 16 blocks of 16 columns in a cluster");
  CHECK(codegen::fused_mlp_simt_fits(mlp_spec(64, {{512, true, {}}}), "sm_90", nullptr,
                                     {.warps = 8}));
  CHECK(codegen::fused_mlp_simt_fits(mlp_spec(1024, {{256, true, {}}}), "sm_90"));
  // Every layer's weight slice stays in shared memory: 13 layers of 256 fit, 14 do not.
  CHECK(codegen::fused_mlp_simt_fits(
      mlp_spec(256, std::vector<FusedMlpLayer>(13, {256, true, ir::Op::Relu})), "sm_90"));
  CHECK(refusal(mlp_spec(256, std::vector<FusedMlpLayer>(14, {256, true, ir::Op::Relu}))) ==
        "its weight slices and activations need 246912 bytes of shared memory a block, more "
        "than 232448");
  CHECK(refusal(mlp_spec(64, {{18, true, {}}})) ==
        "width 18 is not a positive multiple of 4 (rows are read as float4)");
  CHECK(refusal(mlp_spec(64, {{64, true, ir::Op::Exp}})) ==
        "layer 1's exp is not a GEMM activation");
  CHECK(refusal(mlp_spec(64, {{32, true, {}}}, true)) ==
        "a residual needs y as wide as x (32 vs 64)");
  CHECK(refusal(mlp_spec(16, std::vector<FusedMlpLayer>(17, {16, true, ir::Op::Relu}))) ==
        "17 layers, more than 16: each is unrolled into the kernel");
  CHECK(codegen::fused_mlp_simt_fits(
      mlp_spec(16, std::vector<FusedMlpLayer>(16, {16, true, ir::Op::Relu})), "sm_90"));
  // 2 warps of 4 columns a block: 16 blocks cover 128 columns, not 256.
  CHECK(refusal(ok, "sm_90", {.warps = 2}) ==
        "width 256 needs more than 16 blocks of 8 columns in a cluster");
  CHECK(refusal(ok, "sm_90", {.rows_per_tile = 32}) ==
        "no such configuration: 32 rows a tile, 4 warps a block");
}

TEST_CASE("fused MLP simt kernel: reports count every layer's multiply-adds", "[fused_mlp]") {
  const codegen::FusedMlpSpec spec =
      mlp_spec(64, {{256, true, ir::Op::Relu}, {128, true, ir::Op::Relu}, {32, false, {}}});
  codegen::Plan plan =
      testing::fused_mlp_plan(spec, *codegen::generate_fused_mlp_simt_kernel(spec, "mlp_k"));
  const std::vector<StepFacts> facts = plan_facts(plan, 10);
  REQUIRE(facts.size() == 1);
  CHECK(facts[0].kind == "fused_mlp");
  CHECK(facts[0].flops == 2.0 * 10 * (256 * 64 + 128 * 256 + 32 * 128));
  CHECK(facts[0].nodes == std::vector<std::string>{"y"});
}

TEST_CASE("fused MLP simt kernels build with NVRTC for sm_90", "[fused_mlp][nvrtc]") {
  std::vector<codegen::KernelStep> kernels;
  for (const codegen::FusedMlpSpec& spec : testing::varied_specs()) {
    auto k = codegen::generate_fused_mlp_simt_kernel(spec, "fused_mlp_nvrtc");
    REQUIRE(k);
    kernels.push_back(*k);
  }
  // The other tiles and block sizes: 2 warps of 4 columns cover 128 in a cluster of 16.
  for (const auto& [spec, config] :
       {std::pair{testing::mlp3_small_spec(), codegen::FusedMlpSimtConfig{4, 4}},
        std::pair{testing::mlp3_small_spec(), codegen::FusedMlpSimtConfig{16, 8}},
        std::pair{testing::mlp3_small_spec(), codegen::FusedMlpSimtConfig{8, 8}},
        std::pair{mlp_spec(64, {{128, true, ir::Op::Silu}, {64, false, {}}}, true),
                  codegen::FusedMlpSimtConfig{8, 2}}}) {
    auto k = codegen::generate_fused_mlp_simt_kernel(spec, "fused_mlp_nvrtc", config);
    REQUIRE(k);
    kernels.push_back(*k);
  }
  for (const codegen::KernelStep& k : kernels) {
    INFO(k.source);
    const std::vector<char> cubin = runtime::compile_to_cubin(k.source, k.name, "sm_90");
    CHECK(std::string(cubin.data(), 4) == "\x7f" "ELF");
  }
}
