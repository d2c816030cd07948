#include "codegen/gated_gemm_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string_view>

#include "codegen/cuda_ops.h"
#include "codegen/gated_gemm_kernel.h"
#include "codegen/mma_gemm_kernel.h"
#include "codegen/pointwise_kernel.h"
#include "codegen/rewrite_site.h"
#include "ir/error.h"

namespace mlpc::codegen {

namespace {

// The device function `name`(x) = x * sigmoid(s) = x / (1 + exp(-s)), with exp(-s) given as
// exp2(`exp2_arg`): the special-function unit's exp2 and reciprocal, one instruction each.
std::string x_times_sigmoid(std::string_view name, std::string_view exp2_arg) {
  return fmt::format(
      "__device__ __forceinline__ float {}(float x) {{\n"
      "  float e, r;\n"
      "  asm(\"ex2.approx.ftz.f32 %0, %1;\" : \"=f\"(e) : \"f\"({}));\n"
      "  asm(\"rcp.approx.ftz.f32 %0, %1;\" : \"=f\"(r) : \"f\"(1.0f + e));\n"
      "  return x * r;\n}}\n",
      name, exp2_arg);
}

}  // namespace

// Helpers for the combine: the epilogue runs once per output inside a compute-bound kernel, so
// gelu_tanh and silu are x * sigmoid(2z) and x * sigmoid(x) on the special-function unit's
// exp2 and reciprocal (relative error ~1e-6, far below bf16's 4e-3) instead of tanhf and expf,
// which cost the kernel several percent (bench/gated_gemm_probe). Written as the two PTX
// instructions rather than __expf and __fdividef, whose range handling (denormals, a divisor
// past 2^126) adds instructions to each of the epilogue's 64 unrolled evaluations: both the
// kernel's NVRTC build (the longest path of a cold -O2 compile) and the kernel get shorter (the
// epilogue runs while the tensor cores wait; docs/benchmarks.md has the numbers). Same results where it matters:
// exp2 of a large argument is inf, its reciprocal 0, so the function goes to 0 (or x) as before.
std::string gated_combine_helper(ir::Op op) {
  switch (op) {
    case ir::Op::GeluTanh:  // exp(-2z) = exp2(x * (c1 + c3 x^2)), z = sqrt(2/pi)(x + 0.044715 x^3)
      return x_times_sigmoid("mlpc_gelu_tanh", "x * fmaf(-0.1029432396f, x * x, -2.3022081981f)");
    case ir::Op::Silu:  // exp(-x) = exp2(-x log2(e))
      return x_times_sigmoid("mlpc_silu", "-1.4426950409f * x");
    default: return std::string(cuda_helper(op));
  }
}

namespace {

struct Match {
  std::vector<size_t> gemm_steps;  // plan order
  int x = -1, wg = -1, wu = -1;
  std::string g_var, u_var;  // what the region's element function calls the two products
  int64_t n = 0, k = 0;
};

bool plain(const GemmStep& s) { return s.epilogue.plain(); }

std::optional<Match> match(const Plan& plan, const ir::Node& region,
                           size_t kernel_step, const std::map<int, size_t>& producer,
                           const std::map<int, int>& readers) {
  const auto& kernel = std::get<KernelStep>(plan.steps[kernel_step]);
  if (!kernel.as<Elementwise>()) return std::nullopt;
  const ir::Graph& body = *region.body;
  const std::vector<ir::NodeId> ins = body.inputs();
  const ir::DType dtype = region.type.dtype;
  if (dtype != ir::DType::BF16 && dtype != ir::DType::F16) return std::nullopt;
  auto gemm_of = [&](int buffer) -> const GemmStep* {
    auto it = producer.find(buffer);
    if (it == producer.end()) return nullptr;
    const auto* s = std::get_if<GemmStep>(&plan.steps[it->second]);
    auto r = readers.find(buffer);
    bool only_this = r != readers.end() && r->second == 1 &&
                     plan.buffers[buffer].role == BufferRole::Intermediate;
    return s && plain(*s) && s->dtype == dtype && only_this ? s : nullptr;
  };
  std::vector<const ir::Node*> slices;
  for (const ir::Node& n : body.nodes)
    if (n.op == ir::Op::Slice) slices.push_back(&n);
  Match m;
  if (kernel.inputs.size() == 2 && slices.empty()) {  // gate and up apart
    const GemmStep* a = gemm_of(kernel.inputs[0]);
    const GemmStep* b = gemm_of(kernel.inputs[1]);
    if (!a || !b || a->x != b->x || a->n != b->n || a->k != b->k) return std::nullopt;
    if (body.node(ins[0]).type.shape != region.type.shape ||
        body.node(ins[1]).type.shape != region.type.shape)
      return std::nullopt;
    m.gemm_steps = {producer.at(kernel.inputs[0]), producer.at(kernel.inputs[1])};
    std::sort(m.gemm_steps.begin(), m.gemm_steps.end());
    m.x = a->x, m.wg = a->w, m.wu = b->w, m.n = a->n, m.k = a->k;
    m.g_var = element_var(body.node(ins[0]).name);
    m.u_var = element_var(body.node(ins[1]).name);
  } else if (kernel.inputs.size() == 1 && slices.size() == 2) {  // merged: read through slices
    const GemmStep* mg = gemm_of(kernel.inputs[0]);
    if (!mg || mg->n % 2 != 0 || !plan.buffers[mg->w].stacked) return std::nullopt;
    const int64_t half = mg->n / 2;
    std::vector<int> views;
    for (size_t i = 0; i < plan.buffers.size(); ++i)
      if (plan.buffers[i].view_of == mg->w) views.push_back(static_cast<int>(i));
    if (views.size() != 2) return std::nullopt;
    std::sort(views.begin(), views.end(), [&](int a, int b) {
      return plan.buffers[a].view_offset < plan.buffers[b].view_offset;
    });
    for (int v : views)
      if (plan.buffers[v].type.shape.dims != std::vector<int64_t>{half, mg->k}) return std::nullopt;
    // The input is read only through the two slices, one per half.
    for (const ir::Node& n : body.nodes)
      if (n.op != ir::Op::Slice && std::count(n.operands.begin(), n.operands.end(), ins[0]))
        return std::nullopt;
    const ir::Node* lo = slices[0]->scalar == 0 ? slices[0] : slices[1];
    const ir::Node* hi = lo == slices[0] ? slices[1] : slices[0];
    if (lo->scalar != 0 || hi->scalar != static_cast<double>(half) ||
        lo->type.shape != region.type.shape || hi->type.shape != region.type.shape)
      return std::nullopt;
    m.gemm_steps = {producer.at(kernel.inputs[0])};
    m.x = mg->x, m.wg = views[0], m.wu = views[1], m.n = half, m.k = mg->k;
    m.g_var = element_var(lo->name);
    m.u_var = element_var(hi->name);
  } else {
    return std::nullopt;
  }
  // TMA: 16-byte aligned rows of x, the weights and y.
  if (region.type.shape.last() != m.n || m.k % 8 != 0 || m.n % 8 != 0) return std::nullopt;
  return m;
}

// The region's kernel name without its slices ("mlpc_fused_slice_gelu_tanh_mul_0" ->
// "mlpc_fused_gelu_tanh_mul_0"): in the gated kernel the slices of a merged gate|up product are
// reads of two weight halves, so both merge outcomes name (and build) the same kernel. Where
// kernel_symbol cut a long op list at four, the slice took a place and the names differ: then
// the two outcomes build their own copy, as before.
std::string gated_kernel_name(std::string name) {
  const std::string slice = "_slice";
  for (size_t at = name.find(slice + "_"); at != std::string::npos; at = name.find(slice + "_", at))
    name.erase(at, slice.size());
  return name;
}

// What a gated kernel's combine is made of: the device functions it calls, and the body of
// mlpc_gate_combine(g, u).
struct Combine {
  std::string helpers, body;
};

Combine combine_of(const ir::Node& region, const Match& m) {
  const ir::Graph& body = *region.body;
  std::set<ir::Op> done;
  Combine c;
  for (const ir::Node& n : body.nodes)
    if (done.insert(n.op).second) c.helpers += gated_combine_helper(n.op);
  // A cast rounds through bf16/f16 with the headers' conversions; nothing else needs them.
  if (done.count(ir::Op::Cast)) c.helpers = std::string(cuda_includes()) + c.helpers;
  c.body = fmt::format("const float {} = g;\n  const float {} = u;\n{}", m.g_var, m.u_var,
                       element_body(body));
  return c;
}

// The first line of either gated kernel's source (it names no IR value: below).
std::string gated_header(const std::string& name, const ir::Node& region, const Match& m) {
  return fmt::format("// {}: generated by mlpc: a gated GEMM over {}[rows, {}] x [{}, {}]\n", name,
                     ir::dtype_name(region.type.dtype), m.k, m.n, m.k);
}

KernelStep gated_step(const Plan& plan, const ir::Node& region, const KernelStep& kernel,
                      const Match& m, const Combine& c) {
  KernelStep k;
  k.name = gated_kernel_name(kernel.name);
  for (size_t s : m.gemm_steps)
    for (const std::string& v : std::get<GemmStep>(plan.steps[s]).ir_nodes) k.ir_nodes.push_back(v);
  for (const std::string& v : kernel.ir_nodes) k.ir_nodes.push_back(v);
  // The source names no IR value: a cold -O2 compile builds, ahead of the merge decision, the
  // plans of both outcomes, and the gated kernel of gate|up merged (read back as two halves) is
  // the one of gate and up apart. Same source, same cache key: one NVRTC build serves both
  // (the longest build of the compile). ir_nodes say what it computes.
  GatedGemmConfig config;
  config.split_tail = gated_gemm_max_splits(m.k) > 1;
  k.source = gated_header(k.name, region, m) +
             generate_gated_gemm_source(k.name, region.type.dtype, c.helpers, c.body, config);
  k.inputs = {m.x, m.wg, m.wu};
  k.output = kernel.output;
  k.row_len = m.n;
  k.kind = GatedGemm{.k = m.k, .smem_bytes = gated_gemm_smem_bytes(config)};
  k.ops = {"matmul", "matmul"};
  for (const std::string& op : kernel.ops)
    if (op != "slice") k.ops.push_back(op);
  return k;
}

// The same gated GEMM as an mma.sync kernel (codegen/mma_gemm_kernel.h), for few rows; nullopt
// where its shape rules refuse. Named apart from the Hopper kernel, same combine.
std::optional<KernelStep> mma_gated_step(const KernelStep& hopper, const ir::Node& region,
                                         const Match& m, const Combine& c) {
  if (!mma_gemm_fits(region.type.dtype, m.n, m.k)) return std::nullopt;
  KernelStep k;
  k.name = "mma_" + hopper.name;
  k.source = gated_header(k.name, region, m) +
             generate_mma_gated_source(k.name, region.type.dtype, m.n, m.k, c.helpers, c.body);
  k.inputs = hopper.inputs;
  k.output = hopper.output;
  k.row_len = m.n;
  k.kind = GatedMmaGemm{mma_gemm_launch(m.n, m.k, /*gated=*/true)};
  k.ops = hopper.ops;
  k.ir_nodes = hopper.ir_nodes;
  return k;
}

// Each step's written buffer, and how many steps (plus plan outputs) read each buffer.
void index_plan(const Plan& plan, std::map<int, size_t>& producer, std::map<int, int>& readers) {
  producer.clear();
  readers.clear();
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const std::vector<int> bufs = step_buffers(plan.steps[i]);
    producer[bufs.back()] = i;
    for (size_t j = 0; j + 1 < bufs.size(); ++j)
      if (bufs[j] >= 0) ++readers[bufs[j]];
  }
  for (int b : plan.outputs) ++readers[b];
}

// Calls f(region, kernel step index, match) for each gated pattern; f returns whether it changed
// the plan (then the index is rebuilt).
template <typename F>
void for_each_match(const Plan& plan, const ir::Graph& g, F&& f) {
  std::map<int, size_t> producer;
  std::map<int, int> readers;
  index_plan(plan, producer, readers);
  for (const ir::Node& n : g.nodes) {
    if (n.op != ir::Op::FusedPointwise || !n.body) continue;
    auto it = std::find_if(plan.steps.begin(), plan.steps.end(), [&](const Step& s) {
      const auto* k = std::get_if<KernelStep>(&s);
      return k && k->name == n.symbol;
    });
    if (it == plan.steps.end()) continue;
    const size_t ks = static_cast<size_t>(it - plan.steps.begin());
    if (auto m = match(plan, n, ks, producer, readers)) {
      if (f(n, ks, *m)) index_plan(plan, producer, readers);  // the plan changed
    }
  }
}

}  // namespace

void apply_gated_gemms(Plan& plan, const ir::Graph& g, const Lowering& lowering) {
  if (!lowering.looks_at(passes::ChoiceKind::Gated)) return;
  bool changed = false;
  for_each_match(plan, g, [&](const ir::Node& region, size_t ks, const Match& m) {
    const Combine combine = combine_of(region, m);
    const KernelStep hopper =
        gated_step(plan, region, std::get<KernelStep>(plan.steps[ks]), m, combine);
    // The site is recorded under the Hopper kernel's name whichever kernel it takes: one line
    // per gated pattern.
    RewriteSite site{.kind = passes::ChoiceKind::Gated, .step = hopper.name, .n = m.n, .k = m.k,
                     .dtype = region.type.dtype, .plan = &plan};
    for (size_t s : m.gemm_steps) {
      const auto& gemm = std::get<GemmStep>(plan.steps[s]);
      site.nodes.insert(site.nodes.end(), gemm.ir_nodes.begin(), gemm.ir_nodes.end());
      site.replaced.push_back(gemm);
    }
    site.nodes.push_back(region.name);
    site.replaced.push_back(plan.steps[ks]);
    if (auto mma = mma_gated_step(hopper, region, m, combine))
      site.options.push_back({.impl = ir::Impl::GatedMma, .rewritten = {std::move(*mma)}});
    site.options.insert(site.options.begin(),
                        SiteOption{.impl = ir::Impl::GatedWgmma, .rewritten = {hopper}});
    const std::optional<size_t> taken = lowering.pick(site);
    lowering.record(plan, site, taken.has_value());
    if (!taken) return false;
    plan.steps[ks] = std::move(site.options[*taken].rewritten.front());
    for (auto s = m.gemm_steps.rbegin(); s != m.gemm_steps.rend(); ++s)
      plan.steps.erase(plan.steps.begin() + static_cast<std::ptrdiff_t>(*s));
    changed = true;
    return true;
  });
  if (changed) drop_unused_buffers(plan);
}

}  // namespace mlpc::codegen
