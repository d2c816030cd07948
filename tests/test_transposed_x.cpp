// GEMMs reading x stored transposed (codegen/transposed_x_plan.h, `--transposed-x`): which plans
// take the rewrite and what they look like (the kernel computing x stores it as [k, rows], the
// GEMM reads it so), what is left alone, the decision rule, and NVRTC builds of the
// transposed-store kernels. The numbers are checked on the GPU by
// tests/gpu/test_gpu_transposed_x.cpp.
#include <catch2/catch.hpp>

#include "passes/kernel_rules.h"

#include "codegen/pointwise_kernel.h"
#include "compiler/compile.h"
#include "dump/report.h"
#include "compiler/samples.h"
#include "ir/parser.h"
#include "runtime/device/device.h"
#include "runtime/jit/kernel_builds.h"
#include "transposed_x_graphs.h"

using namespace mlpc;

namespace {

CompileOptions transposed_options(TransposedX mode, int opt = 2) {
  CompileOptions o{.fusion = true, .epilogues = opt >= 2, .arch = "sm_90", .build_kernels = false,
                   .measure_epilogues = false};
  o.transposed_x = mode;
  return o;
}

const codegen::Buffer& buffer(const codegen::Plan& p, int i) {
  return p.buffers[static_cast<size_t>(i)];
}

// The names of the GEMMs reading a transposed x, and of the kernels storing one, in plan order.
std::vector<std::string> transposed_steps(const codegen::Plan& p) {
  std::vector<std::string> out;
  for (const codegen::Step& s : p.steps) {
    if (auto* g = std::get_if<codegen::GemmStep>(&s); g && g->x_transposed) out.push_back(g->name);
    if (auto* k = std::get_if<codegen::KernelStep>(&s);
        k && k->store() == codegen::Store::Transposed)
      out.push_back(k->name);
  }
  return out;
}

}  // namespace

TEST_CASE("transposed x: mlp3's GELU kernels store h1 and h2 transposed for fc2 and fc3, which "
          "read their weights transposed too (golden)",
          "[transposed_x]") {
  const CompiledGraph c = compile(make_sample("mlp3"), transposed_options(TransposedX::On));
  // The same 5 launches and bytes as row-major: only how h1, h2 and two weights are stored
  // changes.
  CHECK(plan_text(c, 8192) ==
        "plan for @mlp3 at batch 8192: 5 launches\n"
        "   0. gemm      gemm_fc1                         matmul+bias                             184.57 MB  68.72 GFLOP\n"
        "   1. pointwise mlpc_gelu_0                      gelu+store_transposed                   268.44 MB\n"
        "   2. gemm      gemm_fc2                         matmul+bias+x_transposed+w_transposed    335.56 MB  274.88 GFLOP\n"
        "   3. pointwise mlpc_gelu_1                      gelu+store_transposed                   268.44 MB\n"
        "   4. gemm      gemm_fc3                         matmul+bias+x_transposed+w_transposed    184.55 MB  68.72 GFLOP\n");
  const codegen::Plan& p = c.plan;
  for (size_t i : {2, 4}) {
    const auto& gemm = std::get<codegen::GemmStep>(p.steps[i]);
    const auto& kernel = std::get<codegen::KernelStep>(p.steps[i - 1]);
    INFO(gemm.name);
    CHECK(gemm.x == kernel.output);
    CHECK(buffer(p, gemm.x).transposed);
    CHECK(buffer(p, gemm.x).name == (i == 2 ? "h1" : "h2"));
    CHECK(kernel.source.find("stored transposed, as [4096, rows]") != std::string::npos);
    // Tiles of 32 rows x 128 columns, read and written 4 elements (16 bytes) at a time.
    CHECK(kernel.source.find("constexpr int kVec = 4, kRows = 32, kCols = 32 * kVec;") !=
          std::string::npos);
    CHECK(kernel.source.find("mlpc_store<kVec>(out + c * rows + r, v);") != std::string::npos);
    CHECK(kernel.as<codegen::Elementwise>()->transpose_tile.vec == 4);
    // The weight, as [k, n]: a param derived from the one the caller sets.
    CHECK(gemm.w_transposed);
    const codegen::Buffer& w = buffer(p, gemm.w);
    REQUIRE(w.transpose_of >= 0);
    CHECK(w.name == buffer(p, w.transpose_of).name + ".T");
    CHECK(w.role == codegen::BufferRole::Param);
    CHECK_FALSE(w.uploaded());
    CHECK(buffer(p, w.transpose_of).uploaded());
    CHECK(w.type.shape.dims == std::vector<int64_t>{gemm.k, gemm.n});
  }
  // fc1 reads the graph's input, which the caller hands over row-major.
  CHECK_FALSE(std::get<codegen::GemmStep>(p.steps[0]).x_transposed);
  for (const codegen::Buffer& b : p.buffers)
    CHECK(b.transposed == (b.name == "h1" || b.name == "h2"));
  // fc2 and fc3, the GEMMs whose x a kernel writes: x, then w.
  REQUIRE(p.choices.size() == 4);
  CHECK(p.choices[0].step == "gemm_fc2");
  CHECK(p.choices[0].taken);
  CHECK(p.choices[0].why == "x transposed (--transposed-x on)");
  CHECK(p.choices[1].step == "gemm_fc2");
  CHECK(p.choices[1].why == "w transposed (--transposed-x on)");
  CHECK(p.choices[2].step == "gemm_fc3");
  CHECK(p.choices[3].step == "gemm_fc3");
  // The layout is in the plan's JSON, buffer by buffer and step by step (beside the IR ops).
  const nlohmann::json j = plan_json(c, 8192);
  CHECK(j.at("kernels").at(1).at("ops") == nlohmann::json::array({"gelu"}));
  CHECK(j.at("kernels").at(1).at("layout") == nlohmann::json::array({"store_transposed"}));
  CHECK(j.at("kernels").at(2).at("ops") == nlohmann::json::array({"matmul", "bias"}));
  CHECK(j.at("kernels").at(2).at("layout") ==
        nlohmann::json::array({"x_transposed", "w_transposed"}));
  CHECK_FALSE(j.at("kernels").at(0).contains("layout"));
  for (const auto& b : j.at("buffers"))
    CHECK(b.at("layout") == (b.at("name") == "h1" || b.at("name") == "h2" ? "transposed"
                                                                          : "row-major"));
}

TEST_CASE("transposed x: only an x that one f32 GEMM alone reads, written by an elementwise "
          "kernel",
          "[transposed_x]") {
  const ir::Graph g = ir::parse(testing::kTransposedX, "tx.mlp");
  // -O1: h (bias + gelu) and g (bias + silu) are stored transposed; h2 is read by m4 and by
  // the residual add, so it stays row-major; x is the graph's input.
  const CompiledGraph o1 = compile(g, transposed_options(TransposedX::On, 1));
  CHECK(transposed_steps(o1.plan) ==
        std::vector<std::string>{"mlpc_fused_add_gelu_0", "gemm_m2", "mlpc_fused_add_silu_1",
                                   "gemm_m3"});
  CHECK(o1.plan.launches() == 8);
  // -O2: the biases ride the GEMMs' epilogues (a GEMM folded so takes its consumer's name:
  // gemm_a2) and the residual add folds into m4 (now gemm_y), which the rewrite leaves alone:
  // its x (h2) is still read twice (by it and as its residual).
  const CompiledGraph o2 = compile(g, transposed_options(TransposedX::On, 2));
  CHECK(transposed_steps(o2.plan) ==
        std::vector<std::string>{"mlpc_gelu_0", "gemm_a2", "mlpc_silu_1", "gemm_m3"});
  for (const codegen::Step& s : o2.plan.steps)
    if (auto* gm = std::get_if<codegen::GemmStep>(&s); gm && gm->residual >= 0)
      CHECK_FALSE(gm->x_transposed);

  // bf16 and f16 GEMMs run on tensor cores, where the layout measured no faster: never asked.
  for (const char* sample : {"geglu", "llama_geglu"}) {
    const CompiledGraph c = compile(make_sample(sample), transposed_options(TransposedX::On));
    CHECK(transposed_steps(c.plan).empty());
  }
  // 3xTF32 GEMMs read split buffers, not x: left alone.
  CompileOptions split = transposed_options(TransposedX::On);
  split.fp32_gemms = Fp32Gemms::Tf32x3;
  const CompiledGraph c = compile(make_sample("mlp3"), split);
  CHECK(transposed_steps(c.plan).empty());
}

TEST_CASE("transposed x: off below -O2, and -O2 keeps x row-major without a GPU to measure",
          "[transposed_x]") {
  const ir::Graph g = make_sample("mlp3");
  const CompiledGraph off = compile(g, transposed_options(TransposedX::Off));
  CHECK(transposed_steps(off.plan).empty());
  if (runtime::gpu_unavailable_reason()) {
    const CompiledGraph c = compile(g, transposed_options(TransposedX::Measure));
    CHECK(transposed_steps(c.plan).empty());
    REQUIRE_FALSE(c.plan.choices.empty());
    CHECK(c.plan.choices.back().step == "gemm_fc3");
    CHECK_FALSE(c.plan.choices.back().taken);
    CHECK(c.plan.choices.back().why == "x row-major: no GPU to measure on");
  }
}

TEST_CASE("transposed x decision rule: taken only when measurably faster", "[transposed_x]") {
  CHECK(passes::decide_transposed_x(5250.0, 5460.0, 8192).take);
  CHECK_FALSE(passes::decide_transposed_x(98.5, 100.0, 64).take);  // within noise: row-major
  CHECK_FALSE(passes::decide_transposed_x(120.0, 100.0, 64).take);
  CHECK_FALSE(passes::decide_transposed_x(0.0, 100.0, 64).take);
  CHECK(passes::decide_transposed_x(5250.0, 5460.0, 8192).why ==
        "x transposed: measured at M=8192 in a CUDA graph: 5250.0 us with x stored transposed vs "
        "5460.0 us row-major (x's kernel and the GEMM)");
  CHECK(passes::decide_transposed_x(5080.0, 5200.0, 8192, true).why ==
        "w transposed: measured at M=8192 in a CUDA graph: 5080.0 us with w stored transposed too "
        "vs 5200.0 us with x alone (x's kernel and the GEMM)");
  CHECK_FALSE(passes::decide_transposed_x(1330.0, 1310.0, 8192, true).take);
}

TEST_CASE("transposed-store kernels compile with NVRTC: row vectors, ragged tiles, 16-bit types",
          "[transposed_x][nvrtc]") {
  // The -O1 test graph (bias row vectors, rows of 40 and 24) and mlp3, built for real.
  for (const char* which : {"tx", "mlp3"}) {
    INFO(which);
    const ir::Graph g = std::string(which) == "tx" ? ir::parse(testing::kTransposedX, "tx.mlp")
                                                   : make_sample("mlp3");
    CompileOptions o = transposed_options(TransposedX::On, std::string(which) == "tx" ? 1 : 2);
    o.build_kernels = true;
    o.use_cache = false;
    const CompiledGraph c = compile(g, o);
    std::vector<int> vecs;
    for (const codegen::Step& s : c.plan.steps)
      if (auto* k = std::get_if<codegen::KernelStep>(&s);
          k && k->store() == codegen::Store::Transposed) {
        vecs.push_back(k->as<codegen::Elementwise>()->transpose_tile.vec);
        CHECK(c.cubins.count(k->name) == 1);
        CHECK_FALSE(c.cubins.at(k->name).empty());
      }
    // tx's g has rows of 30: element by element.
    CHECK(vecs == (std::string(which) == "tx" ? std::vector<int>{4, 1} : std::vector<int>{4, 4}));
  }
  // The generator itself takes any dtype (the plan asks only for f32): a bf16 region too.
  ir::Graph g = ir::parse(R"(func @b(%x: bf16[M, 72]) -> bf16[M, 72] {
  %b = param bf16[72]
  %a = add %x, %b : bf16[M, 72]
  %y = silu %a : bf16[M, 72]
  return %y
})", "b.mlp");
  const CompiledGraph c = compile(g, transposed_options(TransposedX::Off, 1));
  const auto region = std::find_if(c.pipeline.graph.nodes.begin(), c.pipeline.graph.nodes.end(),
                                   [](const ir::Node& n) { return n.op == ir::Op::FusedPointwise; });
  REQUIRE(region != c.pipeline.graph.nodes.end());
  const codegen::KernelStep k = codegen::generate_pointwise_kernel(
      c.pipeline.graph, *region, {.store = codegen::Store::Transposed});
  CHECK(k.source.find("% kRowLen") != std::string::npos);  // the bias, read by column
  const runtime::KernelBuilds built = runtime::build_kernels({k}, "sm_90", false);
  CHECK(built.cubins.count(k.name) == 1);
}
