// The runtime on a real GPU, with a Plan built by hand: one cuBLASLt GEMM (y = x . w^T) and one
// hand-written kernel adding a row-vector bias, checked against an fp64 computation.
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>

#include <fmt/format.h>

#include "runtime/device.h"
#include "runtime/executor.h"
#include "runtime/nvrtc_compiler.h"
#include "runtime/timing.h"

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

// Buffers: 0 x[M, 64] input, 1 w[48, 64] param, 2 b[48] param, 3 t[M, 48], 4 y[M, 48] output.
codegen::Plan linear_plan(ir::DType dt) {
  using codegen::BufferRole;
  auto buf = [&](std::string name, std::vector<int64_t> dims, BufferRole role) {
    codegen::Buffer b;
    b.name = std::move(name);
    b.type = ir::TensorType{dt, ir::Shape{std::move(dims)}};
    b.role = role;
    return b;
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
}
