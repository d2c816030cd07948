// The fused MLP on the tensor cores (codegen/fused_mlp_mma_kernel.h), CPU side: its shape, launch
// grid and FLOPs, what it refuses and why, and NVRTC builds of every variant (sm_90 and sm_80).
// Numbers against the fp64 reference: tests/gpu/test_gpu_fused_mlp.cpp.
#include <catch2/catch.hpp>

#include "codegen/fused_mlp_mma_kernel.h"
#include "dump/report.h"
#include "fused_mlp_test_util.h"
#include "runtime/jit/nvrtc_compiler.h"

using namespace mlpc;
using testing::mlp_spec;

namespace {

bool has(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

std::string why_not(const codegen::FusedMlpSpec& s) {
  std::string why;
  CHECK_FALSE(codegen::fused_mlp_mma_fits(s, &why));
  CHECK_FALSE(codegen::generate_fused_mlp_mma_kernel(s, "k"));
  return why;
}

bool is_cubin(const std::vector<char>& c) {
  return c.size() > 4 && std::string(c.data(), 4) == "\x7f" "ELF";
}

}  // namespace

TEST_CASE("fused MLP mma kernel: shape, launch, FLOPs and ops", "[fused_mlp]") {
  // The 6-layer width-64 MLP: 64 -> 5 x 64 (relu) -> 16.
  const codegen::FusedMlpSpec s =
      mlp_spec(ir::DType::F16, 64, {64, 64, 64, 64, 64, 16}, ir::Op::Relu);
  std::string why;
  REQUIRE(codegen::fused_mlp_mma_fits(s, &why));
  const codegen::FusedMlpMmaShape shape = codegen::fused_mlp_mma_shape(s);
  CHECK(shape.r == 2);  // 128 / 64: two m16 tiles a warp
  CHECK(shape.warps == 8);
  // Five 64 x (64 + 8) weights and one 16 x 72, 2 bytes each; no biases.
  CHECK(shape.smem_bytes == (5 * 64 * 72 + 16 * 72) * 2);

  auto k = codegen::generate_fused_mlp_mma_kernel(s, "mlp6");
  REQUIRE(k);
  CHECK(k->name == "mlp6");
  CHECK(k->row_len == 16);
  CHECK(k->kind_name() == "fused_mlp");
  CHECK(k->gemm_products() == 0);
  CHECK_FALSE(k->arch_specific());
  const auto* f = k->as<codegen::FusedMlpMma>();
  REQUIRE(f);
  CHECK(f->tile_rows == 32);
  CHECK(f->threads == 256);
  CHECK(f->smem_bytes == shape.smem_bytes);
  CHECK(k->smem_bytes() == shape.smem_bytes);
  CHECK(f->macs_per_row == 5 * 64 * 64 + 16 * 64);
  CHECK(k->macs_per_row() == f->macs_per_row);
  CHECK(k->ops == std::vector<std::string>{"matmul", "relu", "matmul", "relu", "matmul", "relu",
                                           "matmul", "relu", "matmul", "relu", "matmul"});
  CHECK(has(k->source, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"));
  CHECK(has(k->source, "ldmatrix.sync.aligned.m8n8.x4.shared.b16"));
  CHECK(has(k->source, "cvt.rn.relu.f16x2.f32"));  // a hidden ReLU and its rounding: one cvt
  CHECK(has(k->source, "__launch_bounds__(256, 1)"));
  // Launch: 2^18 rows are 8192 warp tiles of 32 rows: full blocks of 8 warps, one per SM.
  CHECK(codegen::launch_dims(*f, *k, (int64_t{1} << 18) * 16).grid == 132);
  CHECK(codegen::launch_dims(*f, *k, (int64_t{1} << 18) * 16).block == 256);
  // Few rows spread over SMs: 1000 rows are 32 tiles, a warp each; one row is one warp.
  CHECK(codegen::launch_dims(*f, *k, 1000 * 16).grid == 32);
  CHECK(codegen::launch_dims(*f, *k, 1000 * 16).block == 32);
  CHECK(codegen::launch_dims(*f, *k, 16).grid == 1);
  CHECK(codegen::launch_dims(*f, *k, 16).block == 32);
  // 300 SM-rounds' worth: 2 warps a block.
  CHECK(codegen::launch_dims(*f, *k, 264LL * 32 * 16).block == 64);
  CHECK(codegen::launch_dims(*f, *k, 264LL * 32 * 16).grid == 132);

  // Reports count 2 FLOPs per multiply-add of every layer: 2 * rows * sum n_i * n_{i-1}.
  const codegen::Plan plan = testing::fused_mlp_plan(s, *k);
  CHECK_FALSE(codegen::layout_error(plan));
  const StepFacts facts = step_facts(plan, plan.steps[0], int64_t{1} << 18);
  CHECK(facts.kind == "fused_mlp");
  CHECK(facts.flops == Approx(2.0 * (1 << 18) * (5 * 64 * 64 + 16 * 64)));
  CHECK(facts.bytes == (int64_t{1} << 18) * (64 + 16) * 2 + (5 * 64 * 64 + 16 * 64) * 2);

  // Widths set R: 32 wide takes four m16 tiles a warp, 128 wide one; the graph of the spec parses.
  CHECK(codegen::fused_mlp_mma_shape(mlp_spec(ir::DType::BF16, 32, {32, 32, 8})).r == 4);
  CHECK(codegen::fused_mlp_mma_shape(mlp_spec(ir::DType::BF16, 64, {128, 128, 16})).r == 1);
  CHECK(testing::mlp_graph(s).outputs().size() == 1);
}

TEST_CASE("fused MLP mma kernel: epilogues, odd output widths and the x tail", "[fused_mlp]") {
  // A bias and GELU (tanh) on every hidden layer: accumulators start at the bias (fp32 in shared
  // memory) and the activation is codegen's own helper.
  auto gelu = codegen::generate_fused_mlp_mma_kernel(
      mlp_spec(ir::DType::BF16, 64, {64, 64, 16}, ir::Op::GeluTanh, /*bias=*/true), "gelu");
  REQUIRE(gelu);
  CHECK(gelu->ops == std::vector<std::string>{"matmul", "bias", "gelu_tanh", "matmul", "bias",
                                              "gelu_tanh", "matmul", "bias"});
  CHECK(has(gelu->source, "mlpc_gelu_tanh_fast(v)"));
  CHECK(has(gelu->source, "__expf(fminf(-2.0f * inner, 80.0f))"));  // x * sigmoid(2u), not tanhf
  CHECK_FALSE(has(gelu->source, "tanhf"));
  CHECK(has(gelu->source, "mlpc_stage_bias<64, 64>(in2"));
  CHECK(has(gelu->source, "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"));
  CHECK(gelu->as<codegen::FusedMlpMma>()->smem_bytes == (2 * 64 * 72 + 16 * 72) * 2 + (64 + 64 + 16) * 4);
  // A residual adds x to y in fp32 before the one rounding.
  auto res = codegen::generate_fused_mlp_mma_kernel(
      mlp_spec(ir::DType::F16, 64, {128, 64}, ir::Op::Silu, true, /*residual=*/true), "res");
  REQUIRE(res);
  CHECK(res->ops.back() == "residual");
  CHECK(has(res->source, "v0 += x2.x, v1 += x2.y;"));
  // An odd output width stores element by element; the last layer's rows are padded to 8.
  auto odd = codegen::generate_fused_mlp_mma_kernel(mlp_spec(ir::DType::F16, 48, {32, 3}), "odd");
  REQUIRE(odd);
  CHECK(has(odd->source, "if (col + 1 < kOut) mlpc_from_float(v1"));
  CHECK(has(odd->source, "mlpc_stage<3, 8, 32, 40>(in2"));
  // in_width 48: one 32-wide chunk of x and a 16-wide tail.
  CHECK(has(odd->source, "uint2 xt[kR][2];"));
  CHECK(has(odd->source, "mlpc_stage_first<32, 32, 48, 56>(in1"));
}

TEST_CASE("fused MLP mma kernel: what it refuses, and why", "[fused_mlp]") {
  using ir::DType;
  CHECK(has(why_not(mlp_spec(DType::F32, 64, {64, 16})), "f16 or bf16, not f32"));
  CHECK(has(why_not(mlp_spec(DType::F16, 64, {})), "at least one layer"));
  CHECK(has(why_not(mlp_spec(DType::F16, 40, {64, 16})), "in_width 40 is not a positive multiple of 16"));
  CHECK(has(why_not(mlp_spec(DType::F16, 64, {40, 16})), "hidden layer 1's width 40 is not a multiple of 16"));
  CHECK(has(why_not(mlp_spec(DType::F16, 64, {64, 256, 16})), "width 256 exceeds 128"));
  CHECK(has(why_not(mlp_spec(DType::F16, 256, {64, 16})), "width 256 exceeds 128"));
  CHECK(has(why_not(mlp_spec(DType::F16, 64, {64, 16}, ir::Op::Relu, false, true)),
            "a residual needs the output width (16) to equal in_width (64)"));
  CHECK(has(why_not(mlp_spec(DType::BF16, 64, {64, 16}, ir::Op::Exp)),
            "layer 1's activation exp is not one a GEMM epilogue applies"));
  // Nine 128 x 128 layers: 9 * 128 * 136 * 2 bytes, past a block's shared memory.
  const std::string smem =
      why_not(mlp_spec(DType::F16, 128, {128, 128, 128, 128, 128, 128, 128, 128, 128}));
  CHECK(has(smem, "the weights and biases take 313344 bytes of shared memory"));
  CHECK(has(smem, "over a block's 232448 (227 KiB)"));
  // The output width may be anything; only hidden widths feed an MMA's K.
  CHECK(codegen::fused_mlp_mma_fits(mlp_spec(DType::F16, 16, {16, 1})));
  CHECK(codegen::fused_mlp_mma_fits(mlp_spec(DType::F16, 64, {7})));
}

TEST_CASE("fused MLP mma kernels build with NVRTC: f16 and bf16, widths 32 to 128, 1 to 8 "
          "layers, every epilogue",
          "[fused_mlp][nvrtc]") {
  int built = 0;
  auto build = [&](const codegen::FusedMlpSpec& s, const char* arch) {
    std::string why;
    INFO(testing::mlp_text(s));
    if (!codegen::fused_mlp_mma_fits(s, &why)) {
      // Only the widest MLPs run out of shared memory here.
      CHECK(has(why, "shared memory"));
      return;
    }
    auto k = codegen::generate_fused_mlp_mma_kernel(s, "fused_mlp");
    REQUIRE(k);
    INFO(k->source);
    CHECK(is_cubin(runtime::compile_to_cubin(k->source, k->name, arch)));
    ++built;
  };
  const int64_t ins[] = {32, 48, 64};
  const int64_t outs[] = {1, 3, 8, 16};
  for (ir::DType dt : {ir::DType::F16, ir::DType::BF16})
    for (int64_t width : {32, 64, 128})
      for (int layers = 2; layers <= 8; ++layers) {
        // in_width and the output width vary with the layer count, so each appears in every
        // dtype and width.
        std::vector<int64_t> widths(static_cast<size_t>(layers - 1), width);
        widths.push_back(outs[layers % 4]);
        build(mlp_spec(dt, ins[layers % 3], widths, ir::Op::Relu), "sm_90");
      }
  CHECK(built >= 40);
  for (ir::DType dt : {ir::DType::F16, ir::DType::BF16}) {
    // One layer, the x tail (in_width 16), a bias and GELU (tanh) everywhere, a residual.
    build(mlp_spec(dt, 16, {16}), "sm_90");
    build(mlp_spec(dt, 64, {64, 64, 16}, ir::Op::GeluTanh, true, false, ir::Op::GeluTanh), "sm_90");
    build(mlp_spec(dt, 64, {32, 64}, ir::Op::Relu, true, /*residual=*/true), "sm_90");
    // sm_80 has every instruction too (mma.sync, ldmatrix, cvt with relu).
    build(mlp_spec(dt, 64, {64, 64, 64, 64, 64, 16}), "sm_80");
    build(mlp_spec(dt, 48, {128, 128, 3}, ir::Op::Silu, true), "sm_80");
  }
}

TEST_CASE("alike hidden layers run as one loop: runs, their bounds, the source", "[fused_mlp]") {
  using Runs = std::vector<std::pair<size_t, size_t>>;
  // tcnn_w64: layer 1 reads x, layers 2-5 alike, layer 6 stores y.
  CHECK(codegen::fused_mlp_layer_loops(mlp_spec(ir::DType::F16, 64, {64, 64, 64, 64, 64, 16})) ==
        Runs{{1, 4}});
  // in 32, hidden 64: layer 1 widens, 2-4 alike.
  CHECK(codegen::fused_mlp_layer_loops(mlp_spec(ir::DType::F16, 32, {64, 64, 64, 64, 16})) ==
        Runs{{1, 3}});
  // One hidden layer between the first and the last: nothing to loop.
  CHECK(codegen::fused_mlp_layer_loops(mlp_spec(ir::DType::F16, 64, {64, 64, 16})).empty());
  // A layer unlike its neighbours splits the run: different bias, activation or width.
  codegen::FusedMlpSpec s = mlp_spec(ir::DType::BF16, 64, {64, 64, 64, 64, 64, 64, 16});
  s.layers[3].bias = true;
  CHECK(codegen::fused_mlp_layer_loops(s) == Runs{{1, 2}, {4, 5}});
  s.layers[3].bias = false;
  s.layers[2].act = ir::Op::GeluTanh;
  CHECK(codegen::fused_mlp_layer_loops(s) == Runs{{3, 5}});
  CHECK(codegen::fused_mlp_layer_loops(mlp_spec(ir::DType::F16, 64, {64, 128, 128, 64, 16})) ==
        Runs{});

  // Where they pay: width 128's 592 MMAs a warp tile unrolled, or GELU over every accumulator;
  // width 64 with ReLU (336 MMAs) stays unrolled, a few percent faster.
  CHECK_FALSE(codegen::fused_mlp_loops_pay(mlp_spec(ir::DType::F16, 64, {64, 64, 64, 64, 64, 16})));
  CHECK(codegen::fused_mlp_loops_pay(mlp_spec(ir::DType::F16, 64, {128, 128, 128, 128, 128, 16})));
  CHECK(codegen::fused_mlp_loops_pay(
      mlp_spec(ir::DType::F16, 64, {64, 64, 64, 64, 16}, ir::Op::GeluTanh, /*bias=*/true)));
  CHECK_FALSE(codegen::fused_mlp_loops_pay(mlp_spec(ir::DType::F16, 64, {128, 128, 16})));

  // The source: one loop body over the weights 64 x 72 x 2 bytes apart (and biases 256 apart),
  // its output named as the run's last; unrolled, a block per layer.
  const codegen::FusedMlpSpec gelu =
      mlp_spec(ir::DType::F16, 64, {64, 64, 64, 64, 16}, ir::Op::GeluTanh, /*bias=*/true);
  auto looped = codegen::generate_fused_mlp_mma_kernel(gelu, "looped");
  REQUIRE(looped);
  INFO(looped->source);
  CHECK(has(looped->source, "// Layers 2 to 4: [64] -> [64], bias, gelu_tanh, 3 alike, one loop."));
  CHECK(has(looped->source, "for (int l = 0; l < 3; ++l) {"));
  CHECK(has(looped->source, "mlpc_layer<kR, 64, 8, 72>(c, a1, w2 + l * 9216);"));
  CHECK(has(looped->source, "l * 256)"));
  CHECK(has(looped->source, "unsigned (&a4)[kR][4][4] = a1;"));
  CHECK_FALSE(has(looped->source, "const unsigned w3 ="));
  CHECK(is_cubin(runtime::compile_to_cubin(looped->source, looped->name, "sm_90")));
  codegen::FusedMlpMmaShape shape = codegen::fused_mlp_mma_shape(gelu);
  shape.loop_alike_layers = false;
  auto unrolled = codegen::generate_fused_mlp_mma_kernel(gelu, "unrolled", shape);
  REQUIRE(unrolled);
  CHECK_FALSE(has(unrolled->source, "one loop"));
  CHECK(has(unrolled->source, "mlpc_layer<kR, 64, 8, 72>(c3, a2, w3);"));
  // Same kind, launch fields and ops either way: only the code NVRTC builds differs.
  CHECK(unrolled->ops == looped->ops);
  CHECK(unrolled->smem_bytes() == looped->smem_bytes());
}
