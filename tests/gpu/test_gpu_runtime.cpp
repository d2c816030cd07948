// The runtime on a real GPU, with Plans built by hand: one cuBLASLt GEMM (y = x . w^T) and one
// hand-written kernel adding a row-vector bias; single GEMMs with cuBLASLt epilogues (bias,
// relu, gelu_tanh) and a residual; CUDA graphs and GEMM tuning. Checked against fp64.
#include <stdlib.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <set>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "../gemm_test_util.h"
#include "host/random_init.h"
#include "host/scoped_env.h"
#include "runtime/device/device.h"
#include "runtime/exec/device_random.h"
#include "runtime/exec/executor.h"
#include "runtime/gemm/gemm_tuner.h"
#include "runtime/jit/nvrtc_compiler.h"
#include "runtime/measure/replay_budget.h"
#include "runtime/measure/timing.h"

using namespace mlpc;
using namespace mlpc::runtime;
using Catch::Matchers::Contains;

namespace {

constexpr int64_t kN = 48, kK = 64;

std::string bias_kernel_source(ir::DType dt, const std::string& name) {
  const char* type = dt == ir::DType::F32 ? "float" : dt == ir::DType::F16 ? "__half" : "__nv_bfloat16";
  const char* load = dt == ir::DType::F32 ? "" : dt == ir::DType::F16 ? "__half2float" : "__bfloat162float";
  const char* store = dt == ir::DType::F32 ? "" : dt == ir::DType::F16 ? "__float2half_rn" : "__float2bfloat16_rn";
  return fmt::format(R"(#include <cuda_fp16.h>
#include <cuda_bf16.h>
// out = in0 + in1, in1 a row vector of {row}
extern "C" __global__ void {name}(const {T}* in0, const {T}* in1, {T}* out, long long n) {{
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {{
    float v = {load}(in0[i]) + {load}(in1[i % {row}]);
    out[i] = {store}(v);
  }}
}}
)",
                     fmt::arg("row", kN), fmt::arg("name", name), fmt::arg("T", type),
                     fmt::arg("load", load), fmt::arg("store", store));
}

codegen::Buffer make_buffer(std::string name, ir::DType dt, std::vector<int64_t> dims,
                            codegen::BufferRole role) {
  codegen::Buffer b;
  b.name = std::move(name);
  b.type = ir::TensorType{dt, ir::Shape{std::move(dims)}};
  b.role = role;
  return b;
}

// Buffers: 0 x[M, 64] input, 1 w[48, 64] param, 2 b[48] param, 3 t[M, 48], 4 y[M, 48] output.
codegen::Plan linear_plan(ir::DType dt) {
  using codegen::BufferRole;
  auto buf = [&](std::string name, std::vector<int64_t> dims, BufferRole role) {
    return make_buffer(std::move(name), dt, std::move(dims), role);
  };
  codegen::Plan plan;
  plan.graph_name = "linear_test";
  plan.buffers = {buf("x", {ir::kBatchDim, kK}, BufferRole::Input),
                  buf("w", {kN, kK}, BufferRole::Param), buf("b", {kN}, BufferRole::Param),
                  buf("t", {ir::kBatchDim, kN}, BufferRole::Intermediate),
                  buf("y", {ir::kBatchDim, kN}, BufferRole::Output)};
  codegen::GemmStep gemm;
  gemm.name = "gemm_t";
  gemm.x = 0, gemm.w = 1, gemm.y = 3;
  gemm.n = kN, gemm.k = kK;
  gemm.dtype = dt;
  gemm.ir_nodes = {"t"};
  codegen::KernelStep add;
  add.name = fmt::format("mlpc_test_bias_add_{}", ir::dtype_name(dt));
  add.source = bias_kernel_source(dt, add.name);
  add.inputs = {3, 2};
  add.output = 4;
  add.row_len = kN;
  add.ops = {"add"};
  add.ir_nodes = {"y"};
  plan.steps = {gemm, add};
  plan.inputs = {0};
  plan.outputs = {4};
  return plan;
}

std::map<std::string, std::vector<char>> compile_kernels(const codegen::Plan& plan) {
  std::map<std::string, std::vector<char>> cubins;
  for (const auto& step : plan.steps)
    if (const auto* k = std::get_if<codegen::KernelStep>(&step))
      cubins[k->name] = compile_to_cubin(k->source, k->name, device_arch());
  return cubins;
}

HostTensor make(ir::DType dt, std::vector<int64_t> dims, const std::function<double(int64_t)>& f) {
  HostTensor t{dt, std::move(dims), {}};
  t.data.resize(t.numel());
  for (int64_t i = 0; i < t.numel(); ++i) t.data[i] = round_to(dt, f(i));
  return t;
}

struct Inputs {
  HostTensor x, w, b;
};

// Values in {-1/2, 0, 1/2} x {-1/4, 0, 1/4}: every sum and bias add is exact in bf16 too, so the
// GPU must match the reference bit for bit; any layout mistake changes the values.
Inputs ternary(ir::DType dt, int64_t m) {
  return {make(dt, {m, kK}, [](int64_t i) { return 0.5 * ((i * 7 + i / kK) % 3 - 1); }),
          make(dt, {kN, kK}, [](int64_t i) { return 0.25 * ((i * 5 + i / 11) % 3 - 1); }),
          make(dt, {kN}, [](int64_t i) { return 0.125 * (i % 9 - 4); })};
}

// Smooth values like nn.Linear's: inputs O(1), weights O(1/sqrt(k)).
Inputs smooth(ir::DType dt, int64_t m) {
  return {make(dt, {m, kK}, [](int64_t i) { return std::sin(0.37 * i + 0.1); }),
          make(dt, {kN, kK}, [](int64_t i) { return 0.125 * std::cos(0.91 * i + 0.3); }),
          make(dt, {kN}, [](int64_t i) { return 0.5 * std::sin(1.7 * i); })};
}

// Unit roundoff of the storage dtype.
double unit_roundoff(ir::DType dt) {
  return dt == ir::DType::F32 ? std::ldexp(1.0, -24)
         : dt == ir::DType::F16 ? std::ldexp(1.0, -11)
                                : std::ldexp(1.0, -8);
}

struct Reference {
  std::vector<double> t, y, tol_t, tol_y;
};

// t = round(x . w^T), y = round(t + b) in fp64. The tolerance bounds the fp32 accumulation
// (2 k u32 sum |x w|, loose) plus a rounding of each stored value to the dtype.
Reference reference(const Inputs& in, int64_t m) {
  const ir::DType dt = in.x.dtype;
  const double u = unit_roundoff(dt), u32 = std::ldexp(1.0, -24);
  Reference r;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < kN; ++j) {
      double s = 0, abs_sum = 0;
      for (int64_t k = 0; k < kK; ++k) {
        double p = in.x.data[i * kK + k] * in.w.data[j * kK + k];
        s += p;
        abs_sum += std::abs(p);
      }
      double t = round_to(dt, s);
      double y = round_to(dt, t + in.b.data[j]);
      double acc = 2 * kK * u32 * abs_sum;
      double tol_t = acc + 3 * u * std::abs(t) + 1e-30;
      r.t.push_back(t);
      r.y.push_back(y);
      r.tol_t.push_back(tol_t);
      r.tol_y.push_back(tol_t + 3 * u * (std::abs(y) + std::abs(in.b.data[j])));
    }
  return r;
}

void check_close(const HostTensor& got, const std::vector<double>& ref,
                 const std::vector<double>& tol, bool exact, const char* what) {
  REQUIRE(got.data.size() == ref.size());
  int bad = 0;
  double worst = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    double err = std::abs(got.data[i] - ref[i]);
    worst = std::max(worst, err);
    if (exact ? err != 0 : !(err <= tol[i])) {
      if (bad++ < 5) UNSCOPED_INFO(what << "[" << i << "]: got " << got.data[i] << ", want " << ref[i]);
    }
  }
  INFO(what << ": " << bad << " of " << ref.size() << " values off; max abs err " << worst);
  CHECK(bad == 0);
}

void run_and_check(Executor& ex, const Inputs& in, int64_t m, bool exact) {
  ex.bind_batch(m);
  ex.set_tensor("x", in.x);
  ex.set_tensor("w", in.w);
  ex.set_tensor("b", in.b);
  ex.run();
  Reference r = reference(in, m);
  check_close(ex.download(3), r.t, r.tol_t, exact, "t = x.w^T");
  std::vector<HostTensor> out = ex.outputs();
  REQUIRE(out.size() == 1);
  CHECK(out[0].dims == std::vector<int64_t>{m, kN});
  CHECK(out[0].dtype == in.x.dtype);
  check_close(out[0], r.y, r.tol_y, exact, "y = t + b");
}

}  // namespace

TEST_CASE("executor runs a cuBLASLt GEMM and an NVRTC kernel", "[gpu]") {
  auto dt = GENERATE(ir::DType::BF16, ir::DType::F16, ir::DType::F32);
  INFO("dtype " << ir::dtype_name(dt) << " on " << device_info().name << " (" << device_arch() << ")");
  codegen::Plan plan = linear_plan(dt);
  Executor ex(plan, compile_kernels(plan));

  SECTION("exact values, batch 37") { run_and_check(ex, ternary(dt, 37), 37, true); }
  SECTION("smooth values, batch 37") { run_and_check(ex, smooth(dt, 37), 37, false); }
  SECTION("rebinding the batch keeps the params") {
    run_and_check(ex, smooth(dt, 37), 37, false);
    size_t bytes_37 = ex.arena_bytes();
    Inputs in = smooth(dt, 5);
    ex.bind_batch(5);
    CHECK(ex.arena_bytes() < bytes_37);
    CHECK(ex.arena_bytes() % 256 == 0);
    CHECK_THROWS_WITH(ex.run(), Contains("input x was not set"));
    ex.set_tensor("x", in.x);  // w and b stay from batch 37
    ex.run();
    Reference r = reference(in, 5);
    check_close(ex.outputs().at(0), r.y, r.tol_y, false, "y at batch 5");
  }
  SECTION("batch 0 runs nothing") {
    ex.bind_batch(0);
    ex.set_tensor("x", HostTensor{dt, {0, kK}, {}});
    ex.set_tensor("w", smooth(dt, 1).w);
    ex.set_tensor("b", smooth(dt, 1).b);
    ex.run();
    CHECK(ex.outputs().at(0).data.empty());
  }
}

TEST_CASE("executor reports misuse clearly", "[gpu]") {
  codegen::Plan plan = linear_plan(ir::DType::BF16);
  Executor ex(plan, compile_kernels(plan));
  CHECK_THROWS_WITH(ex.run(), Contains("bind_batch"));
  ex.bind_batch(8);
  Inputs in = smooth(ir::DType::BF16, 8);
  ex.set_tensor("x", in.x);
  CHECK_THROWS_WITH(ex.run(), Contains("param w was not set"));
  CHECK_THROWS_WITH(ex.set_tensor("x", smooth(ir::DType::BF16, 9).x), Contains("expected bf16[8, 64]"));
  CHECK_THROWS_WITH(ex.set_tensor("nope", in.x), Contains("no buffer named 'nope'"));
  CHECK_THROWS_WITH(Executor(plan, {}), Contains("no CUBIN for kernel mlpc_test_bias_add_bf16"));
}

TEST_CASE("set_bytes uploads random_bytes: unique values within the scale", "[gpu]") {
  auto dt = GENERATE(ir::DType::BF16, ir::DType::F32);
  codegen::Plan plan = linear_plan(dt);
  Executor ex(plan, compile_kernels(plan));
  const int64_t m = 37;
  ex.bind_batch(m);
  for (int buffer : {0, 1, 2}) {
    const codegen::Buffer& b = plan.buffers[static_cast<size_t>(buffer)];
    ex.set_bytes(b.name, random_bytes(dt, b.numel(m), 0.5, 7 + buffer));
  }
  ex.run();  // every input and param counts as set
  const HostTensor x = ex.download(0);
  REQUIRE(x.numel() == m * kK);
  std::set<double> distinct(x.data.begin(), x.data.end());
  double lo = 0, hi = 0;
  for (double v : x.data) lo = std::min(lo, v), hi = std::max(hi, v);
  INFO(distinct.size() << " distinct of " << x.numel() << ", in [" << lo << ", " << hi << "]");
  CHECK(lo >= -0.5);
  CHECK(hi <= 0.5);
  CHECK(lo < -0.4);
  CHECK(hi > 0.4);
  // bf16 has 2^8 values per octave: most of 2368 draws repeat one; f32 hardly any.
  CHECK(distinct.size() > (dt == ir::DType::F32 ? size_t{2300} : size_t{400}));
  CHECK(ex.download(1).data == decode(dt, random_bytes(dt, kN * kK, 0.5, 8).data(), kN * kK));
  CHECK_THROWS_WITH(ex.set_bytes("x", random_bytes(dt, m * kK - 1, 0.5, 1)),
                    Contains("bytes for x: expected"));
}

TEST_CASE("fill_random draws a block on the host and repeats it on the device", "[gpu]") {
  auto dt = GENERATE(ir::DType::BF16, ir::DType::F32);
  codegen::Plan plan = linear_plan(dt);
  Executor ex(plan, compile_kernels(plan));
  const int64_t m = kRandomBlock / kK + 300;  // x holds a block and part of another
  ex.bind_batch(m);
  ex.fill_random("x", 0.5, 9);
  ex.fill_random("w", 0.25, 8);
  ex.fill_random("b", 0.1, 3);
  ex.run();  // every input and param counts as set
  const HostTensor x = ex.download(0);
  REQUIRE(x.numel() == m * kK);
  const std::vector<double> block = decode(dt, random_bytes(dt, kRandomBlock, 0.5, 9).data(), kRandomBlock);
  CHECK(std::equal(block.begin(), block.end(), x.data.begin()));
  CHECK(std::equal(x.data.begin() + kRandomBlock, x.data.end(), block.begin()));
  // Smaller than a block: exactly random_bytes's values, as set_bytes would upload them.
  CHECK(ex.download(1).data == decode(dt, random_bytes(dt, kN * kK, 0.25, 8).data(), kN * kK));
}

TEST_CASE("time_forward reports a per-forward time", "[gpu]") {
  codegen::Plan plan = linear_plan(ir::DType::BF16);
  Executor ex(plan, compile_kernels(plan));
  Inputs in = smooth(ir::DType::BF16, 256);
  ex.bind_batch(256);
  ex.set_tensor("x", in.x);
  ex.set_tensor("w", in.w);
  ex.set_tensor("b", in.b);
  TimingOptions opts;
  opts.reps = 5;
  opts.min_rep_ms = 5;
  Timing t = time_forward(ex, nullptr, opts);
  INFO("median " << t.median_us << " us, min " << t.min_us << " us, " << t.iters << " iters");
  CHECK(t.reps == 5);
  CHECK(t.iters >= 1);
  CHECK(t.min_us > 0);
  CHECK(t.min_us <= t.median_us);
  CHECK(t.median_us < 1000);  // two tiny launches
  CHECK(t.median_us * t.iters >= 0.5 * opts.min_rep_ms * 1e3);

  // Within a budget: the whole schedule when it fits, else kMinReplays single forwards.
  Timing full = time_forward_within(ex, nullptr, kReplayBudgetUs, opts);
  CHECK(full.reps == 5);
  CHECK(full.median_us < 1000);
  Timing few = time_forward_within(ex, nullptr, /*budget_us=*/1, opts);
  CHECK(few.reps == kMinReplays);
  CHECK(few.iters == 1);
  CHECK(few.min_us > 0);
  CHECK(few.min_us <= few.median_us);
}

// ---- GEMM epilogues, CUDA graphs, GEMM tuning ---------------------------------------------------

namespace {

namespace fs = std::filesystem;
using testing::Epilogue;

using mlpc::runtime::ScopedEnv;

// Tuning results of one test go to a fresh MLPC_CACHE_DIR, never to the user's cache; tuning
// and graphs are on whatever the environment says.
struct TempCache {
  fs::path dir;
  std::optional<ScopedEnv> cache, tuning, graphs;
  TempCache() {
    std::string tmpl = (fs::temp_directory_path() / "mlpc_gpu_cache_XXXXXX").string();
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    dir = tmpl;
    cache.emplace("MLPC_CACHE_DIR", dir.string());
    tuning.emplace("MLPC_GEMM_TUNING", std::nullopt);
    graphs.emplace("MLPC_CUDA_GRAPH", std::nullopt);
  }
  ~TempCache() {
    cache.reset(), tuning.reset(), graphs.reset();
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  fs::path file() const { return dir / GemmAlgoCache::kFileName; }
};

// One GEMM y = act(x . w^T + b) [+ r].
// Buffers: 0 x[M, K] input, 1 w[N, K] param, 2 b[N] param, 3 r[M, N] input, 4 y[M, N] output.
codegen::Plan epilogue_plan(ir::DType dt, ir::GemmEpilogue e, bool residual, int64_t n,
                            int64_t k) {
  using codegen::BufferRole;
  auto buf = [&](std::string name, std::vector<int64_t> dims, BufferRole role) {
    return make_buffer(std::move(name), dt, std::move(dims), role);
  };
  codegen::Plan plan;
  plan.graph_name = "epilogue_test";
  plan.buffers = {buf("x", {ir::kBatchDim, k}, BufferRole::Input),
                  buf("w", {n, k}, BufferRole::Param), buf("b", {n}, BufferRole::Param),
                  buf("r", {ir::kBatchDim, n}, BufferRole::Input),
                  buf("y", {ir::kBatchDim, n}, BufferRole::Output)};
  codegen::GemmStep gemm;
  gemm.name = "gemm_y";
  gemm.x = 0, gemm.w = 1, gemm.y = 4;
  e.residual = residual;
  gemm.epilogue = e;
  gemm.bias = e.bias ? 2 : -1;
  gemm.residual = residual ? 3 : -1;
  gemm.n = n, gemm.k = k;
  gemm.dtype = dt;
  gemm.ir_nodes = {"y"};
  plan.steps = {gemm};
  plan.inputs = {0, 3};
  plan.outputs = {4};
  return plan;
}

struct EpilogueInputs {
  HostTensor x, w, b, r;
};

// Smooth values like nn.Linear's (inputs O(1), weights O(1/sqrt(k))); about half of the
// pre-activations are negative, so relu and gelu are exercised on both sides.
EpilogueInputs epilogue_inputs(ir::DType dt, int64_t m, int64_t n, int64_t k, double phase = 0) {
  const double scale = 1.5 / std::sqrt(static_cast<double>(k));
  return {make(dt, {m, k}, [&](int64_t i) { return std::sin(0.37 * i + 0.1 + phase); }),
          make(dt, {n, k}, [&](int64_t i) { return scale * std::cos(0.91 * i + 0.3); }),
          make(dt, {n}, [](int64_t i) { return 0.5 * std::sin(1.7 * i); }),
          make(dt, {m, n}, [&](int64_t i) { return std::sin(0.53 * i + 2 * phase); })};
}

void load(Executor& ex, const EpilogueInputs& in) {
  ex.set_tensor("x", in.x);
  ex.set_tensor("w", in.w);
  ex.set_tensor("b", in.b);
  ex.set_tensor("r", in.r);
}

double gelu_tanh(double v) {
  return 0.5 * v * (1.0 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
}

// Half the smallest subnormal: the absolute rounding error near zero.
double tiny(ir::DType dt) {
  return dt == ir::DType::F32 ? std::ldexp(1.0, -150)
         : dt == ir::DType::F16 ? std::ldexp(1.0, -25)
                                : std::ldexp(1.0, -134);
}

// y = round(act(x . w^T + r + b)) in fp64: cuBLASLt adds beta.C and the bias to the fp32
// accumulator and applies the activation before the one rounding to the output type.
// Tolerance per element:
//  - the fp32 accumulation, 2 k u32 sum|x w| (loose), and the two fp32 adds (r, b);
//  - times the activation's slope (relu 1, gelu_tanh < 1.13: 1.2 allowed);
//  - for gelu_tanh, the epilogue's own evaluation. cuBLASLt documents no accuracy for it, and
//    CUTLASS-style epilogues compute tanh with tanh.approx.f32 (MUFU.TANH, relative error about
//    2^-11 per the PTX ISA): 0.5 |v| 2^-10.9 |tanh(.)| for that, plus 8 u32 (1 + |v|) of fp32
//    arithmetic. `tol_accurate` instead assumes an fp32-accurate tanh (64 u32 (1 + |v|)); the
//    test reports how many values exceed it, so the GPU run tells which model holds;
//  - one rounding to the output type, 2 u |y| (a tie decided the other way), plus underflow.
struct Expected {
  std::vector<double> y, tol, tol_accurate;
};

Expected epilogue_reference(const EpilogueInputs& in, const ir::GemmEpilogue& e, bool residual,
                            int64_t m,
                            int64_t n, int64_t k) {
  const ir::DType dt = in.x.dtype;
  const double u = unit_roundoff(dt), u32 = std::ldexp(1.0, -24);
  Expected out;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0, abs_sum = 0;
      for (int64_t t = 0; t < k; ++t) {
        double p = in.x.data[i * k + t] * in.w.data[j * k + t];
        s += p;
        abs_sum += std::abs(p);
      }
      const double r = residual ? in.r.data[i * n + j] : 0.0;
      const double b = e.bias ? in.b.data[j] : 0.0;
      const double v = s + b;
      double a = v, slope = 1.0, eval = 0.0, eval_accurate = 0.0;
      if (e.act == ir::Op::Relu) a = std::max(v, 0.0);
      if (e.act == ir::Op::GeluTanh) {
        a = gelu_tanh(v);
        slope = 1.2;
        const double th = std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v));
        eval = 0.5 * std::abs(v) * std::exp2(-10.9) * std::abs(th) + 8 * u32 * (1 + std::abs(v));
        eval_accurate = 64 * u32 * (1 + std::abs(v));
      }
      const double y = round_to(dt, a + r);
      const double pre = 2 * k * u32 * abs_sum + 4 * u32 * (std::abs(s) + std::abs(r) + std::abs(b));
      const double rest = slope * pre + 2 * u * std::abs(y) + tiny(dt);
      out.y.push_back(y);
      out.tol.push_back(rest + eval);
      out.tol_accurate.push_back(rest + eval_accurate);
    }
  return out;
}

// For gelu_tanh: how many values miss the fp32-accurate-tanh tolerance (informational).
void report_gelu_accuracy(const HostTensor& got, const Expected& ref, const std::string& what) {
  int over = 0;
  double worst = 0;
  for (size_t i = 0; i < ref.y.size() && i < got.data.size(); ++i) {
    double ratio = std::abs(got.data[i] - ref.y[i]) / ref.tol_accurate[i];
    worst = std::max(worst, ratio);
    over += ratio > 1;
  }
  WARN(fmt::format("{}: cuBLASLt GELU epilogue vs an fp32-accurate tanh: {} of {} values outside "
                   "(worst ratio {:.3g})",
                   what, over, ref.y.size(), worst));
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

TEST_CASE("cuBLASLt epilogues and residuals match the fp64 reference", "[gpu]") {
  // Every dtype, fp32 included: cublasLt.h puts no dtype restriction on the BIAS, RELU_BIAS and
  // GELU_BIAS epilogues (the bias takes the output's type), and PyTorch's fp32
  // addmm-with-activation path uses them. If cuBLASLt offered no algorithm, bind_batch would
  // throw "cuBLASLt has no algorithm for GEMM gemm_y (f32, ..., epilogue gelu_tanh(x.W^T))".
  // A residual goes with no activation: cuBLASLt adds C before it (passes/gemm_epilogue.h).
  TempCache cache;
  auto dt = GENERATE(ir::DType::BF16, ir::DType::F16, ir::DType::F32);
  const ir::GemmEpilogue gelu_tanh{.act = ir::Op::GeluTanh};
  auto e = GENERATE_COPY(Epilogue::None, Epilogue::Bias, Epilogue::Relu, Epilogue::ReluBias,
                         gelu_tanh, Epilogue::GeluTanhBias);
  auto residual = GENERATE(false, true);
  if (residual && e.act) return;
  const int64_t n = 96, k = 160;
  INFO(ir::dtype_name(dt) << ", epilogue " << ir::epilogue_formula(e)
                          << (residual ? " + residual" : ""));
  codegen::Plan plan = epilogue_plan(dt, e, residual, n, k);
  Executor ex(plan, {});
  for (int64_t m : {37, 300}) {
    INFO("batch " << m);
    EpilogueInputs in = epilogue_inputs(dt, m, n, k);
    ex.bind_batch(m);
    load(ex, in);
    ex.run();
    Expected ref = epilogue_reference(in, e, residual, m, n, k);
    HostTensor y = ex.outputs().at(0);
    check_close(y, ref.y, ref.tol, false, "y = act(x.w^T + b) + r");
    if (e.act == ir::Op::GeluTanh)
      report_gelu_accuracy(y, ref, fmt::format("{}{} batch {}", ir::dtype_name(dt),
                                               residual ? " + residual" : "", m));
    ex.run();  // the graph replay
    check_close(ex.outputs().at(0), ref.y, ref.tol, false, "y, replayed");
    CHECK(ex.uses_cuda_graph());
    std::vector<GemmChoice> choices = ex.gemm_choices();
    REQUIRE(choices.size() == 1);
    CHECK(choices[0].candidates >= 1);
  }
}

TEST_CASE("a CUDA graph replay equals an eager run bit for bit", "[gpu]") {
  TempCache cache;  // the eager executor tunes; the graphed one loads the same algorithms
  auto dt = GENERATE(ir::DType::BF16, ir::DType::F32);
  INFO(ir::dtype_name(dt));
  const ExecutorOptions eager_opts{.tune_gemms = true, .cuda_graph = false};

  SECTION("one GEMM with bias and residual") {
    const int64_t m = 256, n = 96, k = 160;
    codegen::Plan plan = epilogue_plan(dt, Epilogue::Bias, true, n, k);
    Executor eager(plan, {}, eager_opts);
    Executor graphed(plan, {});
    // New input values the second time: same pointers, so the captured graph sees them.
    for (double phase : {0.0, 1.0}) {
      INFO("phase " << phase);
      EpilogueInputs in = epilogue_inputs(dt, m, n, k, phase);
      for (Executor* ex : {&eager, &graphed}) {
        ex->bind_batch(m);
        load(*ex, in);
      }
      eager.run();
      graphed.run();
      graphed.run();
      HostTensor a = eager.outputs().at(0), b = graphed.outputs().at(0);
      CHECK(a.data == b.data);
      Expected ref = epilogue_reference(in, Epilogue::Bias, true, m, n, k);
      check_close(b, ref.y, ref.tol, false, "graphed y");
    }
    CHECK_FALSE(eager.uses_cuda_graph());
    CHECK(eager.graph_captures() == 0);
    CHECK(graphed.uses_cuda_graph());
    CHECK(graphed.graph_captures() == 1);
    REQUIRE(eager.gemm_choices().size() == 1);
    REQUIRE(graphed.gemm_choices().size() == 1);
    CHECK_FALSE(eager.gemm_choices()[0].from_cache);
    CHECK(graphed.gemm_choices()[0].from_cache);
    CHECK(graphed.gemm_choices()[0].heuristic_index == eager.gemm_choices()[0].heuristic_index);
  }

  SECTION("a GEMM and an NVRTC kernel") {
    const int64_t m = 200;
    codegen::Plan plan = linear_plan(dt);
    Executor eager(plan, compile_kernels(plan), eager_opts);
    Executor graphed(plan, compile_kernels(plan));
    Inputs in = smooth(dt, m);
    for (int pass = 0; pass < 2; ++pass) {
      if (pass == 1)  // new values for x
        in.x = make(dt, {m, kK}, [](int64_t i) { return std::cos(0.29 * i + 0.7); });
      for (Executor* ex : {&eager, &graphed}) {
        ex->bind_batch(m);
        ex->set_tensor("x", in.x);
        ex->set_tensor("w", in.w);
        ex->set_tensor("b", in.b);
      }
      eager.run();
      graphed.run();
      graphed.run();
      CHECK(eager.download(3).data == graphed.download(3).data);
      HostTensor y = graphed.outputs().at(0);
      CHECK(eager.outputs().at(0).data == y.data);
      Reference r = reference(in, m);
      check_close(y, r.y, r.tol_y, false, "graphed y = t + b");
    }
    CHECK(graphed.uses_cuda_graph());
    CHECK(graphed.graph_captures() == 1);
  }
}

TEST_CASE("rebinding a batch size seen before reuses its arena and CUDA graph", "[gpu]") {
  TempCache cache;
  codegen::Plan plan = linear_plan(ir::DType::BF16);
  Executor ex(plan, compile_kernels(plan));
  auto run_at = [&](int64_t m) {
    INFO("batch " << m);
    Inputs in = smooth(ir::DType::BF16, m);
    ex.bind_batch(m);
    ex.set_tensor("x", in.x);
    ex.run();
    Reference r = reference(in, m);
    check_close(ex.outputs().at(0), r.y, r.tol_y, false, "y");
  };
  Inputs params = smooth(ir::DType::BF16, 1);  // w and b do not depend on the batch
  ex.bind_batch(64);
  ex.set_tensor("w", params.w);
  ex.set_tensor("b", params.b);
  run_at(64);
  CHECK(ex.uses_cuda_graph());
  CHECK(ex.graph_captures() == 1);
  void* x64 = ex.device_ptr(0);
  void* y64 = ex.device_ptr(4);

  run_at(16);
  CHECK(ex.graph_captures() == 2);
  CHECK(ex.bound_batches() == 2);

  ex.bind_batch(64);
  CHECK(ex.device_ptr(0) == x64);  // the same arena
  CHECK(ex.device_ptr(4) == y64);
  CHECK_THROWS_WITH(ex.run(), Contains("input x was not set"));  // inputs are set per switch
  run_at(64);
  CHECK(ex.uses_cuda_graph());
  CHECK(ex.graph_captures() == 2);  // replayed, not captured again
  CHECK(ex.bound_batches() == 2);

  // More batch sizes than kMaxBatches: the least recently bound arenas (and graphs) go.
  for (int64_t m = 1; m <= 10; ++m) run_at(m);
  CHECK(ex.bound_batches() == Executor::kMaxBatches);
  CHECK(ex.graph_captures() == 12);
  run_at(64);  // evicted above: a fresh arena and a new capture
  CHECK(ex.graph_captures() == 13);
  run_at(10);  // still there
  CHECK(ex.graph_captures() == 13);
}

TEST_CASE("GEMM tuning picks a timed candidate and a second executor loads it from disk", "[gpu]") {
  TempCache cache;
  const int64_t m = 512, n = 768, k = 768;
  const ir::DType dt = ir::DType::BF16;
  codegen::Plan plan = epilogue_plan(dt, Epilogue::GeluTanhBias, false, n, k);
  EpilogueInputs in = epilogue_inputs(dt, m, n, k);
  Expected ref = epilogue_reference(in, Epilogue::GeluTanhBias, false, m, n, k);
  auto run_once = [&](Executor& ex) {
    ex.bind_batch(m);
    load(ex, in);
    ex.run();
    return ex.outputs().at(0);
  };

  Executor first(plan, {});
  CHECK(first.options().tune_gemms);
  HostTensor y1 = run_once(first);
  check_close(y1, ref.y, ref.tol, false, "y (tuned)");
  std::vector<GemmChoice> c1 = first.gemm_choices();
  REQUIRE(c1.size() == 1);
  const GemmChoice& t = c1[0];
  WARN(fmt::format("{}: heuristic #{} of {} candidates, {:.2f} us", t.key, t.heuristic_index,
                   t.candidates, t.us));
  CHECK(t.step == "gemm_y");
  CHECK(t.key.rfind(device_arch() + "|bf16|512x768x768|gelu_bias|res0|cublasLt", 0) == 0);
  CHECK(t.candidates >= 1);
  CHECK(t.candidates <= GemmTuner::kMaxCandidates);
  CHECK(t.heuristic_index >= 0);
  CHECK(t.heuristic_index < t.candidates);
  CHECK(t.us > 0);
  CHECK_FALSE(t.from_cache);
  CHECK(t.launches >= t.candidates);  // every candidate launched at least once
  CHECK(t.tuning_ms > 0);
  REQUIRE(fs::exists(cache.file()));
  nlohmann::json j = nlohmann::json::parse(read_text(cache.file()));
  REQUIRE(j["entries"].contains(t.key));
  CHECK(j["entries"][t.key]["heuristic_index"] == t.heuristic_index);

  Executor second(plan, {});
  HostTensor y2 = run_once(second);
  std::vector<GemmChoice> c2 = second.gemm_choices();
  REQUIRE(c2.size() == 1);
  CHECK(c2[0].from_cache);
  CHECK(c2[0].key == t.key);
  CHECK(c2[0].heuristic_index == t.heuristic_index);
  CHECK(c2[0].candidates == t.candidates);
  CHECK(c2[0].us == t.us);
  CHECK(c2[0].launches == 0);  // nothing timed
  CHECK(y2.data == y1.data);  // the same algorithm: the same bits

  SECTION("MLPC_GEMM_TUNING=0 uses heuristic #0 and leaves the cache alone") {
    ScopedEnv off("MLPC_GEMM_TUNING", "0");
    std::string before = read_text(cache.file());
    Executor plain(plan, {});
    CHECK_FALSE(plain.options().tune_gemms);
    HostTensor y = run_once(plain);
    check_close(y, ref.y, ref.tol, false, "y (heuristic #0)");
    std::vector<GemmChoice> c = plain.gemm_choices();
    REQUIRE(c.size() == 1);
    CHECK(c[0].heuristic_index == 0);
    CHECK(c[0].candidates == 1);
    CHECK(c[0].us == 0);
    CHECK_FALSE(c[0].from_cache);
    CHECK(read_text(cache.file()) == before);
  }

  SECTION("a cached algorithm that fails cublasLtMatmulAlgoCheck is tuned again") {
    GemmAlgoRecord bogus;
    bogus.algo.fill(~uint64_t{0});
    bogus.us = 1;
    bogus.heuristic_index = 0;
    bogus.candidates = 1;
    GemmAlgoCache(cache.dir.string()).store(t.key, bogus);
    Executor third(plan, {});
    HostTensor y = run_once(third);
    check_close(y, ref.y, ref.tol, false, "y (re-tuned)");
    std::vector<GemmChoice> c = third.gemm_choices();
    REQUIRE(c.size() == 1);
    CHECK_FALSE(c[0].from_cache);
    CHECK(c[0].us > 0);
    auto again = GemmAlgoCache(cache.dir.string()).find(t.key);
    REQUIRE(again);
    CHECK(again->algo != bogus.algo);  // the file holds the re-tuned choice
  }
}

TEST_CASE("tuning a GEMM of milliseconds stays within its budget", "[gpu]") {
  // mlp3's fc2 (f32 8192 x 4096 x 4096 with its bias): before budgets every candidate took 2 +
  // 15 launches.
  TempCache cache;
  const int64_t m = 8192, n = 4096, k = 4096;
  const ir::DType dt = ir::DType::F32;
  codegen::Plan plan = epilogue_plan(dt, Epilogue::Bias, false, n, k);
  Executor ex(plan, {});
  ex.bind_batch(m);
  load(ex, epilogue_inputs(dt, m, n, k));
  ex.run();
  std::vector<GemmChoice> c = ex.gemm_choices();
  REQUIRE(c.size() == 1);
  const GemmChoice& t = c[0];
  WARN(fmt::format("{}: heuristic #{} of {} candidates, {:.1f} us; {} launches, {:.1f} ms of GPU "
                   "time (budget {:.0f} ms)", t.key, t.heuristic_index, t.candidates, t.us,
                   t.launches, t.tuning_ms, kTuneBudgetUs / 1e3));
  REQUIRE(t.us > 0);
  CHECK_FALSE(t.from_cache);
  CHECK(t.launches >= t.candidates);
  // Within the budget, or past it only by its floor (one launch of each candidate, a second of
  // one, the winner's median), taking candidates up to 3x slower than the winner.
  CHECK(t.tuning_ms <= std::max(1.1 * kTuneBudgetUs / 1e3,
                                3.0 * (t.candidates + 1 + kTuneMinSamples) * t.us / 1e3));
  // Under a quarter of 17 launches of each candidate at the winner's speed (no candidate is
  // faster than the winner, so tuning cost more than that before).
  if (t.candidates >= 6) CHECK(t.tuning_ms * 4 < 17.0 * t.candidates * t.us / 1e3);
}
